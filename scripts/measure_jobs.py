"""Wall time of `detemplate run --jobs 1` beside `--jobs N` on the same input, alternating.

    python scripts/measure_jobs.py ../shared/crawl/pages.jsonl.gz --rounds 2
    python scripts/measure_jobs.py ../shared/crawl/pages.jsonl.gz --state --jobs 2 --read
    python scripts/measure_jobs.py ../shared/crawl/pages.jsonl.gz --rounds 3 --reference
    python scripts/measure_jobs.py ../shared/crawl/pages.jsonl.gz --rounds 3 --fork-server

Each run is a fresh `detemplate run` process (as a user starts it), timed from outside
with its CPU time (user + system, the jobs included); rounds alternate one job and N
jobs, so load from other work on the machine falls on both. Prints every run, the
median wall times and the speedup, and checks that the outputs are the same bytes. A
machine shared with other work gives a session's processes one share of the CPU together
(autogroup scheduling), so the wall times there do not show what N cores give: each run
also prints the CPU seconds of its parent and of every job, and the bound they set on
idle cores (the busiest process, and the total CPU over the cores). For N jobs the CPU
figure is the sum of the parent's and the jobs' (with `--fork-server`, the server's one
import, about 0.25 s, is in neither).
`--fork-server` starts the jobs from multiprocessing's fork server even where `run` forks
them (parallel._can_fork), as runs did before November 29th: the two ways side by side.
`--read` measures the other way of feeding the jobs (every job reads the whole input
itself; the default is the parent reading it once and handing each job its pages).
`--reference` (JSONL inputs) also times, each round, N independent processes: the input
split beforehand into N JSONL files by the jobs' hash of the host, run by N `--jobs 1`
processes side by side, beside the same files in one process. Each holds the hosts one job
holds and nothing is handed over, so no way of feeding N jobs does better than that ratio
(on a shared machine a round's ratio is noisy: it has passed N, the machine being faster
while the N ran than while the one did; the two halves of the crawl run one after the
other take the CPU seconds of both in one process, within 4%).
Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import filecmp
import gc
import gzip
import logging
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def one_run(argv: list[str], read: bool, fork_server: bool = False) -> int:
    """Run `detemplate run` in this process; with `read`, every job reads the input itself;
    with `fork_server`, the jobs come from the fork server."""
    from detemplate import cli, parallel

    if fork_server:
        parallel._can_fork = lambda: False  # the measured alternative
    logging.getLogger("detemplate.parallel").setLevel(logging.DEBUG)  # each job's CPU seconds
    if read:
        start_jobs = parallel.start_jobs

        def reading(spec: parallel.JobSpec, *args: Any, **kwargs: Any) -> Any:
            return start_jobs(dataclasses.replace(spec, feed=False), *args, **kwargs)

        parallel.start_jobs = reading  # the measured alternative, same signature
    code = cli.main(["run", *argv])
    gc.freeze()  # as the command exits (cli.entry)
    return code


def timed(argv: list[str], read: bool, fork_server: bool = False) -> tuple[float, float, list[float], list[float]]:
    """Wall and CPU seconds of one run in a child process, the CPU seconds of each process
    that worked in parallel (the parent, then each job; empty for one job), and the seconds
    each job waited for its pages."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    flags = [*(["--read"] if read else []), *(["--fork-server"] if fork_server else [])]
    cmd = [sys.executable, __file__, "--one", *flags, "--", *argv]
    proc = subprocess.run(cmd, check=True, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    parent = [float(m) for m in re.findall(r"([\d.]+) s CPU in the parent", proc.stderr)]
    jobs = [float(m) for m in re.findall(r"job \d+ of \d+: \d+ pages, ([\d.]+) s CPU", proc.stderr)]
    waits = [float(m) for m in re.findall(r"s CPU, ([\d.]+) s waiting", proc.stderr)]
    return wall, cpu, parent + jobs, waits


def split_by_job(inputs: list[str], jobs: int, folder: Path) -> list[Path]:
    """The JSONL inputs' lines in `jobs` files, each the hosts the jobs' hash gives one job
    (lines without a routable host go to the first), in input order."""
    from detemplate.io.sources import route_host
    from detemplate.parallel import job_of

    paths = [folder / f"share-{i}.jsonl" for i in range(jobs)]
    with contextlib.ExitStack() as stack:
        outs = [stack.enter_context(open(p, "wb")) for p in paths]
        for name in inputs:
            with gzip.open(name, "rb") if name.endswith(".gz") else open(name, "rb") as fh:
                for line in fh:
                    if not line.strip():
                        continue
                    line = line if line.endswith(b"\n") else line + b"\n"
                    host = route_host(line[:-1])
                    outs[0 if host is None else job_of(host, jobs)].write(line)
    return paths


def side_by_side(shares: list[Path], folder: Path) -> tuple[float, float]:
    """Wall seconds of the shares in one `--jobs 1` process, and of one such process a share,
    all at once."""
    base = [sys.executable, "-m", "detemplate", "run"]
    started = time.perf_counter()
    subprocess.run([*base, *map(str, shares), "--output", str(folder / "one.jsonl"), "--jobs", "1"],
                   check=True, stderr=subprocess.DEVNULL)
    one = time.perf_counter() - started
    started = time.perf_counter()
    procs = [subprocess.Popen([*base, str(share), "--output", str(folder / f"{share.stem}.out"), "--jobs", "1"],
                              stderr=subprocess.DEVNULL) for share in shares]
    for proc in procs:
        if proc.wait() != 0:
            raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return one, time.perf_counter() - started


def main() -> int:
    if "--one" in sys.argv:
        rest = sys.argv[sys.argv.index("--") + 1 :]
        flags = sys.argv[: sys.argv.index("--")]
        return one_run(rest, "--read" in flags, "--fork-server" in flags)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--state", action="store_true", help="runs with --state (a fresh directory each run)")
    ap.add_argument("--read", action="store_true", help="every job reads the input itself")
    ap.add_argument("--fork-server", action="store_true",
                    help="start the jobs from the fork server, not forked from the run")
    ap.add_argument("--format", default="jsonl")
    ap.add_argument("--reference", action="store_true",
                    help="also time N processes side by side on the hosts split beforehand (JSONL inputs)")
    args = ap.parse_args()
    print(f"{len(args.inputs)} input(s), {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"--jobs {args.jobs}{' (every job reads)' if args.read else ''}"
          f"{' (from the fork server)' if args.fork_server else ''}{' with --state' if args.state else ''}, "
          f"format {args.format}")
    walls: dict[int, list[float]] = {1: [], args.jobs: []}
    cores = min(args.jobs, len(os.sched_getaffinity(0)))
    estimates: list[float] = []  # --jobs N on idle cores, from its processes' CPU seconds
    ones: list[float] = []  # --jobs 1's CPU seconds: its wall time on an idle core
    references: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="measure-jobs-") as tmp:
        outs: dict[int, Path] = {}
        shares: list[Path] = []
        if args.reference:
            if all(name.endswith((".jsonl", ".jsonl.gz")) for name in args.inputs):
                shares = split_by_job(args.inputs, args.jobs, Path(tmp))
            else:
                print("--reference: skipped, it takes JSONL inputs")
        for r in range(args.rounds):
            for jobs in (1, args.jobs):
                out = Path(tmp) / f"out-{jobs}.{args.format}"
                argv = [*args.inputs, "--output", str(out), "--format", args.format, "--jobs", str(jobs)]
                if args.state:
                    state = Path(tmp) / "state"
                    shutil.rmtree(state, ignore_errors=True)
                    argv += ["--state", str(state)]
                wall, cpu, per_process, waits = timed(argv, args.read, args.fork_server)
                walls[jobs].append(wall)
                outs[jobs] = out
                if per_process:
                    # The fork server's jobs are not in `cpu` (forked ones are): the processes' own figures count.
                    cpu = sum(per_process)
                line = f"round {r + 1}  --jobs {jobs}: {wall:6.1f} s wall, {cpu:6.1f} s CPU"
                if per_process:
                    # On idle cores the run takes at least its busiest process, and at least its
                    # CPU spread over the cores: an estimate for a machine with nothing else on it.
                    idle = max(max(per_process[1:]), cpu / cores)
                    estimates.append(idle)
                    line += (f" (parent {per_process[0]:.1f}, jobs "
                             f"{', '.join(f'{c:.1f}' for c in per_process[1:])}; on idle cores >= {idle:.1f} s; "
                             f"jobs waited {', '.join(f'{w:.1f}' for w in waits) or '-'} s for pages)")
                else:
                    ones.append(cpu)
                print(f"{line}, load {os.getloadavg()[0]:.1f}", flush=True)
            if shares:
                one_s, side_s = side_by_side(shares, Path(tmp))
                references.append((one_s, side_s))
                print(f"round {r + 1}  reference: the {len(shares)} shares in one process {one_s:6.1f} s, "
                      f"side by side {side_s:6.1f} s: {one_s / side_s:.2f}x, load {os.getloadavg()[0]:.1f}",
                      flush=True)
        same = filecmp.cmp(outs[1], outs[args.jobs], shallow=False)
    one, many = statistics.median(walls[1]), statistics.median(walls[args.jobs])
    print(f"median: --jobs 1 {one:.1f} s, --jobs {args.jobs} {many:.1f} s: speedup {one / many:.2f}x; "
          f"outputs {'the same bytes' if same else 'DIFFER'}")
    if references:
        one_s = statistics.median(r[0] for r in references)
        side_s = statistics.median(r[1] for r in references)
        print(f"reference: {args.jobs} processes side by side on the hosts split beforehand, against one: "
              f"{one_s:.1f} s against {side_s:.1f} s, {one_s / side_s:.2f}x (the bound for --jobs {args.jobs})")
    if estimates and ones:
        one_cpu, many_cpu = statistics.median(ones), statistics.median(estimates)
        print(f"from CPU seconds (idle cores): --jobs 1 {one_cpu:.1f} s, --jobs {args.jobs} >= {many_cpu:.1f} s: "
              f"speedup <= {one_cpu / many_cpu:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
