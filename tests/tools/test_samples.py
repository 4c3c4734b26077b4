"""tests.factories: the synthetic sites other tests rely on are deterministic and say what they claim."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from detemplate.io.sources import iter_inputs
from selectolax.lexbor import LexborHTMLParser

from tests.factories import interleave, make_page, make_site, norm, write_jsonl

_DIGEST = (
    "import hashlib; from tests.factories import make_site; "
    "print(hashlib.sha256(''.join(p.page.html for p in make_site('d.example', 5, seed=3, layout='news'))"
    ".encode()).hexdigest())"
)


def test_same_site_in_another_process() -> None:
    here = hashlib.sha256("".join(p.page.html for p in make_site("d.example", 5, seed=3, layout="news")).encode())
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", _DIGEST], capture_output=True, text=True, cwd=root, check=True)
    assert out.stdout.strip() == here.hexdigest()


def test_gold_is_the_text_of_the_content_container() -> None:
    for layout in ("blog", "docs", "news"):
        for sp in make_site("g.example", 4, seed=1, layout=layout):
            container = LexborHTMLParser(sp.page.html).css_first(sp.content_selector)
            assert container is not None
            assert norm(container.text(separator=" ")) == norm(" ".join(sp.gold_blocks))
            body = norm(LexborHTMLParser(sp.page.html).body.text(separator=" "))  # type: ignore[union-attr]
            assert all(t in body for t in sp.template_texts)


def test_pages_share_the_template_and_differ_in_content() -> None:
    site = make_site("s.example", 6, seed=2)
    assert len({sp.page.url for sp in site}) == 6
    assert len({sp.gold for sp in site}) == 6
    assert len({sp.template_texts for sp in site}) == 1
    assert make_site("s.example", 6, seed=3)[0].gold != site[0].gold


def test_redesign_changes_every_template_text_but_not_the_container() -> None:
    site = make_site("r.example", 6, redesign=3)
    assert [sp.version for sp in site] == [0, 0, 0, 1, 1, 1]
    before, after = set(site[0].template_texts), set(site[3].template_texts)
    assert before - after == before - {site[0].template_texts[0]}  # only the site name stays
    assert site[0].content_selector == site[3].content_selector


def test_interleave_and_write_jsonl(tmp_path: Path) -> None:
    mixed = interleave(make_site("a.example", 3), make_site("b.example", 1))
    assert [sp.page.host for sp in mixed] == ["a.example", "b.example", "a.example", "a.example"]
    path = write_jsonl([*mixed, make_page()], tmp_path / "m.jsonl.gz", gz=True)
    assert [p.url for p in iter_inputs([path])] == [sp.page.url for sp in mixed] + [make_page().url]
    assert make_page(host="x.example").host == "x.example"
