"""scripts/reorder_pages.py: a JSONL crawl in eval's other orders."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

from detemplate.engine.model import RawPage
from detemplate.tools.evaluate import reorder

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "reorder_pages.py"
URLS = [f"https://{h}.example/{p}.html" for h, p in
        [("b", "z"), ("a", "m"), ("b", "a"), ("c", "q"), ("a", "b"), ("c", "a"), ("a", "z")]]


def _crawl(tmp: Path) -> Path:
    path = tmp / "pages.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for url in URLS:
            fh.write(json.dumps({"url": url, "host": url.split("/")[2], "html": f"<p>{url}</p>"}) + "\n")
    return path


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60)


def _urls(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line)["url"] for line in fh]


def test_the_lines_come_out_in_evals_order(tmp_path: Path) -> None:
    crawl = _crawl(tmp_path)
    pages = [RawPage(url, "", url.split("/")[2]) for url in URLS]
    done = _run(crawl, tmp_path / "by-url.jsonl.gz", "--order", "url")
    assert done.returncode == 0, done.stderr
    assert _urls(tmp_path / "by-url.jsonl.gz") == [p.url for p in reorder(pages, "url")] == sorted(URLS)
    for seed in (1, 3):
        done = _run(crawl, tmp_path / f"s{seed}.jsonl", "--order", "shuffled", "--seed", str(seed))
        assert done.returncode == 0, done.stderr
        assert _urls(tmp_path / f"s{seed}.jsonl") == [p.url for p in reorder(pages, "shuffled", seed)]
    assert _urls(tmp_path / "s1.jsonl") != _urls(tmp_path / "s3.jsonl")
    # the records themselves are the lines read, unchanged
    with gzip.open(crawl, "rt", encoding="utf-8") as fh:
        assert sorted(fh) == sorted((tmp_path / "s1.jsonl").read_text(encoding="utf-8").splitlines(keepends=True))


def test_a_line_without_a_url_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"url": URLS[0]}) + "\n" + json.dumps({"html": "<p>x</p>"}) + "\n", encoding="utf-8")
    done = _run(bad, tmp_path / "out.jsonl", "--order", "url")
    assert done.returncode != 0
    assert "bad.jsonl:2" in done.stderr and "url" in done.stderr
