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


def _output(tmp: Path, keep_content: bool, excerpt: int | None = None) -> Path:
    out = tmp / f"out-{keep_content}-{excerpt}.jsonl"
    lines = []
    for n in (0, 1, 2, 9):
        host = "blog.example" if n == 9 else "docs.example"
        url = "https://blog.example/" if n == 9 else f"https://docs.example/{n}.html"
        texts = ["Navigation Index Search", f"Page {n} {CONTENT}", "Copyright"]
        blocks = [{"text": t[:excerpt]} for t in texts]  # a record's blocks carry an excerpt of their text
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


def _keeping_all(report: str) -> str:
    return report.split("keeping all ")[1].split(";")[0]


def test_keeping_all_is_the_pages_body_text_not_the_records_block_excerpts(tmp_path: Path) -> None:
    crawl = _crawl(tmp_path)
    whole = _run(crawl, _output(tmp_path, keep_content=True))
    excerpts = _run(crawl, _output(tmp_path, keep_content=True, excerpt=12))
    # Gold "Page n" + CONTENT (17 tokens); the body adds "Navigation Index Search" and "Copyright":
    # P 17/21, R 1.
    assert _keeping_all(whole) == _keeping_all(excerpts) == f"{2 * 17 / 21 / (17 / 21 + 1):.3f}"


def test_the_gold_leaves_out_mathml_a_reader_does_not_see(tmp_path: Path) -> None:
    crawl = _crawl(tmp_path)
    formula = "<math><mn>1</mn><annotation encoding='application/x-tex'>1</annotation></math><span>1</span>"
    with gzip.open(crawl / "pages.jsonl.gz", "wt", encoding="utf-8") as fh:
        for n in range(3):
            html = _page(n).replace("</p></div>", f" {formula}</p></div>")
            fh.write(json.dumps({"url": f"https://docs.example/{n}.html", "host": "docs.example", "html": html}) + "\n")
    out = tmp_path / "out.jsonl"
    out.write_text("".join(
        json.dumps({"url": f"https://docs.example/{n}.html", "host": "docs.example", "page_no": n + 1,
                    "text": f"Page {n} {CONTENT} 1", "blocks": []}) + "\n" for n in range(3)
    ), encoding="utf-8")
    assert "macro F1 1.000" in _run(crawl, out)  # the rendered "1" once, as the engine keeps it


def test_removed_lists_the_later_pages_with_the_least_recall(tmp_path: Path) -> None:
    crawl = _crawl(tmp_path)
    bad = _output(tmp_path, keep_content=False)
    done = subprocess.run([sys.executable, str(SCRIPT), str(crawl), str(bad), "--removed", "1"], capture_output=True,
                          text=True, check=True, timeout=120)
    listed = [line for line in done.stdout.splitlines() if "Sphinx, https://docs.example/" in line]
    # Pages 2 and 3 are later pages (the element is 17 of the body's 21 tokens: the page whole
    # scores 0.89), both with recall 0; one is asked for; the first page is never listed.
    assert len(listed) == 1 and listed[0].split()[0] == "0.00" and "docs.example/0.html" not in listed[0]
    assert "least recall" not in _run(crawl, bad)


def test_first_lists_the_first_pages_under_the_page_whole(tmp_path: Path) -> None:
    crawl = _crawl(tmp_path)
    bad = _output(tmp_path, keep_content=False)
    done = subprocess.run([sys.executable, str(SCRIPT), str(crawl), str(bad), "--first"], capture_output=True,
                          text=True, check=True, timeout=120)
    listed = [line for line in done.stdout.splitlines() if line.endswith("https://docs.example/0.html")]
    assert len(listed) == 1 and "Sphinx" in listed[0]  # page 1 only: pages 2 and 3 are no first pages
    assert "docs.example/1.html" not in done.stdout
    # Without --first, and on a run with no such page, nothing is listed.
    assert "https://docs.example/0.html" not in _run(crawl, bad)
    good = _output(tmp_path, keep_content=True)
    assert "first page\n" not in subprocess.run([sys.executable, str(SCRIPT), str(crawl), str(good), "--first"],
                                                capture_output=True, text=True, check=True, timeout=120).stdout


POST = ("The river rose overnight and the ferry stayed in port, so the market opened late "
        "and the bakers sold their bread from the quay to the people waiting for the boat. ") * 3


def _blog(tmp: Path, kept: str) -> tuple[Path, Path]:
    """A blog host (no content element): one post page with one article, its byline in the
    article's header, and an output that keeps `kept` of it."""
    crawl = tmp / "blog"
    crawl.mkdir()
    (crawl / "sources.json").write_text(json.dumps({"sources": [{"host": "blog.example", "generator": "Hugo"}]}),
                                        encoding="utf-8")
    html = ("<html><body><nav><a href='/'>Home</a></nav><article><header><h1>Floods</h1>"
            "<p class='byline'>By Ann, 3 May</p></header>"
            f"<p>{POST}</p><footer><p>Tags: weather</p></footer></article></body></html>")
    with gzip.open(crawl / "pages.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"url": "https://blog.example/floods/", "host": "blog.example", "html": html}) + "\n")
    out = tmp / "blog.jsonl"
    out.write_text(json.dumps({"url": "https://blog.example/floods/", "host": "blog.example", "page_no": 1,
                               "text": kept, "blocks": []}) + "\n", encoding="utf-8")
    return crawl, out


def test_a_blog_posts_article_paragraphs_are_what_must_be_kept(tmp_path: Path) -> None:
    crawl, out = _blog(tmp_path, kept="Floods\n" + POST)  # the byline and the tags gone: nothing lost
    report = _run(crawl, out)
    assert "1 hosts, 1 pages: the article's paragraphs kept 1.0000" in report
    assert "keeping less than 90% of them: 0" in report
    (tmp_path / "third").mkdir()
    crawl2, out2 = _blog(tmp_path / "third", kept=POST[: len(POST) // 3])  # a third of the post kept
    done = subprocess.run([sys.executable, str(SCRIPT), str(crawl2), str(out2), "--lost"], capture_output=True,
                          text=True, check=True, timeout=120)
    assert "keeping less than 90% of them: 1" in done.stdout
    assert "Hugo, https://blog.example/floods/" in done.stdout


def test_others_scores_the_extractors_installed_on_the_same_pages(tmp_path: Path) -> None:
    crawl = _crawl(tmp_path)
    done = subprocess.run([sys.executable, str(SCRIPT), str(crawl), str(_output(tmp_path, True)), "--others"],
                          capture_output=True, text=True, check=True, timeout=120)
    lines = done.stdout.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in lines[lines.index(next(x for x in lines if x.startswith(
        "the same pages"))) + 2:] if line.strip()}
    assert rows["output"][:4] == ["1.000", "0", "1.000", "0"]  # the figures printed above, in the table
    keeping_all = next(x for x in lines if x.startswith("keeping all"))
    assert keeping_all.split()[2] == _keeping_all(done.stdout)  # the summary line's figure
    for name in ("resiliparse", "trafilatura"):  # a row where installed, a note where not
        assert name in rows or f"{name} is not installed" in done.stdout
