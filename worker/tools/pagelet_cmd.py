"""`detemplate templates`: the templates of each host of a crawl, by pagelet shingles.

Runs the local or global template detection of Bar-Yossef and Rajagopalan
(detemplate.engine.detectors.pagelets) over the pages of the inputs, host by host, and prints each
host's templates: the shared pagelet shingle, on how many pages it occurs, a sample of
its text and the links in it. JSONL with --json, a table otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser

from ..engine.errors import ConfigError, DetemplateError
from ..engine.links import absolute_links, base_url
from ..engine.model import RawPage
from ..engine.params import EngineParams, SegmentParams, add_param_argument, with_overrides
from ..io.sources import iter_inputs
from .evaluate import TextScores
from .pagelets import PageletConfig, detect, read_pages


def _raw_pages(inputs: list[str], dead: list[int]) -> Iterator[RawPage]:
    for item in iter_inputs(inputs):
        if isinstance(item, RawPage):
            yield item
        else:
            dead[0] += 1


@dataclass
class LinkShare:
    """One host's links in the clean pages; with a known content container, how they were split."""

    pages: int = 0
    content: int = 0
    template: int = 0
    outside: int = 0  # links outside the content container (should be template links)
    outside_template: int = 0
    inside: int = 0  # links inside it (should be content links)
    inside_content: int = 0

    def as_dict(self, host: str) -> dict[str, object]:
        total = self.content + self.template
        return {
            "host": host,
            "pages": self.pages,
            "content_links": self.content,
            "template_links": self.template,
            "template_share": round(self.template / total, 4) if total else None,
            "outside_as_template": round(self.outside_template / self.outside, 4) if self.outside else None,
            "inside_as_content": round(self.inside_content / self.inside, 4) if self.inside else None,
        }


def _container_links(page: RawPage, selector: str) -> tuple[set[str], set[str]] | None:
    """The page's absolute links inside the content container and outside it (None: no container)."""
    tree = LexborHTMLParser(page.html)
    box = tree.css_first(selector)
    if box is None:
        return None
    base = base_url(tree, page.url)
    inside = set(absolute_links(base, [a.attributes.get("href") or "" for a in box.css("a[href]")]))
    every = set(absolute_links(base, [a.attributes.get("href") or "" for a in tree.css("a[href]")]))
    return inside, every - inside


def link_shares(
    pages: Iterator[RawPage], content_selector: str = "", params: EngineParams | None = None
) -> dict[str, LinkShare]:
    """Run the stream pipeline over pages in order and count each host's content and template links.

    With `content_selector` (a generated site's known content container), also count how
    many links outside it came out as template links and inside it as content links.
    """
    from ..engine.pipeline import process_page
    from ..state.memory import MemoryStore

    params = params or EngineParams()
    store = MemoryStore()
    out: dict[str, LinkShare] = {}
    for page in pages:
        outcome = process_page(page, store, params)
        if outcome.clean is None:
            continue
        share = out.setdefault(page.host, LinkShare())
        share.pages += 1
        share.content += len(outcome.clean.content_links)
        share.template += len(outcome.clean.template_links)
        split = _container_links(page, content_selector) if content_selector else None
        if split is not None:
            inside, outside = split
            template = set(outcome.clean.template_links)
            content = set(outcome.clean.content_links)
            share.inside += len(inside)
            share.inside_content += len(inside & content)
            share.outside += len(outside)
            share.outside_template += len(outside & template)
    return out


