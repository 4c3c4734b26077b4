"""Measure template clustering on the development corpora (docs/clusters.md).

    python scripts/measure_clusters.py purity   [--corpora DIR] [--features ...] [--path-mode tag]
    python scripts/measure_clusters.py compare  [--corpora DIR]
    python scripts/measure_clusters.py stream   [--corpora DIR]
    python scripts/measure_clusters.py f1       [--corpora DIR] [--mode ...]

The URL page-type rules below belong to this measurement, not to the package.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from detemplate.engine.detectors.clusters import HostClusters, page_paths
from detemplate.engine.errors import BadInputError
from detemplate.engine.model import CONTENT
from detemplate.engine.page import parse, segment_tree
from detemplate.engine.params import ClusterParams, EngineParams, SegmentParams
from detemplate.engine.pipeline import decide
from detemplate.engine.table import HostTable
from detemplate.tools.clusters import BatchParams, cluster_pages
from detemplate.tools.evaluate import Corpus, load_corpus, score_texts
from xxhash import xxh3_64_intdigest

from tests.page_types import URL_TYPES, purity

MULTI = [
    "site-lilianweng-hugo",
    "site-lenskit-docs",
    "site-antsr-pkgdown",
    "site-ieee-nitk-blog-jekyll",
    "site-rust-cookbook-mdbook",
    "news-big5-05",
    "news-big5-09",
]
TYPED = MULTI[:3]


def blocks_of(corpus: Corpus, sp: SegmentParams) -> list[tuple[int, list]]:
    out = []
    for i, page in enumerate(corpus.pages):
        try:
            out.append((i, segment_tree(parse(page.html, sp), sp)))
        except BadInputError:
            continue
    return out


def cmd_purity(args: argparse.Namespace) -> None:
    for name in TYPED:
        corpus = load_corpus(Path(args.corpora) / name)
        sp = SegmentParams(path_mode=args.path_mode)
        pages = blocks_of(corpus, sp)
        types = [URL_TYPES[name](corpus.pages[i].url) for i, _ in pages]
        print(f"{name}: {len(pages)} pages, types {dict(Counter(types))}")
        for feat in args.features:
            feats = [page_paths(b, feat) for _, b in pages]
            for method in args.methods:
                r = cluster_pages(feats, BatchParams(method=method, features=feat, min_support=args.min_support))
                pur, inv = purity(r.labels, types)
                sizes = [len(c.members) for c in r.clusters]
                print(
                    f"  {feat:8s} {method:7s} clusters={len(r.clusters):3d} purity={pur:.3f} inverse={inv:.3f} "
                    f"sizes={sizes[:8]}{'...' if len(sizes) > 8 else ''}"
                )
                for c in r.clusters[:6]:
                    print("     ", len(c.members), dict(Counter(types[i] for i in c.members)))


def cmd_compare(args: argparse.Namespace) -> None:
    rows = []
    for name in args.names or TYPED:
        corpus = load_corpus(Path(args.corpora) / name)
        sp = SegmentParams(path_mode=args.path_mode)
        pages = blocks_of(corpus, sp)
        if args.limit:
            pages = pages[: args.limit]
        types = [URL_TYPES[name](corpus.pages[i].url) for i, _ in pages] if name in URL_TYPES else ["?"] * len(pages)
        feats = [page_paths(b, args.features[0]) for _, b in pages]
        labels_of = {}
        for method in args.methods:
            cp = BatchParams(method=method, features=args.features[0], min_support=args.min_support)
            secs = float("inf")
            for _ in range(args.repeat):  # time without tracemalloc: best of --repeat runs
                gc.collect()
                t0 = time.perf_counter()
                r = cluster_pages(feats, cp)
                secs = min(secs, time.perf_counter() - t0)
            gc.collect()
            tracemalloc.start()
            cluster_pages(feats, cp)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            pur, inv = purity(r.labels, types)
            labels_of[method] = r.labels
            rows.append(
                (
                    name,
                    method,
                    len(pages),
                    secs,
                    peak / 1e6,
                    r.pair_evaluations,
                    r.premerged,
                    len(r.clusters),
                    pur,
                    inv,
                    r.costs[-1],
                    [len(c.members) for c in r.clusters][:6],
                )
            )
            print(
                f"{name:22s} {method:7s} pages={len(pages)} time={secs:.3f}s peak={peak / 1e6:.1f}MB "
                f"pairs={r.pair_evaluations} premerged={r.premerged} clusters={len(r.clusters)} purity={pur:.3f} "
                f"inverse={inv:.3f} bits={r.costs[-1]:.0f} sizes={[len(c.members) for c in r.clusters][:6]}",
                flush=True,
            )
        ari = _agree(labels_of.get("mdl"), labels_of)
        if ari:
            print("   pairwise agreement with mdl:", ari)
    if args.json:
        print(json.dumps(rows))


def _agree(ref: Sequence[int] | None, labels_of: dict[str, Sequence[int]]) -> dict[str, float]:
    """Rand index of each method's clustering against TEXT-MDL's."""
    if ref is None:
        return {}
    out = {}
    n = len(ref)
    for m, lab in labels_of.items():
        same = tot = 0
        for i in range(n):
            for j in range(i + 1, n):
                tot += 1
                same += (ref[i] == ref[j]) == (lab[i] == lab[j])
        out[m] = round(same / tot, 4) if tot else 1.0
    return out


def stream_labels(pages: list[tuple[int, list]], sparams: ClusterParams) -> list[int]:
    hc = HostClusters(sparams)
    return [hc.assign(page_paths(b, sparams.features)).cid for _, b in pages]


def cmd_engine(args: argparse.Namespace) -> None:
    """Purity of the cluster ids the engine's clean pages carry (process_page, defaults + overrides)."""
    from detemplate.engine.params import with_overrides
    from detemplate.engine.pipeline import process_page
    from detemplate.state.memory import MemoryStore

    for thr in args.thresholds:
        for follow in (False, True) if args.follow else (False,):
            params = with_overrides(EngineParams(), [f"clusters.threshold={thr}", f"clusters.follow={follow}"])
            cells = []
            fs = []
            for name in TYPED:
                corpus = load_corpus(Path(args.corpora) / name)
                store = MemoryStore()
                labels, types, events = [], [], 0
                for page in corpus.pages:
                    out = process_page(page, store, params)
                    events += sum(1 for e in out.events if e.type == "template.cluster_new")
                    if out.cluster is not None:
                        labels.append(out.cluster)
                        types.append(URL_TYPES[name](page.url))
                pur, inv = purity(labels, types)
                fs.append(2 * pur * inv / (pur + inv))
                cells.append(
                    f"{name}: {len(set(labels))} clusters, {events} new-cluster events, "
                    f"purity {pur:.3f} inverse {inv:.3f}"
                )
            print(f"threshold {thr} follow {follow}: mean F(purity, inverse) {sum(fs) / len(fs):.3f}")
            for c in cells:
                print("   " + c)


