"""`detemplate bench-soak`: a long crawl through one worker; is memory and state bounded?

Streams PAGES generated pages over HOSTS hosts through one `detemplate worker` process on
a fresh bundled broker, and samples over the run, against pages decided:

  - the worker's resident memory (RSS, /proc);
  - its RocksDB directory on disk;
  - the state changelog: bytes appended to it, and the bytes a compacted changelog would
    hold (the newest record of each key). The test broker (Tansu) never compacts, so what
    it stores grows with every page by design; Apache Kafka keeps the compacted size;
  - the live tables' segment entries (the worker's detemplate_segments_in_state metric).

Under the logistic expiry these must level off once every host is past its first pages,
not grow with the crawl. The sites are detemplate.tools.samples' generated ones, and they change
as the crawl goes on, so the expiry has work: every page a new article, a "Latest" box of
the host's three newest titles, "most read" rotating every 10 pages, a seasonal nav item
replaced every 40 pages, and a share of the hosts redesigned once mid-crawl. Hosts are
picked at random for each page (seeded), so every host advances at about the same pace.

Pages are produced as the worker goes (at most WINDOW ahead of it), so the run is a
stream, not a backlog. Prints a table of the samples and a judgement of each curve
(growth over the last half of the crawl against the first), and writes soak.csv,
soak.json and soak.png (matplotlib, the `report` extra) to --out.

The machine may be shared: pages/s is as measured, the memory and state curves are not
affected by load.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import random
import shutil
import tempfile
import time
import urllib.request
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..engine.model import RawPage
from ..settings import StreamSettings
from ..state.changelog import SEP, TABLE_PREFIX, record_kind
from .samples import LAYOUTS, _page

SEASON_PAGES = 40  # a host's seasonal nav item changes every this many of its pages
LATEST = 3  # titles in a host's "Latest" box (each title is on the 3 pages after its own)


def register(subparsers: Any) -> None:
    doc = __doc__ or ""
    p = subparsers.add_parser(
        "bench-soak",
        help="soak one stream worker with a long evolving crawl; sample RSS, RocksDB and changelog size",
        description="\n\n".join(doc.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--pages", type=int, default=100_000, help="pages to stream (default 100,000)")
    p.add_argument("--hosts", type=int, default=2_000, help="hosts they are spread over (default 2,000)")
    p.add_argument("--partitions", type=int, default=4, help="partitions of pages.raw and the changelog (default 4)")
    p.add_argument(
        "--snapshot-every", type=int, default=64,
        help="K, a host's pages between snapshots (default 64, the worker's). A compacted changelog keeps at "
        "most 2K + 2 records a host, reached after 2K pages of the host",
    )
    p.add_argument("--redesign-share", type=float, default=0.2,
                   help="share of hosts redesigned once, at a random point of their crawl (default 0.2)")
    p.add_argument("--samples", type=int, default=40, help="samples over the run (default 40)")
    p.add_argument("--window", type=int, default=3_000,
                   help="most pages produced ahead of the worker (default 3,000)")
    p.add_argument("--cache-hosts", type=int, help="the worker's live-table cache (default: the worker's, 4096)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=7200.0, help="give up after SECONDS (default 7200)")
    p.add_argument("--out", default="soak-out", help="folder for soak.csv, soak.json, soak.png (default soak-out)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG (no matplotlib needed)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (worker and broker logs)")
    p.add_argument(
        "--store-only", action="store_true",
        help="no broker, no worker: write the worker's state records (its keys, one delta a page and a snapshot "
        "every K pages of a host, of --delta-bytes and --snapshot-bytes) straight into one RocksDB opened with "
        "Faust's options, and sample this process's RSS and the directory (WAL and SST apart). Fast enough for "
        "millions of pages: shows where RocksDB's memtables and files level off, past the first flush",
    )
    p.add_argument("--delta-bytes", type=int, default=450, help="--store-only: bytes of a page delta (default 450)")
    p.add_argument("--snapshot-bytes", type=int, default=9_000,
                   help="--store-only: bytes of a host snapshot (default 9,000)")
    p.set_defaults(func=_main)


# -- the evolving crawl ----------------------------------------------------------------------


@dataclass
class SoakHost:
    name: str
    layout: str
    seed: int
    paragraphs: int
    redesign_at: int | None
    pages: int = 0
    latest: deque[tuple[str, str]] = field(default_factory=lambda: deque(maxlen=LATEST))


class EvolvingCrawl:
    """Generated hosts whose pages change over the crawl (see the module docstring); deterministic."""

    def __init__(self, hosts: int, pages: int, seed: int = 0, redesign_share: float = 0.2) -> None:
        if hosts < 1 or pages < 1:
            raise ValueError("hosts and pages must be at least 1")
        self.rng = random.Random(f"soak|{seed}")
        per_host = max(1, pages // hosts)
        self.hosts: list[SoakHost] = []
        for n in range(hosts):
            r = random.Random(f"soak|{seed}|host|{n}")
            redesign = None
            if r.random() < redesign_share and per_host >= 5:
                redesign = r.randint(per_host // 5, max(per_host // 5, 4 * per_host // 5))
            self.hosts.append(SoakHost(f"soak{n:05d}.{LAYOUTS[n % 3]}.example", LAYOUTS[n % 3], seed + n,
                                       r.randint(3, 7), redesign))
        self.redesigned = sum(1 for h in self.hosts if h.redesign_at is not None)

    def next_page(self) -> RawPage:
        return self.page_of(self.rng.choice(self.hosts))

    def page_of(self, host: SoakHost) -> RawPage:
        i = host.pages
        host.pages += 1
        version = 1 if host.redesign_at is not None and i >= host.redesign_at else 0
        sp = _page(host.name, i, host.seed, host.layout, version, host.paragraphs)
        html = sp.page.html
        # A seasonal nav item, replaced every SEASON_PAGES pages of the host.
        season = i // SEASON_PAGES
        words = random.Random(f"{host.name}|season|{season}").sample(_SEASON_WORDS, 2)
        label = f"{words[0].title()} {words[1]}"
        html = html.replace("</ul></nav>", f'<li><a href="/season/{season}/">{label}</a></li></ul></nav>', 1)
        # "Latest": the host's newest titles, each on the LATEST pages after its own.
        items = "".join(f'<li><a href="{url}">{title}</a></li>' for url, title in reversed(host.latest))
        html = html.replace("</aside>", f'<div class="latest"><h3>Latest</h3><ul>{items}</ul></div></aside>', 1)
        host.latest.append((sp.page.url, _escape(sp.gold_blocks[0])))
        return RawPage(sp.page.url, html, host.name, f"soak:{host.name}:{i}")


_SEASON_WORDS = (
    "spring summer autumn winter sale picks deals guide week month special festival harvest launch "
    "archive digest review roundup highlights offers events classics favourites essentials"
).split()


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -- sampling --------------------------------------------------------------------------------


@dataclass
class Sample:
    elapsed_s: float
    pages: int
    pages_per_s: float
    worker_rss_mb: float
    rocksdb_mb: float
    rocksdb_wal_mb: float
    rss_less_wal_mb: float
    changelog_appended_mb: float
    changelog_records: int
    compacted_mb: float
    compacted_records: int
    hosts_live: int
    segments_live: int
    broker_rss_mb: float
    worker_cpu_s: float


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (Linux /proc), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def wal_bytes(data: Path) -> int:
    """Bytes in RocksDB's write-ahead logs (*.log) under `data`: what its memtables hold, not yet in SST files."""
    return sum(f.stat().st_size for f in data.rglob("*.log") if f.is_file())