def cmd_link_share(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    selector = ""
    for item in args.inputs:  # a development corpus folder's meta.json names its content container
        meta = Path(item).parent / "meta.json" if Path(item).is_file() else Path(item) / "meta.json"
        if meta.is_file():
            selector = json.loads(meta.read_text()).get("content_selector", "")
    shares = link_shares(_raw_pages(args.inputs, [0]), selector, with_overrides(EngineParams(), args.param))
    seconds = time.perf_counter() - start
    rows = [s.as_dict(host) for host, s in sorted(shares.items())]
    if args.json:
        for row in rows:
            print(json.dumps(row))
    else:
        print(f"{'host':36} {'pages':>5} {'content':>7} {'template':>8} {'share':>6} {'out->tpl':>8} {'in->cnt':>8}")
        for r in rows:

            def pct(v: object) -> str:
                return f"{v:.1%}" if isinstance(v, float) else "-"

            print(
                f"{r['host']!s:36} {r['pages']!s:>5} {r['content_links']!s:>7} {r['template_links']!s:>8} "
                f"{pct(r['template_share']):>6} {pct(r['outside_as_template']):>8} {pct(r['inside_as_content']):>8}"
            )
    print(f"{sum(s.pages for s in shares.values())} pages in {seconds:.1f} s", file=sys.stderr)
    return 0


def cmd_templates(args: argparse.Namespace) -> int:
    if args.link_share:
        return cmd_link_share(args)
    try:
        config = PageletConfig(k=args.k, w=args.w, sketch_size=1)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    start = time.perf_counter()
    undecodable = [0]
    try:
        by_host, dead = read_pages(_raw_pages(args.inputs, undecodable), SegmentParams(), config)
    except DetemplateError as exc:
        print(f"detemplate templates: {exc}", file=sys.stderr)
        return 2
    result = detect(by_host, args.algorithm, args.min_pages)
    seconds = time.perf_counter() - start
    out = sys.stdout
    for host, templates in result.templates.items():
        shown = templates if args.limit <= 0 else templates[: args.limit]
        if args.json:
            for t in shown:
                out.write(json.dumps(t.as_dict(), ensure_ascii=False) + "\n")
            continue
        share = result.template_links[host] / result.links[host] if result.links[host] else 0.0
        out.write(
            f"{host}: {result.pages[host]} pages ({result.distinct_pages[host]} distinct), "
            f"{len(templates)} templates ({args.algorithm}), "
            f"{result.template_links[host]}/{result.links[host]} links in template pagelets ({share:.1%})\n"
        )
        out.write(f"  {'pages':>6}  {'shingle':16}  {'links':>5}  sample\n")
        for t in shown:
            sample = " ".join(t.sample.split())[:70]
            out.write(f"  {t.pages:>6}  {t.shingle}  {len(t.links):>5}  {sample}\n")
        if len(shown) < len(templates):
            out.write(f"  ... {len(templates) - len(shown)} more (--limit 0 shows all)\n")
    pages = sum(result.pages.values())
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{pages} pages, {len(result.templates)} hosts, {dead + undecodable[0]} unusable, "
        f"{seconds:.2f} s ({pages / seconds if seconds else 0:.0f} pages/s), peak RSS {rss_mb:.0f} MB",
        file=sys.stderr,
    )
    return 0


@dataclass
class SignalRun:
    """One corpus scored without and with the pagelet signal."""

    name: str
    without: TextScores
    with_: TextScores
    turned: int  # blocks kept without the signal and template with it
    pagelet: int  # blocks decided by the signal (method pagelet)
    seconds_without: float
    seconds_with: float
    multi_page: bool  # a multi-page corpus (as `detemplate eval` counts them in its macro)


def signal_eval(corpus_dir: str, params: EngineParams) -> SignalRun:
    """One corpus through the engine twice: `params` with pagelets.enabled off and on."""
    from ..engine.model import METHOD_PAGELET
    from .evaluate import evaluate_corpus, load_corpus

    corpus = load_corpus(corpus_dir)
    off = dataclasses.replace(params, pagelets=dataclasses.replace(params.pagelets, enabled=False))
    on = dataclasses.replace(params, pagelets=dataclasses.replace(params.pagelets, enabled=True))
    out_off = io.BytesIO()
    out_on = io.BytesIO()
    without = evaluate_corpus(corpus, off, output=out_off)
    with_ = evaluate_corpus(corpus, on, output=out_on)
    turned = pagelet = 0
    for a, b in zip(out_off.getvalue().splitlines(), out_on.getvalue().splitlines(), strict=True):
        blocks_a = json.loads(a).get("blocks", ())
        blocks_b = json.loads(b).get("blocks", ())
        for x, y in zip(blocks_a, blocks_b, strict=True):
            turned += x["verdict"] == "content" and y["verdict"] == "template"
            pagelet += y["method"] == METHOD_PAGELET
    return SignalRun(
        corpus.name,
        without.scores,
        with_.scores,
        turned,
        pagelet,
        without.seconds,
        with_.seconds,
        without.multi_page,
    )


def interleaved_seconds(pages: list[RawPage], configs: list[EngineParams], passes: int) -> list[float]:
    """Engine seconds of each configuration over `pages`, fair on a shared machine: every
    page is decided under each configuration one after the other (each with its own
    tables, in stream order), `passes` times from fresh tables, and each page counts its
    fastest pass."""
    import time

    from ..engine.pipeline import decide
    from ..engine.table import HostTable

    best = [[float("inf")] * len(pages) for _ in configs]
    clock = time.perf_counter
    for n in range(passes):
        tables: list[dict[str, HostTable]] = [{} for _ in configs]
        order = list(range(len(configs)))
        if n % 2:
            order.reverse()
        for i, page in enumerate(pages):
            for c in order:
                table = tables[c].get(page.host)
                if table is None:
                    table = tables[c][page.host] = HostTable(configs[c].table)
                start = clock()
                decide(page, table, configs[c])
                seconds = clock() - start
                if seconds < best[c][i]:
                    best[c][i] = seconds
    return [sum(b) for b in best]


