"""README's stream round trip, run as a user would: the lines of its block, in a fresh empty
directory, with the installed `detemplate` command and the bundled broker (issue 16).

Only the broker port is changed (19092 may be taken on a test machine), and the worker's
metrics endpoint is moved off its default port by its environment variable for the same
reason; every other word is README's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest
from detemplate.tools.broker import free_port

from tests.integration.conftest import REPO

pytestmark = pytest.mark.broker

BIN = Path(sys.executable).parent


def readme_stream_lines() -> list[str]:
    """The commands of README's "stream round trip" block, comments dropped."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("The stream round trip in a few lines")
    block = re.search(r"```sh\n(.*?)```", text[start:], re.DOTALL)
    assert block is not None, "README has no stream block"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_stream_lines_work_as_written(tmp_path: Path) -> None:
    lines = readme_stream_lines()
    assert [shlex.split(line)[1] for line in lines] == ["sample", "broker", "worker", "produce", "consume"]
    port = str(free_port())
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "DETEMPLATE_METRICS_PORT": "0"}
    env = {k: v for k, v in env.items() if not k.startswith("DETEMPLATE_") or k == "DETEMPLATE_METRICS_PORT"}
    background: list[subprocess.Popen[bytes]] = []
    files: list[IO[bytes]] = []
    results: dict[str, subprocess.CompletedProcess[bytes]] = {}
    try:
        for i, line in enumerate(lines):
            args = shlex.split(line.replace("19092", port))
            if args[-1] == "&":
                log = open(tmp_path / f"bg{i}.log", "wb")  # noqa: SIM115 (closed at the end)
                files.append(log)
                background.append(subprocess.Popen(args[:-1], cwd=tmp_path, env=env, stdout=log,
                                                   stderr=subprocess.STDOUT))
                if args[1] == "broker":
                    wait_for_line(tmp_path / f"bg{i}.log", "Tansu test broker on", background[-1])
                continue
            done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, timeout=300)
            results[args[1]] = done
            assert done.returncode == 0, f"{line}\n{done.stderr.decode(errors='replace')}\n{logs(tmp_path)}"
        printed = results["consume"].stdout.decode().splitlines()
        for client in ("produce", "consume"):  # what the client did, not aiokafka's bookkeeping
            assert b"aiokafka" not in results[client].stderr, results[client].stderr.decode(errors="replace")
        assert len(printed) == 10  # --count 10: ten records, not the whole topic
        assert all(json.loads(r)["url"].startswith("https://") for r in printed)
        # The whole topic without --count, and without --tansu against the bundled broker: every page.
        sent = int(re.search(rb"sent (\d+) pages", results["produce"].stderr).group(1))  # type: ignore[union-attr]
        every = subprocess.run(
            [str(BIN / "detemplate"), "consume", "--topic", "pages.clean", "--broker", f"127.0.0.1:{port}",
             "--timeout", "240"],
            cwd=tmp_path, env=env, capture_output=True, timeout=300,
        )
        urls = {json.loads(r)["url"] for r in every.stdout.decode().splitlines()}
        if len(urls) < sent:  # the worker may still be at it: consume says so and exits 1
            assert every.returncode == 1 and b"did not come" in every.stderr
            pytest.fail(f"{len(urls)} of {sent} pages after 240 s\n{logs(tmp_path)}")
        assert every.returncode == 0 and len(urls) == sent > 0
        assert (tmp_path / "state" / "stream").is_dir()  # the worker made its default data directory
    finally:
        for proc in reversed(background):
            proc.send_signal(signal.SIGTERM)
        for proc in background:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in files:
            log.close()


def wait_for_line(path: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    """What a user does after `&`: wait until the process says it is up."""
    deadline = time.monotonic() + timeout_s
    while text not in path.read_text(errors="replace"):
        assert proc.poll() is None, f"exited with {proc.returncode}: {path.read_text(errors='replace')}"
        assert time.monotonic() < deadline, f"no {text!r} in {path} after {timeout_s} s"
        time.sleep(0.1)


def logs(tmp_path: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(tmp_path.glob("*.log")))
