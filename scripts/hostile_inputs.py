"""Hostile inputs for `detemplate run`, built here, each run in its own process: what comes
out, the peak RSS and the time (docs/hostile-inputs.md holds the table this prints).

    python scripts/hostile_inputs.py [--only NAME...] [--keep DIR]

Every input ends with a good page (and the URL list has one after each bad line), so the
table shows that nothing after the hostile part is lost. The bombs are built piece by
piece (never held whole); building them takes a minute or two and about 20 MB of disk.
Run from the repository's root (it uses tests/io/archives.py's builders).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.io.archives import (
    arc_file,
    chunked,
    gzip_stream,
    http_response,
    warc_record,
)

GOOD_HTML = "<html><head><title>Good</title></head><body><article><p>the good page after it</p></article></body></html>"
GOOD_LINE = json.dumps({"url": "https://good.example/after", "html": GOOD_HTML}).encode() + b"\n"
GOOD_RECORD = warc_record("https://good.example/after", GOOD_HTML.encode())
GB = 1 << 30
MB = 1 << 20


def jsonl_gz_4gb_line(d: Path) -> Path:
    p = d / "line-4gb.jsonl.gz"
    head = b'{"url": "https://bomb.example/", "html": "<p>'
    p.write_bytes(gzip_stream(4 * GB, b"x", prefix=head, suffix=b'"}\n', level=6) + gzip.compress(GOOD_LINE))
    return p


def warc_gz_3gb_record(d: Path) -> Path:
    size = 3 * GB
    http = http_response(b"", extra_http=f"Content-Length: {size}\r\n")
    head = warc_record("https://bomb.example/", b"", declared=len(http) + size)
    head = head[: head.index(b"\r\n\r\n") + 4] + http
    p = d / "record-3gb.warc.gz"
    p.write_bytes(gzip_stream(size, b"<p>x</p>", prefix=head, suffix=b"\r\n\r\n", level=6) + gzip.compress(GOOD_RECORD))
    return p


def warc_gzip_body_2gb(d: Path) -> Path:
    body = gzip_stream(2 * GB, b"<p>x</p>", prefix=b"<html><body>", level=6)
    rec = warc_record("https://bomb.example/", body, extra_http="Content-Encoding: gzip\r\n")
    p = d / "body-gzip-2gb.warc"
    p.write_bytes(rec + GOOD_RECORD)
    return p


def warc_br_body_2gb(d: Path) -> Path:
    import brotli  # type: ignore[import-untyped]

    c = brotli.Compressor(quality=5)
    piece = b"<p>x</p>" * (MB // 8)
    parts = [c.process(b"<html><body>")]
    parts.extend(c.process(piece) for _ in range(2 * GB // MB))
    parts.append(c.finish())
    rec = warc_record("https://bomb.example/", b"".join(parts), extra_http="Content-Encoding: br\r\n")
    p = d / "body-br-2gb.warc"
    p.write_bytes(rec + GOOD_RECORD)
    return p


def json_line_500mb(d: Path) -> Path:
    p = d / "line-500mb.jsonl"
    with open(p, "wb") as fh:
        fh.write(b'{"url": "https://bomb.example/", "html": "<p>')
        piece = b"x" * (16 * MB)
        for _ in range(500 * MB // len(piece)):
            fh.write(piece)
        fh.write(b'"}\n' + GOOD_LINE)
    return p


def json_line_at_limit(d: Path) -> Path:
    """The largest line read: 6 x 10 MB + 1 MB of text (over the page limit once decoded)."""
    p = d / "line-61mb.jsonl"
    with open(p, "wb") as fh:
        fh.write(b'{"url": "https://big.example/", "html": "<p>')
        fh.write(b"x" * (61 * MB - 100))
        fh.write(b'"}\n' + GOOD_LINE)
    return p


def warc_page_at_limit(d: Path) -> Path:
    """The largest page read: a 9.9 MB page, gzip-encoded, of 59,000 paragraphs."""
    html = b"<html><body>" + (b"<p>" + b"word " * 32 + b"</p>") * 59_000 + b"</body></html>"
    rec = warc_record("https://big.example/", gzip.compress(html), extra_http="Content-Encoding: gzip\r\n")
    p = d / "page-10mb.warc.gz"
    p.write_bytes(gzip.compress(rec) + gzip.compress(GOOD_RECORD))
    return p


def jsonl_gz_2gb_blank(d: Path) -> Path:
    p = d / "blank-2gb.jsonl.gz"
    p.write_bytes(gzip_stream(2 * GB, b"\n", suffix=GOOD_LINE, level=6))
    return p


def warc_length_1e15(d: Path) -> Path:
    p = d / "length-1e15.warc"
    p.write_bytes(warc_record("https://liar.example/", b"<p>liar</p>", declared=10**15) + GOOD_RECORD)
    return p


def warc_gz_length_1e15(d: Path) -> Path:
    p = d / "length-1e15.warc.gz"
    liar = warc_record("https://liar.example/", b"<p>liar</p>", declared=10**15)
    p.write_bytes(gzip.compress(liar) + gzip.compress(GOOD_RECORD))
    return p


def garbage_200mb(d: Path) -> Path:
    p = d / "garbage-200mb.warc"
    with open(p, "wb") as fh:
        fh.write(warc_record("https://ok.example/", b"<p>before</p>"))
        for _ in range(200):
            fh.write(b"not a record " * (MB // 13) + b"\n")
        fh.write(GOOD_RECORD)
    return p


def bad_urls(d: Path) -> Path:
    p = d / "urls.jsonl"
    html = "<p>x</p>"
    recs = [
        {"url": "https://a b.example/", "html": html},
        {"url": "https://a.example/", "host": "a\x00b.example", "html": html},
        {"url": "https://a.example/" + "x" * (20 * MB), "html": html},
        {"url": "//nohost/page", "html": html},
        {"url": "https://a.example:99999/", "html": html},
        {"url": "https://sur.example/\udfff", "html": html},
    ]
    with open(p, "wb") as fh:
        for r in recs:
            fh.write(json.dumps(r).encode() + b"\n" + GOOD_LINE)
    return p


def web_quirks(d: Path) -> Path:
    """What real archives hold: fake-chunked and chunked bodies, a latin-1 page with 0x81."""
    body = b"<html><body><article><p>chunked in fact</p></article></body></html>"
    te = "Transfer-Encoding: chunked\r\n"
    p = d / "quirks.warc.gz"
    records = [
        warc_record("https://q.example/fake-chunked", body, extra_http=te),
        warc_record("https://q.example/chunked", chunked(body), extra_http=te),
        warc_record("https://q.example/latin1", b"<p>caf\xe9 \x81 \x80</p>", content_type="text/html; charset=latin1"),
        GOOD_RECORD,
    ]
    p.write_bytes(b"".join(gzip.compress(r) for r in records))
    return p


def arc(d: Path) -> Path:
    p = d / "crawl.arc.gz"
    body = http_response(b"<html><body><p>an ARC page</p></body></html>")
    p.write_bytes(gzip.compress(arc_file([("https://arc.example/", body), ("https://good.example/after", body)])))
    return p


CASES: list[tuple[str, str, Callable[[Path], Path]]] = [
    ("a 4 GB line in a .jsonl.gz", "line-4gb", jsonl_gz_4gb_line),
    ("a 3 GB record in a .warc.gz", "record-3gb", warc_gz_3gb_record),
    ("an HTTP body, Content-Encoding gzip, inflating to 2 GB", "body-gzip-2gb", warc_gzip_body_2gb),
    ("an HTTP body, Content-Encoding br, inflating to 2 GB", "body-br-2gb", warc_br_body_2gb),
    ("a 500 MB JSON line", "line-500mb", json_line_500mb),
    ("2 GB of blank lines in a .jsonl.gz", "blank-2gb", jsonl_gz_2gb_blank),
    ("a 61 MB JSON line (the longest line read)", "line-61mb", json_line_at_limit),
    ("a 9.9 MB page of 59,000 paragraphs, gzip-encoded (the largest page read)", "page-10mb", warc_page_at_limit),
    ("Content-Length: 10^15 (plain WARC)", "length-1e15", warc_length_1e15),
    ("Content-Length: 10^15 (.warc.gz)", "length-1e15-gz", warc_gz_length_1e15),
    ("200 MB of garbage between two records", "garbage-200mb", garbage_200mb),
    ("bad URLs and hosts (a b.example, NUL, 20 MB, //nohost, :99999, lone surrogate)", "urls", bad_urls),
    ("fake-chunked and chunked bodies, a latin-1 page with 0x81", "quirks", web_quirks),
    ("an ARC file", "arc", arc),
]


def run(path: Path, out: Path) -> tuple[float, int, int]:
    """`detemplate run PATH -o OUT` in a child process: (seconds, peak RSS in KB, exit code).

    A child's peak RSS counts this process's memory until it execs, so this process builds
    nothing itself: each input is built by a child of its own (--build).
    """
    # One job: with more, pages are decided in the jobs, whose memory wait4 does not count.
    argv = [sys.executable, "-m", "detemplate", "run", str(path), "--output", str(out), "--jobs", "1"]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, usage.ru_maxrss, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", help="run only these cases (by short name)")
    ap.add_argument("--keep", help="build the inputs here and keep them (default: a temporary folder)")
    ap.add_argument("--build", nargs=2, metavar=("NAME", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build:
        name, where = args.build
        print(next(build for _, short, build in CASES if short == name)(Path(where)))
        return
    folder = Path(args.keep or tempfile.mkdtemp(prefix="detemplate-hostile-"))
    folder.mkdir(parents=True, exist_ok=True)
    base_s, base_kb, _ = run(_baseline(folder), folder / "baseline.out")
    print(f"baseline (one good page): {base_s:.2f} s, {base_kb / 1024:.0f} MB peak RSS\n")
    measured = []
    for title, short, _ in CASES:
        if args.only and short not in args.only:
            continue
        built = subprocess.run(
            [sys.executable, __file__, "--build", short, str(folder)], capture_output=True, text=True, check=True
        )
        path = Path(built.stdout.strip())
        out = folder / f"{short}.out.jsonl"
        seconds, kb, code = run(path, out)
        measured.append((title, path.stat().st_size, out, seconds, kb, code))
        if not args.keep:
            path.unlink()
    # The outputs are read only now: reading them would grow this process, and a child's
    # peak RSS counts this process's memory until it execs.
    print("| input | file | what comes out | peak RSS | time |")
    print("|---|---|---|---|---|")
    for title, size, out, seconds, kb, code in measured:
        errors, clean, good = _summary(out)
        what = f"{clean} clean ({good} the good page after)"
        if errors:
            what += "; " + ", ".join(f"{k} {v}" for k, v in sorted(errors.items()))
        if code:
            what += f"; EXIT {code}"
        shown = f"{size / MB:.1f} MB" if size >= MB else f"{size / 1024:.1f} KB"
        print(f"| {title} | {shown} | {what} | {kb / 1024:.0f} MB | {seconds:.1f} s |", flush=True)


def _summary(out: Path) -> tuple[Counter[str], int, int]:
    """(errors by reason, clean pages, good pages) of an output, read a line at a time, from
    each record's first fields only (this process must stay small: see `run`)."""
    errors: Counter[str] = Counter()
    clean = good = 0
    if out.exists():
        with open(out, "rb") as fh:
            for line in fh:
                error = re.match(rb'\{"v":1,"error":"([a-z_]+)"', line[:200])
                if error is not None:
                    errors[error.group(1).decode()] += 1
                else:
                    clean += 1
                    good += line.startswith(b'{"v":1,"url":"https://good.example/after"')
    return errors, clean, good


def _baseline(folder: Path) -> Path:
    p = folder / "baseline.jsonl"
    p.write_bytes(GOOD_LINE)
    return p


if __name__ == "__main__":
    main()
