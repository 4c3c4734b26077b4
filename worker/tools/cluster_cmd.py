"""`detemplate clusters INPUT...`: each host's template clusters (TEXT-MDL / TEXT-HASH / LSH / stream).

The batch methods read every page of the inputs, group them by host, describe each page
by its DOM path set (detemplate.engine.detectors.clusters.page_paths) and cluster each host's pages.
``--method stream`` instead runs the engine itself (`process_page`, the clusters the
clean pages carry) over the pages in input order and reports the clusters it assigned.
Prints a readable table, or one JSON line per cluster with --json.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any

from ..engine.detectors.clusters import host_clusters as host_clusters_state
from ..engine.detectors.clusters import path_key
from ..engine.errors import BadInputError, ConfigError, DetemplateError
from ..engine.model import Block, RawPage
from ..engine.page import parse, segment_tree
from ..engine.params import PATH_MODES, EngineParams, SegmentParams, add_param_argument, with_overrides
from ..engine.pipeline import process_page
from ..state.memory import MemoryStore
from .clusters import FEATURES, METHODS, BatchParams, cluster_pages

logger = logging.getLogger(__name__)


def _labels(blocks: list[Block], features: str, into: dict[int, str]) -> None:
    """Readable names of a page's path keys (first seen wins), for the report."""
    for b in blocks:
        if features != "segments":
            into.setdefault(path_key(b.path), b.path)
        if features != "blocks":
            for seg in b.segments:
                if seg.key not in into:
                    text = seg.text if len(seg.text) <= 40 else seg.text[:39] + "…"
                    into[seg.key] = f"{b.path} «{text}»"


