"""Runtime settings of both shells; the only module that reads the environment.

`StreamSettings`: the stream worker's (and its commands'). `WalkSettings`: which page walk
runs, for every command (`use_walk` hands it to the engine, which reads no environment).
Every field can come from a ``DETEMPLATE_<FIELD>`` environment variable (upper case),
and the commands let a flag override it. Algorithm knobs are not here: they are
`detemplate.engine.params` (the offline and stream shells must use the same ones).
"""

from __future__ import annotations

import gc
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from . import blas
from .engine import page
from .engine.errors import ConfigError
from .engine.params import EngineParams, SegmentParams, with_overrides

ENV_PREFIX = "DETEMPLATE_"

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """How the stream worker talks to Kafka and where it keeps its state.

    broker: bootstrap server(s), ``kafka://host:port`` (comma-separated for several).
    app_id: the consumer group id, and the prefix of Faust's internal topics.
    topic_raw / topic_clean / topic_events / topic_dead: the four topics of the design.
    topic_state: the changelog topic of the per-host state (deltas and snapshots).
    partitions: partitions of pages.raw; the state changelog has the same count (the
        state of a host lives in the changelog partition of its input partition).
    out_partitions: partitions of the three output topics (created by `detemplate broker`).
    data_dir: local RocksDB directory of this worker (one per worker process).
    snapshot_every: K, pages of a host between two full snapshots of its table; the
        changelog keeps 2K page deltas and 2 snapshots per host.
    with_html: publish each clean page's HTML with template text removed, too.
    tansu: apply the client-side workaround for the Tansu test broker (detemplate.stream.tansu);
        leave off against Apache Kafka.
    session_timeout_s / heartbeat_s / rebalance_timeout_s: consumer group timing. A join
        waits about half the session timeout: short values make tests and restarts fast.
    commit_interval_s: how often consumed offsets are committed.
    standby_replicas: standby copies of each state partition kept by other workers.
    linger_ms: producer batching delay.
    compression: producer compression of the worker's output: lz4, zstd, snappy, gzip or
        "" for none (the default: measured on Tansu, lz4 cost throughput, docs/stream.md).
    max_fetch_bytes: most bytes one fetch returns per partition (aiokafka max_partition_fetch_bytes);
        8 MB measured faster than 1 MB on Tansu, which lists every stored batch on each fetch.
    cache_hosts: live tables kept in memory (least recently used first out); a host whose
        table left is rebuilt from its snapshot and deltas in RocksDB on its next page.
    rocksdb_cache_mb: RocksDB's block cache of each partition's store, MB (Faust's own default
        is 2 GB a partition, which a worker of many partitions could not hold).
    rocksdb_write_buffer_mb: RocksDB's write buffer (memtable) of each partition's store, MB;
        up to 3 fill before a flush (Faust's own default is 64 MB).
    metrics_host / metrics_port: where /metrics, /healthz and /readyz answer (detemplate.stream.metrics);
        port 0 picks a free port, -1 runs no server. 8780 is outside the Prometheus exporters'
        range (9100-9999, all allocated; 9100 is node_exporter's), as Prometheus advises for an
        application's own metrics (docs/deploy.md, "Metrics").
    max_message_bytes: the largest message the worker sends (key, value and record overhead):
        every output is sized against it first and made smaller, never dropped
        (detemplate.stream.outputs), and state records over it are split into parts. Keep it
        at most the brokers' message.max.bytes (the topics' max.message.bytes); it is also the
        producer's max.request.size.
    host_ttl_pages / host_ttl_s: drop a host unseen for this many messages of its input
        partition / seconds (0: never), with tombstones on the changelog (state/expiry.py).
    state_budget_bytes: keep this worker's state under this many bytes, the least recently
        seen hosts dropped first (0: no budget).
    max_table_entries: bound one host's table to this many entries (a pathological host), the
        least recently seen dropped; the same default as `run` (state/expiry.py).
    expiry_sweep_s: how often the worker looks for hosts to drop (a scan of its hosts' index
        entries, between two messages); at least 20 times the last sweep's duration apart.
    hold_idle_s: a host's first page waits for its second (engine/firstpages.py, at most
        `pagelevel.hold_first` messages of its partition); a partition that has had no
        message for this many seconds publishes the first pages it holds as decided alone,
        as `run` does at the end of its input.
    commit_before_snapshot: commit the input offsets before a snapshot replaces a host's older
        one, so that no page that snapshot covered is read again (docs/stream.md). Off only to
        test what a crash in that window does: such a page is then decided against the current
        table (a duplicate that may differ), never lost.
    stop_timeout_s: a worker told to stop (SIGTERM, Ctrl-C) that has not ended after this many
        seconds exits at once, with code 75, as after a crash: what it decided and did not commit
        is read again by the partitions' next owner (0: it waits as long as its stop takes).
        With the brokers unreachable a stop waits for them (a commit, the outputs not yet
        delivered); keep it under the orchestrator's grace period (deploy/: 60 s).
    params: algorithm overrides as `detemplate run --param` takes them, SECTION.FIELD=VALUE,
        several separated by ";". Give the worker the same ones as the offline run.

    How the worker, `produce` and `consume` authenticate to the brokers (docs/deploy.md,
    "Security"); the same for every client of the process (Faust's consumer, producer and
    admin client, and the plain aiokafka clients of the commands):

    security_protocol: PLAINTEXT (the default), SSL, SASL_PLAINTEXT or SASL_SSL.
    sasl_mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (SASL_* protocols only).
    sasl_username: the SASL user (required with a SASL_* protocol).
    sasl_password / sasl_password_file: the SASL password, or a file holding it (a mounted
        Kubernetes Secret; one trailing newline is dropped). Exactly one of the two with a
        SASL_* protocol. The password never appears in repr() or in logs.
    ssl_cafile: PEM file of the CA(s) that signed the brokers' certificates (SSL and
        SASL_SSL); empty: the system's trusted CAs.
    ssl_certfile / ssl_keyfile: PEM client certificate and its private key, for brokers
        that require TLS client authentication; both or neither.
    ssl_check_hostname: check that a broker's certificate names the host connected to
        (the certificate chain is verified either way).
    """

    broker: str = "kafka://127.0.0.1:9092"
    app_id: str = "detemplate"
    topic_raw: str = "pages.raw"
    topic_clean: str = "pages.clean"
    topic_events: str = "templates.events"
    topic_dead: str = "pages.dead"
    topic_state: str = "detemplate.state"
    partitions: int = 8
    out_partitions: int = 8
    data_dir: str = "state/stream"
    snapshot_every: int = 64
    with_html: bool = False
    tansu: bool = False
    session_timeout_s: float = 10.0
    heartbeat_s: float = 1.0
    rebalance_timeout_s: float = 10.0
    commit_interval_s: float = 1.0
    standby_replicas: int = 0
    linger_ms: int = 10
    compression: str = ""
    max_fetch_bytes: int = 8 * 1024 * 1024
    cache_hosts: int = 4096
    rocksdb_cache_mb: int = 64
    rocksdb_write_buffer_mb: int = 16
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 8780
    max_message_bytes: int = 1_000_000
    host_ttl_pages: int = 0
    host_ttl_s: float = 0.0
    state_budget_bytes: int = 0
    max_table_entries: int = 200_000  # = state.expiry.DEFAULT_MAX_TABLE_ENTRIES (tests/test_settings.py)
    expiry_sweep_s: float = 60.0
    hold_idle_s: float = 5.0
    commit_before_snapshot: bool = True
    stop_timeout_s: float = 30.0
    params: str = ""
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    sasl_password_file: str = ""
    ssl_cafile: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    ssl_check_hostname: bool = True

    def __post_init__(self) -> None:
        if self.partitions < 1 or self.out_partitions < 1:
            raise ConfigError("partitions must be at least 1")
        if self.cache_hosts < 1:
            raise ConfigError("cache_hosts must be at least 1")
        if not self.stop_timeout_s >= 0.0:
            raise ConfigError("stop_timeout_s must be 0 (no limit) or more")
        if self.rocksdb_cache_mb < 1:
            raise ConfigError("rocksdb_cache_mb must be at least 1")
        if self.rocksdb_write_buffer_mb < 1:
            raise ConfigError("rocksdb_write_buffer_mb must be at least 1")
        if self.snapshot_every < 2:
            raise ConfigError("snapshot_every must be at least 2")
        if self.heartbeat_s <= 0 or self.session_timeout_s <= self.heartbeat_s:
            raise ConfigError("session_timeout_s must exceed heartbeat_s > 0")
        if self.compression not in ("", "lz4", "zstd", "snappy", "gzip"):
            raise ConfigError(f"compression must be lz4, zstd, snappy, gzip or empty, not {self.compression!r}")
        if self.standby_replicas < 0:
            raise ConfigError("standby_replicas must not be negative")
        if self.max_message_bytes < 65_536:
            raise ConfigError(f"max_message_bytes must be at least 65536, not {self.max_message_bytes}")
        if min(self.host_ttl_pages, self.host_ttl_s, self.state_budget_bytes, self.max_table_entries) < 0:
            raise ConfigError(
                "host_ttl_pages, host_ttl_s, state_budget_bytes and max_table_entries must not be negative"
            )
        if self.expiry_sweep_s <= 0:
            raise ConfigError("expiry_sweep_s must be positive")
        if self.hold_idle_s <= 0:
            raise ConfigError("hold_idle_s must be positive")
        self.engine_params()  # fail early on a bad override
        names = [self.topic_raw, self.topic_clean, self.topic_events, self.topic_dead, self.topic_state]
        if len(set(names)) != len(names):
            raise ConfigError(f"topic names must be distinct: {names}")
        self._check_security()

    # -- broker security ------------------------------------------------------------------

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.upper() in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol.upper() in ("SSL", "SASL_SSL")

    def _check_security(self) -> None:
        """Refuse incomplete or contradictory security settings, naming the variable to fix."""
        # Case-insensitive values, kept in the canonical upper case (the dataclass is frozen).
        object.__setattr__(self, "security_protocol", self.security_protocol.strip().upper())
        object.__setattr__(self, "sasl_mechanism", self.sasl_mechanism.strip().upper())
        proto = self.security_protocol
        p = ENV_PREFIX
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(f"{p}SECURITY_PROTOCOL must be one of {', '.join(SECURITY_PROTOCOLS)}, not {proto!r}")
        if self.uses_sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ConfigError(
                    f"{p}SASL_MECHANISM must be one of {', '.join(SASL_MECHANISMS)}, not {self.sasl_mechanism!r}"
                )
            if not self.sasl_username:
                raise ConfigError(f"{proto} needs a user name: set {p}SASL_USERNAME")
            if self.sasl_password and self.sasl_password_file:
                raise ConfigError(f"set {p}SASL_PASSWORD or {p}SASL_PASSWORD_FILE, not both")
            if not self.sasl_password and not self.sasl_password_file:
                raise ConfigError(f"{proto} needs a password: set {p}SASL_PASSWORD_FILE (or {p}SASL_PASSWORD)")
            self.sasl_secret()  # the file must be readable and hold a password now, not at first connect
        else:
            given = [n for n in ("sasl_username", "sasl_password", "sasl_password_file") if getattr(self, n)]
            if given:
                raise ConfigError(
                    f"{', '.join(p + n.upper() for n in given)} set but {p}SECURITY_PROTOCOL is {proto}: "
                    "use SASL_SSL or SASL_PLAINTEXT, or unset them"
                )
        tls_files = {"ssl_cafile": self.ssl_cafile, "ssl_certfile": self.ssl_certfile, "ssl_keyfile": self.ssl_keyfile}
        if not self.uses_ssl:
            given = [n for n, v in tls_files.items() if v]
            if given:
                raise ConfigError(
                    f"{', '.join(p + n.upper() for n in given)} set but {p}SECURITY_PROTOCOL is {proto}: "
                    "use SSL or SASL_SSL, or unset them"
                )
            return
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            raise ConfigError(f"a client certificate needs both {p}SSL_CERTFILE and {p}SSL_KEYFILE")
        for name, path in tls_files.items():
            if path and not Path(path).is_file():
                raise ConfigError(f"{p}{name.upper()}: no such file: {path}")
        self.ssl_context()  # unreadable or mismatched PEM files fail here, with the variable's name

    def sasl_secret(self) -> str:
        """The SASL password: `sasl_password`, or the contents of `sasl_password_file`."""
        if not self.sasl_password_file:
            return self.sasl_password
        try:
            text = Path(self.sasl_password_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{ENV_PREFIX}SASL_PASSWORD_FILE: cannot read {self.sasl_password_file}: {exc}") from exc
        # `echo pw > file` and `kubectl create secret --from-file` leave one newline at the end.
        secret = text.removesuffix("\n").removesuffix("\r")
        if not secret:
            raise ConfigError(f"{ENV_PREFIX}SASL_PASSWORD_FILE: {self.sasl_password_file} is empty")
        return secret

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of SSL and SASL_SSL (None otherwise): CA, client certificate, hostname check."""
        if not self.uses_ssl:
            return None
        p = ENV_PREFIX
        try:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ssl_cafile or None)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"{p}SSL_CAFILE: cannot load CA certificates from {self.ssl_cafile}: {exc}") from exc
        if self.ssl_certfile:
            try:
                ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    f"{p}SSL_CERTFILE / {p}SSL_KEYFILE: cannot load the client certificate "
                    f"{self.ssl_certfile} with key {self.ssl_keyfile}: {exc}"
                ) from exc
        ctx.check_hostname = self.ssl_check_hostname  # verify_mode stays CERT_REQUIRED
        return ctx

    def broker_credentials(self) -> Any:
        """Faust's `broker_credentials`: None, faust.SSLCredentials or faust.SASLCredentials."""
        proto = self.security_protocol
        if proto == "PLAINTEXT":
            return None
        import faust  # the stream extra; only the stream commands get here

        if proto == "SSL":
            return faust.SSLCredentials(self.ssl_context())
        # SASL_SSL when given a TLS context, SASL_PLAINTEXT without.
        return faust.SASLCredentials(
            username=self.sasl_username,
            password=self.sasl_secret(),
            ssl_context=self.ssl_context(),
            mechanism=self.sasl_mechanism,
        )

    def kafka_client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of aiokafka's clients (AIOKafkaProducer, AIOKafkaConsumer) for these settings.

        The same values Faust derives from `broker_credentials()` for its own clients.
        """
        out: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.uses_ssl:
            out["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            out["sasl_mechanism"] = self.sasl_mechanism
            out["sasl_plain_username"] = self.sasl_username
            out["sasl_plain_password"] = self.sasl_secret()
        return out

    @property
    def bootstrap(self) -> str:
        """The broker list without the ``kafka://`` scheme, as aiokafka wants it."""
        return ",".join(s.strip().removeprefix("kafka://") for s in self.broker.split(","))

    @property
    def faust_broker(self) -> str:
        """The broker list with a ``kafka://`` scheme on each entry, as Faust wants it."""
        return ",".join(s if "://" in s else f"kafka://{s}" for s in (x.strip() for x in self.broker.split(",")))

    def topic_partitions(self) -> dict[str, int]:
        """Every topic the worker uses, with its partition count (create them all explicitly)."""
        return {
            self.topic_raw: self.partitions,
            self.topic_state: self.partitions,
            self.topic_clean: self.out_partitions,
            self.topic_events: self.out_partitions,
            self.topic_dead: self.out_partitions,
            # Faust's own leader-election topic: it would be auto-created otherwise.
            f"{self.app_id}-__assignor-__leader": 1,
        }

    def engine_params(self) -> EngineParams:
        """The algorithm parameters: defaults with the `params` overrides applied."""
        items = [item.strip() for item in self.params.split(";") if item.strip()]
        return with_overrides(EngineParams(), items)

    def with_overrides(self, **changes: Any) -> StreamSettings:
        """A copy with the given fields changed; None values are ignored (unset flags)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def _parse(kind: Any, name: str, text: str) -> Any:
    if kind in (bool, "bool"):
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be a boolean, not {text!r}")
    try:
        if kind in (int, "int"):
            return int(text)
        if kind in (float, "float"):
            return float(text)
    except ValueError as exc:
        raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be a number, not {text!r}") from exc
    return text


def _from_env(kind: Any, environ: Mapping[str, str] | None) -> dict[str, Any]:
    """The fields of the settings class `kind` that ``DETEMPLATE_*`` variables set, parsed."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in fields(kind):
        text = env.get(ENV_PREFIX + f.name.upper())
        if text is not None:
            values[f.name] = _parse(f.type, f.name, text)
    return values


def load(environ: Mapping[str, str] | None = None, **overrides: Any) -> StreamSettings:
    """Settings from defaults, then ``DETEMPLATE_*`` variables, then `overrides` (flags)."""
    values = _from_env(StreamSettings, environ)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return StreamSettings(**values)


def env_for(settings: StreamSettings) -> dict[str, str]:
    """The ``DETEMPLATE_*`` variables that reproduce `settings` (for child processes)."""
    out = {}
    for f in fields(StreamSettings):
        value = getattr(settings, f.name)
        out[ENV_PREFIX + f.name.upper()] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    return out


@dataclass(frozen=True, slots=True)
class WalkSettings:
    """Which page walk runs: the compiled one where it loads, or the Python one (same results).

    pure_python: run the Python walk even where the compiled one loads (DETEMPLATE_PURE_PYTHON).
    require_compiled: refuse to start when the compiled walk is not in use
        (DETEMPLATE_REQUIRE_COMPILED; set in the container image, whose build compiles it).
    """

    pure_python: bool = False
    require_compiled: bool = False


def load_walk(environ: Mapping[str, str] | None = None) -> WalkSettings:
    """WalkSettings from defaults, then ``DETEMPLATE_*`` variables."""
    return WalkSettings(**_from_env(WalkSettings, environ))


def use_walk(settings: WalkSettings, segment: SegmentParams | None = None) -> str:
    """Hand the walk settings to the engine before its first page; returns which walk runs.

    With `require_compiled`, raises ConfigError unless the compiled walk runs for
    `segment`'s tag sets (the defaults when None).
    """
    page.configure(settings.pure_python, f"{ENV_PREFIX}PURE_PYTHON is set")
    if not settings.require_compiled:
        return ""
    segment = segment or SegmentParams()
    page.compiled.walker(segment.block_tags, segment.skip_tags)  # the probe, so the status says the truth
    status = page.status()
    if status != "compiled":
        raise ConfigError(f"{ENV_PREFIX}REQUIRE_COMPILED is set, but the page walk is {status}")
    return status


# CPython's cyclic garbage collector scans its youngest generation after every 700 net
# allocations of container objects, and every object alive after 10 and 100 such scans. A
# page's decision allocates thousands of short-lived containers (blocks, segments, cues,
# verdicts) and almost no reference cycles (on chaos and site-lenskit-docs: 131 objects
# found in cycles over 535 pages, 566 collections), so at the default the collector runs
# about once a page for nothing. docs/measurements.md, "The garbage collector's threshold".
GC_FIRST_THRESHOLD = 10_000


def tune_gc() -> None:
    """Raise the cyclic collector's first threshold (`GC_FIRST_THRESHOLD`) in a process that
    decides pages: every command (`cli.main`; each job of `run --jobs` takes the parent's
    thresholds). The engine, a library, leaves the collector as the embedding process has it."""
    gc.set_threshold(GC_FIRST_THRESHOLD, *gc.get_threshold()[1:])


# numpy's OpenBLAS starts a thread a core and splits a matrix product over them once it is
# large enough: the page-level model's scores (a page's nodes by 79 weights) are, on pages of
# a few thousand nodes, and the second thread then spins after each product. One thread is
# faster in wall time too (docs/measurements.md, "One BLAS thread").
def tune_blas(environ: Any = None) -> int | None:
    """BLAS's threads in a process that decides pages: OPENBLAS_NUM_THREADS, 1 where it is
    unset: every command (`cli.main`; the jobs of `run --jobs` take the parent's count). The
    loaded OpenBLAS is set to that count (it read the variable, if at all, when numpy loaded),
    and the variable to it for the processes this one starts. The engine, a library, leaves
    BLAS as the embedding process has it. Returns the threads read back, or None where the
    variable is not a count or no OpenBLAS was found (nothing changed here)."""
    import numpy  # noqa: F401  # loads the BLAS whose threads are set

    environ = os.environ if environ is None else environ
    value = (environ.get("OPENBLAS_NUM_THREADS") or "").strip()
    try:
        threads = int(value) if value else 1
    except ValueError:
        return None  # OpenBLAS reads it its own way
    if threads < 1:
        return None
    environ["OPENBLAS_NUM_THREADS"] = str(threads)
    return blas.set_threads(threads)