def cmd_pagelet_signal(args: argparse.Namespace) -> int:
    params = with_overrides(EngineParams(), args.param)
    f_without: dict[bool, list[float]] = {True: [], False: []}
    f_with: dict[bool, list[float]] = {True: [], False: []}
    print(
        f"{'corpus':28} {'P':>6} {'R':>6} {'F1':>7} | {'P':>6} {'R':>6} {'F1':>7} {'dF1':>8} "
        f"{'turned':>6} {'pagelet':>7} {'time':>6}"
    )
    for corpus_dir in args.corpus_dirs:
        run = signal_eval(corpus_dir, params)
        a, b = run.without, run.with_
        if a.f1 is None or b.f1 is None:
            continue
        f_without[run.multi_page].append(a.f1)
        f_with[run.multi_page].append(b.f1)
        ratio = run.seconds_with / run.seconds_without if run.seconds_without else 0.0
        print(
            f"{run.name:28} {a.precision:6.3f} {a.recall:6.3f} {a.f1:7.4f} | "
            f"{b.precision:6.3f} {b.recall:6.3f} {b.f1:7.4f} {b.f1 - a.f1:+8.4f} "
            f"{run.turned:>6} {run.pagelet:>7} {ratio:5.2f}x",
            flush=True,
        )
    for multi, label in ((True, "multi-page"), (False, "mostly single-page")):
        if f_without[multi]:
            mw = sum(f_without[multi]) / len(f_without[multi])
            mb = sum(f_with[multi]) / len(f_with[multi])
            print(
                f"macro F1 of {len(f_without[multi])} {label} corpora: without the pagelet signal {mw:.4f}, "
                f"with it {mb:.4f} ({mb - mw:+.4f})"
            )
    print(
        "(turned: blocks kept without the signal and template with it; pagelet: blocks decided by the signal, "
        "method pagelet; time: seconds in the engine with over without, one run each: noisy)"
    )
    if args.passes > 0:
        from .evaluate import load_corpus

        pages = [page for corpus_dir in args.corpus_dirs for page in load_corpus(corpus_dir).pages]
        none = dataclasses.replace(params, pagelets=dataclasses.replace(params.pagelets, enabled=False, events=False))
        events = dataclasses.replace(params, pagelets=dataclasses.replace(params.pagelets, enabled=False, events=True))
        on = dataclasses.replace(params, pagelets=dataclasses.replace(params.pagelets, enabled=True))
        t_none, t_events, t_on = (
            t * 1e3 / len(pages) for t in interleaved_seconds(pages, [none, events, on], args.passes)
        )
        print(
            f"engine ms a page ({len(pages)} pages interleaved, fastest of {args.passes} passes): no pagelet keys "
            f"{t_none:.3f}, keys for events only {t_events:.3f} ({t_events / t_none - 1:+.1%}), "
            f"signal on {t_on:.3f} ({t_on / t_none - 1:+.1%})"
        )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "templates",
        help="list each host's templates found by pagelet shingles (Bar-Yossef and Rajagopalan)",
        description=(
            "Cut every page into pagelets (an element none of whose children holds k links), "
            "fingerprint each pagelet by a min-hash of its word shingles, and report per host the "
            "pagelet shingles shared by several pages (local), or by pages linked to each other (global)."
        ),
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="JSONL(.gz), WARC(.gz) or a folder of .html files")
    p.add_argument("--json", action="store_true", help="print one JSON object per template instead of a table")
    p.add_argument("--k", type=int, default=3, help="links that make a child its own pagelet (default 3)")
    p.add_argument("--w", type=int, default=4, help="tokens per shingle (default 4)")
    p.add_argument("--algorithm", choices=("local", "global"), default="local", help="detector (default local)")
    p.add_argument("--min-pages", type=int, default=2, help="pages a template must occur on (default 2)")
    p.add_argument("--limit", type=int, default=20, help="templates shown per host in the table (0: all)")
    p.add_argument(
        "--link-share",
        action="store_true",
        help="instead: run the stream pipeline over the inputs and print each host's content and template "
        "link counts (the links fields of the clean pages)",
    )
    add_param_argument(p, "with --link-share: override an engine parameter, e.g. pagelets.enabled=false (repeatable)")
    p.set_defaults(func=cmd_templates)

    q = sub.add_parser(
        "pagelet-signal",
        help="measure F1 without and with the per-host pagelet-shingle DF signal beside the segment table",
        description=(
            "Run each corpus through the engine twice, with pagelets.enabled off and on (every other "
            "parameter as given by --param), and print both scores side by side, the blocks kept without "
            "the signal and template with it, the blocks decided by it (method pagelet) and the time in "
            "the engine with the signal over without (one run each: noisy)."
        ),
    )
    q.add_argument("corpus_dirs", nargs="+", metavar="CORPUS_DIR", help="a corpus folder (pages and gold)")
    add_param_argument(q, "override an engine parameter in both runs, e.g. pagelets.quorum=2 (repeatable)")
    q.add_argument(
        "--passes",
        type=int,
        default=3,
        help="then time the engine without pagelet keys, with them for events only and with the signal, page "
        "by page interleaved, fastest of N passes (0: skip; default 3)",
    )
    q.set_defaults(func=cmd_pagelet_signal)
