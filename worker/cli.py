"""The `detemplate` command line.

Each command lives in the module that owns its concern and registers itself here
with a `register(subparsers)` function that adds its subparser and sets `func`.
Heavy imports (Faust, matplotlib) happen inside the commands that need them.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from . import __version__, settings
from .engine.errors import ConfigError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="detemplate",
        description=(
            "Remove site templates (navigation, headers, footers, sidebars, boilerplate) from crawled "
            "pages. It learns each host's template from the host's own pages as they stream past, "
            "keeping compact per-host statistics, never the pages."
        ),
        epilog="Run `detemplate COMMAND --help` for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"detemplate {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # Each command registers itself from the module that owns its concern.
    from . import offline
    from .stream import commands as stream_cmd
    from .tools import bench, bench_stream, broker, cluster_cmd, evaluate, pagelet_cmd, samples, scale, show, soak
    from .tools import train_cmd as pagelevel_cmd

    # In the order `detemplate --help` lists them.
    for register in (
        offline.register, samples.register, evaluate.register, bench.register, show.register,
        stream_cmd.register_worker, broker.register, stream_cmd.register_clients, bench_stream.register,
        soak.register, scale.register, pagelet_cmd.register, cluster_cmd.register, pagelevel_cmd.register,
    ):
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    settings.tune_gc()
    settings.tune_blas()
    try:
        # The page walk is chosen once, from DETEMPLATE_PURE_PYTHON; DETEMPLATE_REQUIRE_COMPILED
        # (the container image sets it) refuses to go on without the compiled one.
        settings.use_walk(settings.load_walk())
    except ConfigError as exc:
        print(f"detemplate: {exc}", file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`detemplate ... | head`): stop quietly, as Unix tools do.
        sys.stderr.close()
        return 141


if __name__ == "__main__":
    sys.exit(main())
