"""scripts/crawl_generators.py: a run's output scored against each generator's content element."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "crawl_generators.py"

CONTENT = "The widget renders a chart of the series it is given and returns its figure."


def _page(n: int) -> str:
    return (f"<html><body><div class='sphinxsidebar'>Navigation Index Search</div>"
            f"<div role='main'><h1>Page {n}</h1><p>{CONTENT}</p></div><footer>Copyright</footer></body></html>")


def _crawl(tmp: Path) -> Path:
    crawl = tmp / "crawl"
    crawl.mkdir()
    hosts = [{"host": "docs.example", "generator": "Sphinx"}, {"host": "blog.example", "generator": "Hugo"}]
    sources = {"sources": hosts}
    (crawl / "sources.json").write_text(json.dumps(sources), encoding="utf-8")
    with gzip.open(crawl / "pages.jsonl.gz", "wt", encoding="utf-8") as fh:
        for n in range(3):
            page = {"url": f"https://docs.example/{n}.html", "host": "docs.example", "html": _page(n)}
            fh.write(json.dumps(page) + "\n")
        fh.write(json.dumps({"url": "https://blog.example/", "host": "blog.example", "html": _page(9)}) + "\n")
    return crawl


def _output(tmp: Path, keep_content: bool) -> Path:
    out = tmp / f"out-{keep_content}.jsonl"
    lines = []
    for n in (0, 1, 2, 9):
        host = "blog.example" if n == 9 else "docs.example"
        url = "https://blog.example/" if n == 9 else f"https://docs.example/{n}.html"
        blocks = [{"text": "Navigation Index Search"}, {"text": f"Page {n} {CONTENT}"}, {"text": "Copyright"}]
        text = f"Page {n} {CONTENT}" if keep_content else "Navigation Index Search"
        lines.append(json.dumps({"url": url, "host": host, "page_no": n + 1, "text": text, "blocks": blocks}))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def _run(crawl: Path, out: Path) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), str(crawl), str(out)], capture_output=True, text=True,
                          check=True, timeout=120)
    return done.stdout


def test_the_content_element_is_the_gold_and_keeping_all_the_baseline(tmp_path: Path) -> None:
    crawl = _crawl(tmp_path)
    good = _run(crawl, _output(tmp_path, keep_content=True))
    # Only the Sphinx host is scored (Hugo has no element in SELECTORS): its 3 pages.
    assert "1 hosts, 3 pages: macro F1 1.000" in good
    assert "under keeping all (by more than 0.005): 0 host(s)" in good
    assert "first pages: 1, F1 1.000" in good  # the Sphinx host's page 1 (the Hugo page is not scored)
    bad = _run(crawl, _output(tmp_path, keep_content=False))
    assert "macro F1 0.000" in bad
    assert "under keeping all (by more than 0.005): 1 host(s)" in bad
    assert "Sphinx, docs.example" in bad
    assert "more than 0.05 under the page whole: 1" in bad
