"""The `detemplate` command line.

Each command lives in the module that owns its concern and registers itself here
with a `register(subparsers)` function that adds its subparser and sets `func`; a command
line imports only its command's module (`COMMANDS`).
Heavy imports (Faust, matplotlib) happen inside the commands that need them.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from . import __version__, interrupts, settings
from .engine.errors import ConfigError

# Every command: the module that owns it (under detemplate) and the function there that adds
# its subparser, in the order `detemplate --help` lists them. A command line names one command,
# and only its module is imported (the tools' modules cost a third of a second together); the
# full list is built for `detemplate --help` and for a name that is not a command.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("offline", "register"),
    "sample": ("tools.samples", "register"),
    "eval": ("tools.evaluate", "register"),
    "bench": ("tools.bench", "register"),
    "show": ("tools.show", "register"),
    "worker": ("stream.commands", "register_worker"),
    "broker": ("tools.broker", "register"),
    "produce": ("stream.commands", "register_clients"),
    "consume": ("stream.commands", "register_clients"),
    "bench-stream": ("tools.bench_stream", "register"),
    "bench-soak": ("tools.soak", "register"),
    "bench-scale": ("tools.scale", "register"),
    "templates": ("tools.pagelet_cmd", "register"),
    "pagelet-signal": ("tools.pagelet_cmd", "register"),
    "clusters": ("tools.cluster_cmd", "register"),
    "train-pagelevel": ("tools.train_cmd", "register"),
}


def command_of(argv: Sequence[str]) -> str | None:
    """The command an argument list names (its first argument that is not an option; the
    top-level options take no value), or None: no command, an unknown one, or a top-level
    --help or --version before it."""
    for arg in argv:
        if arg in ("-h", "--help", "--version"):
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of `command` alone, or of every command when None."""
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
    wanted = [COMMANDS[command]] if command is not None else COMMANDS.values()
    for module, function in dict.fromkeys(wanted):
        getattr(importlib.import_module(f".{module}", __package__), function)(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(command_of(argv))
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
        with interrupts.interrupts():
            return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (interrupts.Terminated)
        word, code = interrupts.outcome(exc)
        print(word, file=sys.stderr)
        return code
    except BrokenPipeError:
        # The reader went away (`detemplate ... | head`): stop quietly, as Unix tools do.
        sys.stderr.close()
        return 141


def entry() -> NoReturn:
    """The `detemplate` command and `python -m detemplate`: `main`, then the exit. The objects
    the command made are frozen first (gc.freeze), so that the interpreter's last collection on
    the way out does not walk them all once more: about 0.02 s of every run's end, for
    nothing (docs/parallel.md, "The merge while the jobs run"). Not in `main`, which tests and
    scripts call in a process that goes on."""
    code = main()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    entry()
