"""`detemplate train-pagelevel`: fit the page-level model on a crawl, without labels."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from ..engine.errors import ConfigError
from ..engine.model import RawPage
from ..engine.params import EngineParams, add_param_argument, with_overrides
from .train import LabelParams, collect, fit_logistic

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "train-pagelevel",
        help="train the page-level template model on a crawl (no labels needed)",
        description=(
            "Read every page of the inputs, label each host's blocks with the site-level detector "
            "(a segment on enough of the host's pages is template), and fit the logistic-regression "
            "templateness model that judges a host's first pages from the page alone. Hosts with a "
            "single page give no labels. Use the result with --param pagelevel.model=FILE."
        ),
        epilog="Example: detemplate train-pagelevel crawl.warc.gz --output my-pagelevel.json",
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="JSONL(.gz), WARC(.gz) or a folder of .html files")
    p.add_argument("-o", "--output", required=True, help="write the model (JSON) here")
    p.add_argument("--l2", type=float, default=1.0, help="L2 penalty on the standardised weights (default 1)")
    p.add_argument(
        "--max-pages-per-host",
        type=int,
        default=LabelParams().max_pages_per_host,
        help="use at most this many pages a host",
    )
    add_param_argument(
        p,
        "segmentation parameters, as for `detemplate run` (the model must be used with the same)",
    )
    p.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from ..io.sources import iter_inputs

    if args.l2 < 0 or args.max_pages_per_host < 1:
        raise ConfigError("--l2 must be >= 0 and --max-pages-per-host >= 1")
    params = with_overrides(EngineParams(), args.param)
    lp = LabelParams(max_pages_per_host=args.max_pages_per_host)
    pages = (p for p in iter_inputs(args.inputs) if isinstance(p, RawPage))
    X, y, w, stats = collect(pages, params.segment, lp, lp.region)
    print(
        f"{stats['hosts']} hosts, {stats['labelled_hosts']} with labels; {stats['blocks']} labelled blocks, "
        f"{stats['template_blocks']} of them template; {stats['skipped_pages']} pages skipped as bad input",
        file=sys.stderr,
    )
    if stats["blocks"] == 0 or stats["template_blocks"] in (0, stats["blocks"]):
        print("error: too few labels to train: the inputs need hosts with several pages", file=sys.stderr)
        return 1
    model = fit_logistic(X, y, w, args.l2)
    data = model.to_json()
    data["trained_on"] = {"hosts": stats["labelled_hosts"], "blocks": stats["blocks"]}
    Path(args.output).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"model written to {args.output}", file=sys.stderr)
    return 0
