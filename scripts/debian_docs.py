"""A second unseen crawl: the HTML documentation that Debian's -doc packages ship.

    python scripts/debian_docs.py /tmp/debian-docs            # download, unpack, sample
    detemplate run /tmp/debian-docs/pages.jsonl.gz -o out.jsonl --jobs 1
    python scripts/crawl_generators.py /tmp/debian-docs out.jsonl --first [--others]

Nothing in detemplate was chosen on these sites: they are documentation of other projects,
built by generators the development corpora and ../shared/crawl hold (Sphinx, Doxygen,
Javadoc, MkDocs) and by three they do not (Haddock, gi-docgen, gtk-doc's DocBook). The
script needs a Debian or Ubuntu machine's `apt-get download` and `dpkg-deb` (a package
index: `apt-get update`) and writes, in the folder given, what ../shared/crawl holds:

- `pages.jsonl.gz`: one page per line, `{"url", "host", "html"}`, in crawl order;
- `sources.json`: each host's package, version and generator, which
  scripts/crawl_generators.py reads to find each page's content element (its approximate gold).

The pages are chosen as ../shared/crawl's were (its README): a package's site root is the
deepest folder with an `index.html` that holds at least 85% of the pages; `.html` files of 500 B to 2 MB (not
symbolic links), decoded as UTF-8; the home page first and at most `--pages` in all, the
others shuffled with `random.Random("seed42:<host>")`; the hosts interleaved by drawing each
next page's host with weight equal to its pages left (`random.Random(20250607)`). A host is
the package's name with dots as dashes, under `.debian.example`. The packages are whatever
version the machine's index offers (`sources.json` records it): the figures in
docs/measurements.md were measured on Debian 12's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

# package -> its HTML's generator (the <meta name=generator> or the markup's signature)
PACKAGES: dict[str, str] = {
    "python-click-doc": "Sphinx",
    "python-jinja2-doc": "Sphinx",
    "python-werkzeug-doc": "Sphinx",
    "python-cryptography-doc": "Sphinx",
    "python-pytest-doc": "Sphinx",
    "libfmt-doc": "Sphinx",
    "libjansson-doc": "Sphinx",
    "libsdl2-doc": "Doxygen",
    "libjson-c-doc": "Doxygen",
    "libcommons-lang3-java-doc": "Javadoc",
    "libcommons-io-java-doc": "Javadoc",
    "libjsoup-java-doc": "Javadoc",
    "mkdocs-doc": "MkDocs",
    "python-markdown-doc": "MkDocs",
    "libghc-aeson-doc": "Haddock",
    "libsoup-3.0-doc": "gi-docgen",
    "libglib2.0-doc": "gtk-doc",
    "libcairo2-doc": "gtk-doc",
}
MIN_BYTES, MAX_BYTES = 500, 2_000_000
ROOT_SHARE = 0.85  # ../shared/crawl's build folder: one that holds at least 85% of the pages


def unpack(package: str, debs: Path, tree: Path) -> str:
    """Download PACKAGE's .deb into `debs` and unpack it into `tree`; its version."""
    debs.mkdir(parents=True, exist_ok=True)
    found = list(debs.glob(f"{package}_*.deb"))
    if not found:
        subprocess.run(["apt-get", "download", package], cwd=debs, check=True, stdout=subprocess.DEVNULL)
        found = list(debs.glob(f"{package}_*.deb"))
    deb = found[0]
    if not tree.exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(tree)], check=True)
    return subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True, capture_output=True,
                          text=True).stdout.strip()


def site_pages(tree: Path) -> list[tuple[str, str]]:
    """The site's pages, (path from its root, HTML), sorted by path. The root is the deepest
    folder with an `index.html` that holds at least ROOT_SHARE of the pages the best such
    folder holds (a package's doc folder over the manual's own, unless the manual is most of it)."""
    files = [p for p in tree.rglob("*.html")
             if p.is_file() and not p.is_symlink() and MIN_BYTES <= p.stat().st_size <= MAX_BYTES]
    pages_found = set(files)
    roots = [index.parent for index in tree.rglob("index.html") if index in pages_found]
    if not roots:
        return []
    held = {root: sum(root in f.parents for f in files) for root in roots}
    most = max(held.values())
    root = max((r for r in roots if held[r] >= ROOT_SHARE * most), key=lambda r: (len(r.parts), r))
    return sorted((f.relative_to(root).as_posix(), f.read_bytes().decode("utf-8", "replace"))
                  for f in files if root in f.parents)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="the folder to write (and to keep the downloaded packages in)")
    ap.add_argument("--pages", type=int, default=60, help="pages a host at most (default 60, as ../shared/crawl)")
    args = ap.parse_args()
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            print(f"{tool} not found: this script needs a Debian or Ubuntu machine", file=sys.stderr)
            return 2
    hosts: dict[str, list[dict[str, str]]] = {}
    sources = []
    for package, generator in PACKAGES.items():
        version = unpack(package, args.out / "debs", args.out / "unpacked" / package)
        host = package.replace(".", "-") + ".debian.example"
        pages = site_pages(args.out / "unpacked" / package)
        home = [p for p in pages if p[0] == "index.html"]
        rest = [p for p in pages if p[0] != "index.html"]
        random.Random(f"seed42:{host}").shuffle(rest)
        chosen = (home + rest)[: args.pages]
        hosts[host] = [{"url": f"https://{host}/" + ("" if path == "index.html" else quote(path)), "host": host,
                        "html": html} for path, html in chosen]
        sources.append({"host": host, "package": package, "version": version, "generator": generator,
                        "pages": len(chosen), "candidate_html_files": len(pages)})
        print(f"{host}: {generator}, {len(chosen)} of {len(pages)} pages", file=sys.stderr)
    rng = random.Random(20250607)
    left = {host: pages for host, pages in hosts.items() if pages}
    written = 0
    with gzip.open(args.out / "pages.jsonl.gz", "wt", encoding="utf-8") as fh:
        while left:
            names = sorted(left)
            host = rng.choices(names, weights=[len(left[n]) for n in names])[0]
            fh.write(json.dumps(left[host].pop(0), ensure_ascii=False) + "\n")
            written += 1
            if not left[host]:
                del left[host]
    (args.out / "sources.json").write_text(json.dumps(
        {"description": "HTML documentation of Debian -doc packages (scripts/debian_docs.py)", "sources": sources},
        indent=1), encoding="utf-8")
    print(f"{written} pages of {len(sources)} hosts in {args.out / 'pages.jsonl.gz'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