def host_clusters(
    pages: list[RawPage], params: BatchParams, segment: SegmentParams, top: int, samples: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Cluster one host's pages; one record per cluster, and the host's summary."""
    from ..engine.detectors.clusters import page_paths

    feats = []
    urls = []
    names: dict[int, str] = {}
    dead = 0
    for page in pages:
        try:
            blocks = segment_tree(parse(page.html, segment), segment)
        except BadInputError:
            dead += 1
            continue
        feats.append(page_paths(blocks, params.features))
        urls.append(page.url)
        _labels(blocks, params.features, names)
    start = time.perf_counter()
    result = cluster_pages(feats, params)
    seconds = time.perf_counter() - start
    host = pages[0].host if pages else ""
    records = []
    for cid, cluster in enumerate(result.clusters):
        records.append(
            {
                "host": host,
                "cluster": cid,
                "pages": len(cluster.members),
                "template_paths": len(cluster.template),
                "top_paths": [{"path": names.get(k, f"{k:016x}"), "pages": n} for k, n in cluster.template[:top]],
                "sample_urls": [urls[i] for i in cluster.members[:samples]],
            }
        )
    summary = {
        "host": host,
        "pages": len(feats),
        "dead": dead,
        "clusters": len(result.clusters),
        "method": result.method,
        "mdl_bits_start": round(result.costs[0], 1),
        "mdl_bits_end": round(result.costs[-1], 1),
        "merges": len(result.costs) - 1 - (1 if result.premerged else 0),
        "premerged": result.premerged,
        "pair_evaluations": result.pair_evaluations,
        "seconds": round(seconds, 4),
    }
    return records, summary


def stream_clusters(
    pages: list[RawPage], params: EngineParams, samples: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One host's pages through the engine in order; its clusters as the clean pages name them."""
    store = MemoryStore()
    members: dict[int, list[str]] = {}
    dead = 0
    events = 0
    start = time.perf_counter()
    for page in pages:
        out = process_page(page, store, params)
        events += sum(1 for e in out.events if e.type.startswith("template.cluster"))
        if out.clean is None or out.cluster is None:
            dead += 1
            continue
        members.setdefault(out.cluster, []).append(page.url)
    seconds = time.perf_counter() - start
    host = pages[0].host if pages else ""
    table = store.get(host)
    live = {c.cid for c in host_clusters_state(table, params.clusters).clusters} if table is not None else set()
    records = [
        {
            "host": host,
            "cluster": cid,
            "pages": len(urls),
            "live": cid in live,
            "sample_urls": urls[:samples],
        }
        for cid, urls in sorted(members.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]
    summary = {
        "host": host,
        "pages": sum(len(u) for u in members.values()),
        "dead": dead,
        "clusters": len(members),
        "live": len(live),
        "cluster_events": events,
        "method": "stream",
        "seconds": round(seconds, 4),
    }
    return records, summary


def format_report(host_rows: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> str:
    lines = []
    for summary, records in host_rows:
        if summary["method"] == "stream":
            lines.append(
                f"{summary['host']}: {summary['pages']} pages -> {summary['clusters']} "
                f"cluster{'' if summary['clusters'] == 1 else 's'} (stream: the engine's assignment in input order, "
                f"{summary['live']} live at the end, {summary['cluster_events']} cluster events, "
                f"{summary['seconds']:.2f} s with the whole engine)"
            )
            lines.append(f"  {'cluster':>7} {'pages':>6} {'live':>5}  sample URLs")
            for r in records:
                urls = r["sample_urls"] or ["-"]
                lines.append(f"  {r['cluster']:>7} {r['pages']:>6} {'yes' if r['live'] else 'no':>5}  {urls[0]}")
                for url in urls[1:]:
                    lines.append(f"  {'':>7} {'':>6} {'':>5}  {url}")
            continue
        lines.append(
            f"{summary['host']}: {summary['pages']} pages -> {summary['clusters']} "
            f"cluster{'' if summary['clusters'] == 1 else 's'} "
            f"({summary['method']}, MDL {summary['mdl_bits_start']:.0f} -> {summary['mdl_bits_end']:.0f} bits, "
            f"{summary['premerged']} pages with equal signatures merged first, {summary['merges']} MDL merges, "
            f"{summary['pair_evaluations']} pairs scored, {summary['seconds']:.2f} s)"
        )
        lines.append(f"  {'cluster':>7} {'pages':>6} {'tmpl':>5}  top template paths / sample URLs")
        for r in records:
            tops = "; ".join(f"{p['path']} ({p['pages']})" for p in r["top_paths"]) or "-"
            lines.append(f"  {r['cluster']:>7} {r['pages']:>6} {r['template_paths']:>5}  {tops}")
            for url in r["sample_urls"]:
                lines.append(f"  {'':>7} {'':>6} {'':>5}    {url}")
    return "\n".join(lines)


def _handle(args: argparse.Namespace) -> int:
    from ..io.sources import iter_inputs

    try:
        engine = with_overrides(EngineParams(), args.param)
        if args.method == "stream" and not engine.clusters.enabled:
            raise ConfigError("--method stream needs clusters.enabled")
        params = BatchParams(
            method="lsh" if args.method == "stream" else args.method,
            features=args.features,
            num_perm=args.num_perm,
            bands=args.bands,
            lsh_neighbours=args.neighbours,
            min_support=args.min_support,
        )
        segment = SegmentParams(path_mode=args.path_mode)
        by_host: dict[str, list[RawPage]] = {}
        skipped = 0
        for item in iter_inputs(args.inputs):
            if not isinstance(item, RawPage):
                skipped += 1
                continue
            pages = by_host.setdefault(item.host, [])
            if len(pages) < args.max_pages:
                pages.append(item)
            else:
                skipped += 1
    except DetemplateError as exc:
        print(f"detemplate clusters: {exc}", file=sys.stderr)
        return 2
    if skipped:
        logger.info("skipped %d records (unreadable, or over --max-pages for their host)", skipped)
    out = sys.stdout
    host_rows = []
    for host in sorted(by_host):
        if args.method == "stream":
            records, summary = stream_clusters(by_host[host], engine, args.samples)
        else:
            records, summary = host_clusters(by_host[host], params, segment, args.top, args.samples)
        if args.json:
            for r in records:
                out.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
        host_rows.append((summary, records))
        logger.info(
            "host=%s pages=%d clusters=%d seconds=%.2f", host, summary["pages"], summary["clusters"], summary["seconds"]
        )
    if not args.json:
        out.write(format_report(host_rows) + "\n")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "clusters",
        help="each host's template clusters: pages grouped by DOM path set (TEXT-MDL, MinHash, LSH)",
        description=(
            "Read all pages of the inputs, group them by host, and cluster each host's pages by "
            "their DOM path sets with agglomerative MDL clustering (TEXT-MDL; TEXT-HASH and LSH restrict "
            "the candidate pairs with MinHash). Reports each cluster's pages, template paths and sample URLs. "
            "--method stream runs the engine instead (the per-host streaming assigner whose cluster ids the "
            "clean pages carry: MinHash over block paths, LSH candidates, clusters.* parameters) over the pages "
            "in input order."
        ),
        epilog="Example: detemplate clusters crawl.jsonl.gz --method lsh --json > clusters.jsonl",
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="JSONL(.gz), WARC(.gz) or a folder of .html files")
    p.add_argument("--json", action="store_true", help="one JSON line per cluster instead of the table")
    p.add_argument(
        "--method",
        choices=(*METHODS, "stream"),
        default="lsh",
        help="batch candidate pairs: all (mdl), MinHash, LSH; or stream: the engine's own assignment",
    )
    p.add_argument("--features", choices=FEATURES, default="blocks", help="paths that describe a page")
    p.add_argument(
        "--path-mode", choices=PATH_MODES, default="tag_class", help="how DOM paths name elements (tag_class: measured)"
    )
    p.add_argument("--num-perm", type=int, default=128, help="MinHash functions")
    p.add_argument("--bands", type=int, default=32, help="LSH bands")
    p.add_argument("--neighbours", type=int, default=8, help="LSH candidates per cluster")
    p.add_argument("--min-support", type=int, default=2, help="least support of a non-content path (paper: 1)")
    p.add_argument("--top", type=int, default=5, help="template paths shown per cluster")
    p.add_argument("--samples", type=int, default=3, help="sample URLs shown per cluster")
    p.add_argument("--max-pages", type=int, default=2000, help="pages read per host (memory is O(pages x paths))")
    add_param_argument(p, "--method stream: override an engine parameter, e.g. clusters.threshold=0.6 (repeatable)")
    p.set_defaults(func=_handle)