def scrape(port: int, labelled: bool = False) -> dict[str, float]:
    """The unlabelled detemplate_* values of the worker's /metrics (loopback); with `labelled`,
    the labelled series too (their labels in the name)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line.startswith("detemplate_") and (labelled or "{" not in line):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                continue
    return out


@dataclass
class ChangelogSize:
    """What the state topic holds: every record appended, and the newest record per key."""

    appended_bytes: int = 0
    records: int = 0
    deltas: int = 0
    compacted_bytes: int = 0
    latest: dict[bytes, int] = field(default_factory=dict)

    def add(self, key: bytes | None, value: bytes | None) -> None:
        k = key or b""
        size = len(k) + len(value or b"")
        self.appended_bytes += size
        self.records += 1
        if record_kind(k) == "delta":
            self.deltas += 1  # one per page decided (a dead page writes none)
        self.compacted_bytes += size - self.latest.get(k, 0)
        self.latest[k] = size


def judge(values: Sequence[float], pages: Sequence[int]) -> tuple[str, float, float]:
    """(verdict, growth over the last half of the crawl, growth over the first half).

    Halves by pages decided: first sample to the sample nearest the middle, and from there to
    the last. A curve that grows with the crawl grows about as much in both halves; one
    that levels off grows little in the last half against its size.
    """
    if len(values) < 3:
        return "too few samples", 0.0, 0.0
    mid_pages = (pages[0] + pages[-1]) / 2
    m = min(range(len(pages)), key=lambda i: abs(pages[i] - mid_pages))
    first = values[m] - values[0]
    last = values[-1] - values[m]
    end = max(abs(values[-1]), 1e-9)
    if last <= 0.10 * end:
        verdict = "levels off"
    elif first > 0 and last <= 0.5 * first:
        verdict = "slowing"
    else:
        verdict = "grows with the crawl"
    return verdict, last, first


# -- the run -----------------------------------------------------------------------------------


async def _soak(args: argparse.Namespace, settings: StreamSettings, bootstrap: str, run: Any, data: Path,
                metrics_port: int, broker_pid: int, crawl: EvolvingCrawl) -> tuple[list[Sample], dict[str, Any]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition  # type: ignore[import-untyped]  # no stubs

    from ..stream.kafka_io import encode_raw, producer
    from .bench_stream import _cpu_s, _dir_bytes

    n = args.pages
    every = max(1, n // max(1, args.samples))
    prod = producer(bootstrap)
    await prod.start()
    cons = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                            auto_offset_reset="earliest", max_partition_fetch_bytes=8 * 1024 * 1024)
    await cons.start()
    log = ChangelogSize()
    samples: list[Sample] = []
    produced = 0
    t0 = time.perf_counter()
    last_t, last_pages = t0, 0
    next_sample = every
    sent: list[Any] = []
    try:
        await cons.topics()
        parts = [TopicPartition(settings.topic_state, p) for p in range(settings.partitions)]
        cons.assign(parts)
        for tp in parts:
            cons.seek(tp, 0)
        while log.deltas < n:
            if time.perf_counter() - t0 > args.timeout:
                raise TimeoutError(f"{log.deltas} of {n} pages decided within {args.timeout} s")
            proc = run.proc
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"the worker exited with {proc.returncode} (see --keep for its log)")
            while produced < n and produced - log.deltas < args.window:
                for _ in range(min(200, n - produced)):
                    page = crawl.next_page()
                    sent.append(await prod.send(settings.topic_raw, encode_raw(page), key=page.host.encode()))
                    produced += 1
            if len(sent) > 10_000:  # drop finished sends, after checking them
                for f in sent:
                    if f.done() and f.exception() is not None:
                        raise RuntimeError(f"a page could not be produced: {f.exception()!r}")
                sent = [f for f in sent if not f.done()]
            # At most a sample's pages of records at a time: the worker decides pages a fetch at a
            # time, and the records of several samples' pages can be on the topic at once.
            batch = await cons.getmany(timeout_ms=200, max_records=min(20_000, every))
            for msgs in batch.values():
                for m in msgs:
                    log.add(m.key, m.value)
            if log.deltas >= next_sample or log.deltas >= n:
                now = time.perf_counter()
                pid = proc.pid if proc is not None else 0
                met = scrape(metrics_port)
                pages_now = min(log.deltas, n)
                rss = rss_bytes(pid)
                wal = wal_bytes(data)
                samples.append(Sample(
                    elapsed_s=round(now - t0, 1),
                    pages=pages_now,
                    pages_per_s=round((pages_now - last_pages) / max(now - last_t, 1e-9), 1),
                    worker_rss_mb=round(rss / 1e6, 1),
                    rocksdb_mb=round(_dir_bytes(data) / 1e6, 2),
                    rocksdb_wal_mb=round(wal / 1e6, 2),
                    rss_less_wal_mb=round((rss - wal) / 1e6, 1),
                    changelog_appended_mb=round(log.appended_bytes / 1e6, 2),
                    changelog_records=log.records,
                    compacted_mb=round(log.compacted_bytes / 1e6, 2),
                    compacted_records=len(log.latest),
                    hosts_live=int(met.get("detemplate_hosts_in_state", -1)),
                    segments_live=int(met.get("detemplate_segments_in_state", -1)),
                    broker_rss_mb=round(rss_bytes(broker_pid) / 1e6, 1),
                    worker_cpu_s=round(_cpu_s(pid), 1),
                ))
                _print_row(samples[-1], header=len(samples) == 1)
                last_t, last_pages = now, pages_now
                next_sample = (log.deltas // every + 1) * every
        await prod.flush()
        # What pages.clean and pages.dead hold (high watermarks from Fetch: Tansu's ListOffsets is low).
        from ..stream.kafka_io import fetch_highwaters

        outs = {}
        for topic in (settings.topic_clean, settings.topic_dead):
            tps = [TopicPartition(topic, p) for p in range(settings.out_partitions)]
            outs[topic] = sum((await fetch_highwaters(bootstrap, tps)).values())
    finally:
        await cons.stop()
        await prod.stop()
    extra = {"produced": produced, "clean_pages": outs[settings.topic_clean], "dead_pages": outs[settings.topic_dead],
             "changelog_keys": len(log.latest)}
    return samples, extra


_COLUMNS = (
    ("pages", "pages", "{:>8,}"), ("elapsed_s", "s", "{:>6.0f}"), ("pages_per_s", "p/s", "{:>5.0f}"),
    ("worker_rss_mb", "RSS MB", "{:>7.1f}"), ("rss_less_wal_mb", "RSS-WAL MB", "{:>7.1f}"),
    ("rocksdb_mb", "RocksDB MB", "{:>10.2f}"), ("rocksdb_wal_mb", "of it WAL", "{:>8.2f}"),
    ("changelog_appended_mb", "appended MB", "{:>11.2f}"), ("compacted_mb", "compacted MB", "{:>12.2f}"),
    ("compacted_records", "compacted rec", "{:>13,}"), ("segments_live", "table entries", "{:>13,}"),
    ("broker_rss_mb", "broker RSS MB", "{:>13.0f}"),
)


def _print_row(s: Sample, header: bool = False) -> None:
    widths = [max(len(title), len(fmt.format(0))) for _, title, fmt in _COLUMNS]
    if header:
        print("  ".join(title.rjust(w) for (_, title, _), w in zip(_COLUMNS, widths, strict=True)), flush=True)
    print("  ".join(fmt.format(getattr(s, name)).rjust(w) for (name, _, fmt), w in zip(_COLUMNS, widths, strict=True)),
          flush=True)


SERIES = (
    ("worker_rss_mb", "worker RSS", "MB"),
    ("rss_less_wal_mb", "worker RSS less the RocksDB write-ahead log (~ its memtables)", "MB"),
    ("rocksdb_mb", "RocksDB directory", "MB"),
    ("rocksdb_wal_mb", "RocksDB write-ahead log (memtables not yet flushed)", "MB"),
    ("compacted_mb", "changelog, compacted (newest record per key)", "MB"),
    ("segments_live", "live table entries", ""),
    ("changelog_appended_mb", "changelog, appended (what Tansu stores: it never compacts)", "MB"),
)


def summarise(samples: list[Sample]) -> dict[str, Any]:
    pages = [s.pages for s in samples]
    out: dict[str, Any] = {}
    for name, _, _ in SERIES:
        values = [float(getattr(s, name)) for s in samples]
        verdict, last, first = judge(values, pages)
        out[name] = {"verdict": verdict, "growth_last_half": round(last, 2), "growth_first_half": round(first, 2),
                     "first": values[0], "mid": values[min(range(len(pages)),
                                                          key=lambda i: abs(pages[i] - (pages[0] + pages[-1]) / 2))],
                     "last": values[-1], "max": max(values)}
    return out


def plot(samples: list[Sample], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [s.pages / 1000 for s in samples]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True)
    ax = axes[0][0]
    ax.plot(x, [s.worker_rss_mb for s in samples], color="tab:blue", marker=".", label="RSS")
    ax.plot(x, [s.rss_less_wal_mb for s in samples], color="tab:cyan", ls="--",
            label="RSS less RocksDB WAL (~ memtables)")
    ax.set_title("worker memory (MB)")
    ax.legend(loc="lower right", fontsize=8)
    ax = axes[0][1]
    ax.plot(x, [s.rocksdb_mb for s in samples], color="tab:green", marker=".", label="directory")
    ax.plot(x, [s.rocksdb_wal_mb for s in samples], color="tab:olive", ls="--", label="of it write-ahead log")
    ax.set_title("worker RocksDB (MB)")
    ax.legend(loc="upper left", fontsize=8)
    ax = axes[1][0]
    ax.plot(x, [s.compacted_mb for s in samples], color="tab:purple", marker=".", label="compacted: newest per key")
    ax.plot(x, [s.changelog_appended_mb for s in samples], color="tab:gray", ls="--",
            label="appended (Tansu never compacts)")
    ax.set_title("state changelog (MB)")
    ax.legend(loc="upper left", fontsize=8)
    ax = axes[1][1]
    ax.plot(x, [s.segments_live / 1000 for s in samples], color="tab:orange", marker=".", label="table entries")
    ax.set_title("live table entries (thousands) and pages/s")
    ax2 = ax.twinx()
    ax2.plot(x, [s.pages_per_s for s in samples], color="tab:red", alpha=0.4, lw=1, label="pages/s")
    ax2.set_ylim(bottom=0)
    ax2.tick_params(axis="y", labelcolor="tab:red")
    for row in axes:
        for a in row:
            a.set_ylim(bottom=0)
            a.grid(alpha=0.3)
    for a in axes[1]:
        a.set_xlabel("pages decided (thousands)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def store_soak(args: argparse.Namespace) -> int:
    """--store-only: the worker's write pattern into one RocksDB with Faust's options, sampled."""
    import os

    from faust.stores.rocksdb import RocksDBOptions

    n, hosts, k = args.pages, args.hosts, args.snapshot_every
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    opts = RocksDBOptions(use_rocksdict=True)
    print(f"store-only: {n:,} pages over {hosts:,} hosts into one RocksDB (Faust's options: write buffer "
          f"{opts.write_buffer_size / 2**20:.0f} MiB x {opts.max_write_buffer_number}, block cache "
          f"{opts.block_cache_size / 2**30:.0f} GiB); delta {args.delta_bytes} B a page, snapshot "
          f"{args.snapshot_bytes:,} B every {k} pages of a host", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="detemplate-store-soak-"))
    rng = random.Random(f"store-soak|{args.seed}")
    # Incompressible values, as the deltas are (64-bit segment hashes).
    pool = os.urandom(4 * max(args.delta_bytes, args.snapshot_bytes))
    names = [f"soak{i:05d}.example".encode() for i in range(hosts)]
    page_no = [0] * hosts
    log = ChangelogSize()
    every = max(1, n // max(1, args.samples))
    rows: list[dict[str, float]] = []
    db = opts.open(tmp / "hosts-0.db")
    t0 = time.perf_counter()
    try:
        for i in range(1, n + 1):
            h = rng.randrange(hosts)
            page_no[h] += 1
            p = page_no[h]
            prefix = TABLE_PREFIX + names[h] + SEP
            records = [(prefix + b"d%d" % (p % (2 * k)), args.delta_bytes)]
            if p % k == 0:
                records.append((prefix + b"s%d" % ((p // k) % 2), args.snapshot_bytes))
            for key, size in records:
                off = rng.randrange(len(pool) - size)
                value = pool[off:off + size]
                db[key] = value
                db[b"__faust\x00offset__"] = str(log.records).encode()  # Faust's persisted offset, per record
                log.add(key, value)
            if i % every == 0 or i == n:
                data = tmp / "hosts-0.db"
                rss = rss_bytes(os.getpid())
                rows.append({
                    "pages": i,
                    "elapsed_s": round(time.perf_counter() - t0, 1),
                    "rss_mb": round(rss / 1e6, 1),
                    "rocksdb_mb": round(sum(f.stat().st_size for f in data.iterdir() if f.is_file()) / 1e6, 2),
                    "wal_mb": round(wal_bytes(data) / 1e6, 2),
                    "sst_mb": round(sum(f.stat().st_size for f in data.glob("*.sst")) / 1e6, 2),
                    "written_mb": round(log.appended_bytes / 1e6, 2),
                    "compacted_mb": round(log.compacted_bytes / 1e6, 2),
                })
                r = rows[-1]
                if len(rows) == 1:
                    print(f"{'pages':>10} {'s':>6} {'RSS MB':>8} {'RocksDB MB':>10} {'WAL MB':>8} {'SST MB':>8} "
                          f"{'written MB':>10} {'compacted MB':>12}")
                print(f"{i:>10,} {r['elapsed_s']:>6.0f} {r['rss_mb']:>8.1f} {r['rocksdb_mb']:>10.2f} "
                      f"{r['wal_mb']:>8.2f} {r['sst_mb']:>8.2f} {r['written_mb']:>10.1f} {r['compacted_mb']:>12.2f}",
                      flush=True)
    finally:
        db.close()
        shutil.rmtree(tmp, ignore_errors=True)
    with open(out / "store-soak.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    # Memtable flushes and compactions make saw teeth: compare the highest value of each half.
    half = len(rows) // 2
    print("Judged by the highest value of each half of the run (flushes and compactions make saw teeth; sample "
          "densely, e.g. --samples 500, to catch the peaks):")
    for name in ("rss_mb", "rocksdb_mb", "wal_mb", "sst_mb", "compacted_mb", "written_mb"):
        lo1, hi1 = min(r[name] for r in rows[:half]), max(r[name] for r in rows[:half])
        lo2, hi2 = min(r[name] for r in rows[half:]), max(r[name] for r in rows[half:])
        # The first half starts empty, so its lows say nothing; bounded saw teeth reach the same highs.
        verdict = "bounded" if hi2 <= 1.1 * hi1 else "grows with the crawl"
        print(f"  {name}: {lo1:,.1f} to {hi1:,.1f} in the first half, {lo2:,.1f} to {hi2:,.1f} in the last: {verdict}")
    print(f"wrote {out / 'store-soak.csv'}")
    return 0


def _main(args: argparse.Namespace) -> int:
    from .bench_stream import Run, _dir_bytes
    from .broker import LocalBroker, free_port

    if args.pages < 1 or args.hosts < 1 or args.samples < 2:
        print("detemplate bench-soak: --pages and --hosts must be at least 1, --samples at least 2")
        return 2
    if args.store_only:
        return store_soak(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    crawl = EvolvingCrawl(args.hosts, args.pages, args.seed, args.redesign_share)
    print(f"soak: {args.pages:,} pages over {args.hosts:,} hosts (about {args.pages // args.hosts} each, "
          f"{crawl.redesigned} redesigned once), {args.partitions} partitions, K = {args.snapshot_every}", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="detemplate-soak-"))
    broker = LocalBroker(log_path=tmp / "broker.log")
    run: Run | None = None
    try:
        broker.start()  # inside: a broker that does not start leaves no temporary folder behind
        metrics_port = free_port()
        settings = StreamSettings(
            broker=broker.url, partitions=args.partitions, out_partitions=args.partitions, tansu=True,
            snapshot_every=args.snapshot_every, session_timeout_s=6.0, heartbeat_s=1.0, rebalance_timeout_s=6.0,
            metrics_host="127.0.0.1", metrics_port=metrics_port,
            **({"cache_hosts": args.cache_hosts} if args.cache_hosts else {}),
        )
        broker.create_topics(settings.topic_partitions())
        run = Run(settings, tmp)
        data = tmp / "worker-data"
        run.start_worker(data)
        assert broker.proc is not None
        samples, extra = asyncio.run(_soak(args, settings, broker.bootstrap, run, data, metrics_port,
                                           broker.proc.pid, crawl))
        run.stop_worker()
        extra["rocksdb_mb_after_stop"] = round(_dir_bytes(data) / 1e6, 2)
    finally:
        if run is not None:
            run.kill_worker()
        broker.stop()
        if args.keep:
            print(f"kept {tmp} (worker.log, broker.log, worker-data/)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    summary = summarise(samples)
    elapsed = samples[-1].elapsed_s
    rate = samples[-1].pages / elapsed if elapsed else float("nan")
    with open(out / "soak.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(asdict(samples[0])))
        w.writeheader()
        for s in samples:
            w.writerow(asdict(s))
    figures = {
        "pages": args.pages, "hosts": args.hosts, "redesigned_hosts": crawl.redesigned,
        "partitions": args.partitions, "snapshot_every": args.snapshot_every, "seed": args.seed,
        "elapsed_s": elapsed, "pages_per_s": round(rate, 1), **extra, "curves": summary,
    }
    (out / "soak.json").write_text(json.dumps(figures, indent=1) + "\n")
    print(f"\n{samples[-1].pages:,} pages decided in {elapsed:,.0f} s ({rate:,.0f} pages/s on this machine, as "
          f"measured); pages.clean holds {extra['clean_pages']:,}, pages.dead {extra['dead_pages']:,}")
    print("Judged by growth over the last half of the crawl (by pages) against the first half:")
    for name, label, unit in SERIES:
        c = summary[name]
        ratio = c["growth_last_half"] / c["growth_first_half"] if c["growth_first_half"] else float("nan")
        print(f"  {label}: {c['first']:,} -> {c['mid']:,} -> {c['last']:,} {unit} (first, middle, last sample); "
              f"last half {c['growth_last_half']:+,} {unit}, first half {c['growth_first_half']:+,} {unit} "
              f"(ratio {ratio:.2f}): {c['verdict']}")
    print(f"  The appended changelog grows with every page by design: one delta a page, a snapshot a host every "
          f"{args.snapshot_every} pages; Tansu never compacts it. Kafka's log compaction keeps the compacted size "
          f"({summary['compacted_mb']['last']} MB, {extra['changelog_keys']:,} keys: at most "
          f"{2 * args.snapshot_every + 2} a host).")
    print(f"  RocksDB after the worker stopped (memtables flushed): {extra['rocksdb_mb_after_stop']} MB. "
          f"Until a partition's memtable reaches its write buffer (DETEMPLATE_ROCKSDB_WRITE_BUFFER_MB, "
          f"{settings.rocksdb_write_buffer_mb} MB; up to 3 of them), what it holds is in memory and in the "
          "write-ahead log, and both grow with the bytes written; then it is flushed to SST files, which "
          "compaction keeps near the compacted size.")
    if not args.no_plot:
        try:
            title = (f"detemplate bench-soak: {args.pages:,} pages, {args.hosts:,} hosts "
                     f"({crawl.redesigned} redesigned), K = {args.snapshot_every}, {rate:,.0f} pages/s")
            plot(samples, out / "soak.png", title)
        except ImportError:
            print("no plot: matplotlib is missing (pip install detemplate[report])")
    print(f"wrote {out / 'soak.csv'}, {out / 'soak.json'}" + ("" if args.no_plot else f", {out / 'soak.png'}"))
    return 0