def cmd_stream(args: argparse.Namespace) -> None:
    for name in TYPED:
        corpus = load_corpus(Path(args.corpora) / name)
        sp = SegmentParams(path_mode=args.path_mode)
        pages = blocks_of(corpus, sp)
        types = [URL_TYPES[name](corpus.pages[i].url) for i, _ in pages]
        for feat in args.features:
            for thr in args.thresholds:
                sparams = ClusterParams(features=feat, threshold=thr, follow=args.follow)
                labels = stream_labels(pages, sparams)
                pur, inv = purity(labels, types)
                print(
                    f"{name:22s} {feat:8s} thr={thr:.2f} clusters={len(set(labels))} purity={pur:.3f} inverse={inv:.3f}"
                )


# -- F1 with per-(host, cluster) tables ------------------------------------------------


def run_f1(
    corpus: Corpus,
    mode: str,
    params: EngineParams,
    sparams: ClusterParams,
    essential_df: int = 0,
    feature_segment: SegmentParams | None = None,
) -> dict[str, str]:
    """Kept text per URL. mode: host (baseline), cluster, cluster_fallback, both_and, both_or."""
    tables: dict[str, HostTable] = {}
    assigners: dict[str, HostClusters] = {}
    kept: dict[str, str] = {}
    tp = params.table

    def table(key: str) -> HostTable:
        t = tables.get(key)
        if t is None:
            t = tables[key] = HostTable(tp)
        return t

    def template_keys(t: HostTable, keys: list[int]) -> tuple[set[int], bool]:
        dfs = t.observe(keys)
        threshold = tp.template_df
        if tp.early_df and t.pages < threshold:
            threshold = max(tp.early_df, t.pages)
        if t.pages < threshold:
            return set(), False
        return {k for k, df in zip(keys, dfs, strict=True) if df >= threshold}, True

    for page in corpus.pages:
        try:
            tree = parse(page.html, params.segment)
            blocks = segment_tree(tree, params.segment)
            fblocks = segment_tree(tree, feature_segment) if feature_segment is not None else blocks
        except BadInputError:
            kept[page.url] = ""
            continue
        keys = sorted({seg.key for b in blocks for seg in b.segments})
        host_table = table(page.host)
        host_t, _ = template_keys(host_table, keys)
        if mode == "host":
            tk = host_t
        else:
            hc = assigners.get(page.host)
            if hc is None:
                hc = assigners[page.host] = HostClusters(sparams)
            feats = page_paths(fblocks, sparams.features)
            if essential_df:
                # The paper's non-content paths, online: the page's segments that the
                # host has already seen on at least essential_df pages.
                feats = feats | {k for k in keys if host_table.df(k) >= essential_df}
            a = hc.assign(feats)
            if mode.endswith("_random"):
                # Control: a table per "cluster" of pages picked at random (3 groups),
                # to tell a per-kind table from a second, smaller table of any pages.
                a = replace(a, cid=xxh3_64_intdigest(page.url.encode()) % 3)
                mode_ = mode.removesuffix("_random")
            else:
                mode_ = mode
            for cid, _, _ in a.dropped:
                tables.pop(f"{page.host}\x1f{cid}", None)
            ct = table(f"{page.host}\x1f{a.cid}")
            cl_t, cl_warm = template_keys(ct, keys)
            if mode_ == "cluster":
                tk = cl_t
            elif mode_ == "cluster_fallback":
                tk = cl_t if ct.pages >= tp.template_df else host_t
            elif mode_ == "both_and":
                tk = (host_t & cl_t) if cl_warm else host_t
            elif mode_ == "both_or":
                tk = host_t | cl_t
            else:
                raise SystemExit(f"unknown mode {mode}")
        out = []
        for b in blocks:
            chars = sum(s.length for s in b.segments)
            tchars = sum(s.length for s in b.segments if s.key in tk)
            if not tchars / chars > tp.template_ratio:
                out.append(" ".join(s.text for s in b.segments))
        kept[page.url] = "\n".join(out)
    return kept


