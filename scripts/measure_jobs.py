"""Wall time of `detemplate run --jobs 1` beside `--jobs N` on the same input, alternating.

    python scripts/measure_jobs.py ../shared/crawl/pages.jsonl.gz --rounds 2
    python scripts/measure_jobs.py ../shared/crawl/pages.jsonl.gz --state --jobs 2 --read

Each run is a fresh `detemplate run` process (as a user starts it), timed from outside
with its CPU time (user + system, the jobs included); rounds alternate one job and N
jobs, so load from other work on the machine falls on both. Prints every run, the
median wall times and the speedup, and checks that the outputs are the same bytes.
`--read` measures the other way of feeding the jobs (every job reads the whole input
itself; the default is the parent reading it once and handing each job its pages).
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import dataclasses
import filecmp
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def one_run(argv: list[str], read: bool) -> int:
    """Run `detemplate run` in this process; with `read`, every job reads the input itself."""
    from detemplate import cli, parallel

    if read:
        run_jobs = parallel.run_jobs

        def reading(spec: parallel.JobSpec, *args: Any) -> None:
            run_jobs(dataclasses.replace(spec, feed=False), *args)

        parallel.run_jobs = reading  # type: ignore[assignment]  # the measured alternative, same signature
    return cli.main(["run", *argv])


def timed(argv: list[str], read: bool) -> tuple[float, float]:
    """Wall and CPU seconds of one run in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    cmd = [sys.executable, __file__, "--one", *(["--read"] if read else []), "--", *argv]
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    if "--one" in sys.argv:
        rest = sys.argv[sys.argv.index("--") + 1 :]
        return one_run(rest, "--read" in sys.argv[: sys.argv.index("--")])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--state", action="store_true", help="runs with --state (a fresh directory each run)")
    ap.add_argument("--read", action="store_true", help="every job reads the input itself")
    ap.add_argument("--format", default="jsonl")
    args = ap.parse_args()
    print(f"{len(args.inputs)} input(s), {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"--jobs {args.jobs}{' (every job reads)' if args.read else ''}{' with --state' if args.state else ''}, "
          f"format {args.format}")
    walls: dict[int, list[float]] = {1: [], args.jobs: []}
    with tempfile.TemporaryDirectory(prefix="measure-jobs-") as tmp:
        outs: dict[int, Path] = {}
        for r in range(args.rounds):
            for jobs in (1, args.jobs):
                out = Path(tmp) / f"out-{jobs}.{args.format}"
                argv = [*args.inputs, "--output", str(out), "--format", args.format, "--jobs", str(jobs)]
                if args.state:
                    state = Path(tmp) / "state"
                    shutil.rmtree(state, ignore_errors=True)
                    argv += ["--state", str(state)]
                wall, cpu = timed(argv, args.read)
                walls[jobs].append(wall)
                outs[jobs] = out
                print(f"round {r + 1}  --jobs {jobs}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
        same = filecmp.cmp(outs[1], outs[args.jobs], shallow=False)
    one, many = statistics.median(walls[1]), statistics.median(walls[args.jobs])
    print(f"median: --jobs 1 {one:.1f} s, --jobs {args.jobs} {many:.1f} s: speedup {one / many:.2f}x; "
          f"outputs {'the same bytes' if same else 'DIFFER'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