def run_f1_pipeline(corpus: Corpus, mode: str, params: EngineParams, sparams: ClusterParams) -> dict[str, str]:
    """Kept text per URL through detemplate.engine.pipeline.decide (whatever detector it runs now).

    mode: pipe_host (one table per host), pipe_cluster (one per host and cluster),
    pipe_or (a block is template when either decides so); *_random: the page goes to
    one of 3 groups by a hash of its URL instead of its cluster (control).
    """
    tables: dict[str, HostTable] = {}
    assigners: dict[str, HostClusters] = {}
    kept: dict[str, str] = {}

    def table(key: str) -> HostTable:
        t = tables.get(key)
        if t is None:
            t = tables[key] = HostTable(params.table)
        return t

    for page in corpus.pages:
        alone = mode in ("pipe_cluster", "pipe_cluster_random")
        host_out = decide(page, table(page.host), params) if not alone else None
        if mode == "pipe_host":
            assert host_out is not None
            kept[page.url] = host_out.clean.text if host_out.clean is not None else ""
            continue
        try:
            blocks = segment_tree(parse(page.html, params.segment), params.segment)
        except BadInputError:
            kept[page.url] = ""
            continue
        hc = assigners.get(page.host)
        if hc is None:
            hc = assigners[page.host] = HostClusters(sparams)
        a = hc.assign(page_paths(blocks, sparams.features))
        cid = xxh3_64_intdigest(page.url.encode()) % 3 if mode.endswith("_random") else a.cid
        for gone, _, _ in a.dropped:
            tables.pop(f"{page.host}\x1f{gone}", None)
        cl_out = decide(page, table(f"{page.host}\x1f{cid}"), params)
        if cl_out.clean is None:
            kept[page.url] = ""
            continue
        if host_out is None:
            kept[page.url] = cl_out.clean.text
            continue
        assert host_out.clean is not None
        kept[page.url] = "\n".join(
            h.text
            for h, c in zip(host_out.clean.blocks, cl_out.clean.blocks, strict=True)
            if h.verdict == CONTENT and c.verdict == CONTENT
        )
    return kept


def cmd_f1(args: argparse.Namespace) -> None:
    params = EngineParams()
    sparams = ClusterParams(
        features=args.features[0], threshold=args.thresholds[0], max_clusters=args.max_clusters, follow=args.follow
    )
    results: dict[str, list[float]] = {}
    for name in MULTI:
        corpus = load_corpus(Path(args.corpora) / name)
        line = [f"{name:28s}"]
        for mode in args.modes:
            fseg = SegmentParams(path_mode=args.path_mode) if args.path_mode != "tag" else None
            if mode.startswith("pipe_"):
                kept = run_f1_pipeline(corpus, mode, params, sparams)
            else:
                kept = run_f1(corpus, mode, params, sparams, args.essential_df, fseg)
            s = score_texts(corpus.gold, kept)
            results.setdefault(mode, []).append(s.f1 or 0.0)
            line.append(f"{mode}: P={s.precision:.3f} R={s.recall:.3f} F1={s.f1:.4f}")
        print("  ".join(line), flush=True)
    print("macro F1: " + "  ".join(f"{m}={sum(v) / len(v):.4f}" for m, v in results.items()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["purity", "compare", "stream", "engine", "f1"])
    ap.add_argument("--corpora", default=str(Path(__file__).resolve().parents[2] / "shared" / "corpora"))
    ap.add_argument("--features", nargs="+", default=["blocks", "segments", "both"])
    ap.add_argument("--methods", nargs="+", default=["mdl", "minhash", "lsh"])
    ap.add_argument("--path-mode", default="tag")
    ap.add_argument("--thresholds", nargs="+", type=float, default=[0.5])
    ap.add_argument("--modes", nargs="+", default=["host", "cluster", "cluster_fallback", "both_and", "both_or"])
    ap.add_argument("--max-clusters", type=int, default=8)
    ap.add_argument("--names", nargs="*")
    ap.add_argument("--follow", action="store_true")
    ap.add_argument("--limit", type=int, default=0, help="compare: only the first N pages")
    ap.add_argument("--repeat", type=int, default=3, help="compare: time is the best of this many runs")
    ap.add_argument("--essential-df", type=int, default=0)
    ap.add_argument("--min-support", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    {"purity": cmd_purity, "compare": cmd_compare, "stream": cmd_stream, "engine": cmd_engine, "f1": cmd_f1}[args.what](
        args
    )


if __name__ == "__main__":
    main()
