"""Every periodic task at fleet scale: CPU seconds per minute of each, and their total, against the targets.

    python -m benchmarks periodic [--pools 100,1000,5000] [--quick] [--repeats 3] [--raw-hours 25]
                                  [--days 30] [--keep] [--finalize] [--admin-url URL]

Per fleet size N, a throwaway database migrated by alembic gets N pools (model-<i/4>, chat and code, each
with an eagle3 pool and its `off` baseline, K = 3) and their stored history, built set-based inside
Postgres: one INSERT ... SELECT generate_series per batch of pools writes the last `--raw-hours` of
1-minute buckets (acceptance counters, per-position counts, ITL and TPOT histograms on vLLM's bounds,
running requests; the statement trigger queues their hours for the rollup), the rollup task rolls them up
as it does in production, and those hour rows, copied a day back at a time, make `--days` of hourly and
daily rollups. Then, at a pinned `now` half-way through an hour, the bench runs every beat entry the way a
worker runs it, minute after minute (`--repeats`):

* collect: one bucket per pool through the write path of a collection cycle (validation, pools, COPY,
  merge: `ingest.write_records`, what `collect.run_prometheus` does after its 19 range queries; the
  Prometheus side is measured by `python -m benchmarks collect`);
* with `--finalize`, finalize (direct scrape): with the scrape source, the collect task's work instead of
  collect's: one complete bucket a minute finalised from stored raw scrapes (`scrape.finalize`), measured in
  a database of its own with N targets of one pool each scraped every 15 s (`benchmarks.finalize_cost`);
  shown beside collect, and a second total with it in collect's place; the mean of every run over whole
  10-minute replica cycles (the run that ends one also writes the replica rows). Off by default: it renders
  and stores minutes of scrapes for every target before and between the runs (docs/scale.md);
* rollups: the hours that collect marked dirty and that have ended, re-aggregated (`rollup.maintain`;
  mid-hour nothing has), and "rollups, hour ended": the hour that just ended re-aggregated for every pool
  (queued unmeasured before it), twice an hour (once when it ends, once more when its last buckets, collected
  after the hour, queue it again);
* fleet snapshots: each standard window timed alone, counted as often as `fleet.due_windows` schedules it;
* alert evaluation with alerts.example.yaml (`alerts.evaluate`), the outbox sender (`dispatch.deliver_due`);
* rollout evaluation (`rollout.evaluate`), the weekly digest check, retention and partitions
  (`rollup.storage`), each per its beat period.

The tasks run in this process with one BLAS thread, as in a worker process (workers.celery_app).
CPU of one run = this process's CPU time (Python, numpy) + the CPU time of the database's backends
(/proc/<pid>/stat of every backend connected to the bench database, read before and after). A task's CPU
seconds per minute = CPU of one run (median of the repeats) x runs per minute (60 / its beat period).
Targets: all periodic work together <= 20 % of one core at 1,000 pools and <= 1 core at 5,000 pools,
i.e. <= 12 ms of CPU per pool-minute at any size. `run()` is the entry point for `make bench`.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from backend import blas
from backend.cli.serve import migrate
from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.services import alerts, dispatch, fleet, ingest, report_digest, rollout, rollup
from benchmarks import common, finalize_cost
from benchmarks.periodic_history import build, next_records, pinned_now
from tests.support.db import libpq

ROOT = Path(__file__).resolve().parents[1]
POOLS = (100, 1000, 5000)
QUICK_POOLS = (100,)
TARGET_MS_PER_POOL_MINUTE = 12.0  # <= 1 core at 5,000 pools; 20 % of a core at 1,000 is the same 12 ms
HOUR_ROLLUP_PERIOD = 1800  # an hour is rolled up when it ends and again after its last buckets arrive
CLK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------------------------ CPU


def _proc_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
    except OSError:  # the backend exited
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK  # utime + stime


@dataclass
class Meter:
    """CPU seconds of this process and of every backend of one database, around a block."""

    conn: psycopg.Connection  # the meter's own connection (its backend is not counted)
    database: str

    def backends(self) -> list[int]:
        return [r[0] for r in self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (self.database,)).fetchall()]

    def measure(self, fn: Callable[[], object]) -> tuple[float, float]:
        """(python CPU s, postgres CPU s) of one call of fn."""
        before = {pid: _proc_cpu(pid) for pid in self.backends()}
        py0 = time.process_time()
        fn()
        py = time.process_time() - py0
        pg = sum(_proc_cpu(pid) - before.get(pid, 0.0) for pid in self.backends())
        return py, max(pg, 0.0)


@contextmanager
def meter_for(url: str, name: str) -> Iterator[Meter]:
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        yield Meter(conn, name)


@dataclass
class Task:
    name: str
    period: float  # seconds between runs (beat)
    runs_per_minute: float
    py: list[float] = field(default_factory=list)
    pg: list[float] = field(default_factory=list)
    replaces: str | None = None  # the task this one stands in for with another configuration (not in the total)
    mean: bool = False  # runs differ by design (e.g. every tenth does more): count their mean, not the median

    @classmethod
    def every(cls, name: str, period: float, **kw) -> Task:
        """A task beat runs every `period` seconds."""
        return cls(name, period, 60.0 / period, **kw)

    @property
    def per_run(self) -> tuple[float, float]:
        if self.mean:
            return statistics.fmean(self.py), statistics.fmean(self.pg)
        return statistics.median(self.py), statistics.median(self.pg)

    @property
    def per_minute(self) -> float:
        py, pg = self.per_run
        return (py + pg) * self.runs_per_minute


def snapshot_runs_per_minute(settings: Settings, window: int, minutes: int = 60) -> float:
    """How often `fleet.due_windows` recomputes a window when the task runs every interval (simulated)."""
    taken: dict[int, datetime] = {}
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    runs = 0
    step = settings.fleet_snapshot_interval_seconds
    count = int(minutes * 60 / step)
    for i in range(count):
        at = t0 + timedelta(seconds=i * step)
        for w in fleet.due_windows(taken, now=at, settings=settings):
            taken[w] = at
            runs += w == window
    return runs / minutes


# ------------------------------------------------------------------------------------------ the tasks


def bench_one(n: int, *, admin_url: str | None, repeats: int, raw_hours: int, days: int, keep: bool,
              attach_to: str | None = None, warm_up: bool = True, finalize: bool = False) -> dict:
    built: dict = {}
    with common.scratch(admin_url, "specwatch_pbench", keep=keep, attach=attach_to, indent="  ") as url:
        if attach_to:  # a database kept by an earlier run (--keep): its pools, from the next minute on
            with psycopg.connect(libpq(url)) as conn:
                n, last = conn.execute("SELECT count(*), max(last_seen) FROM pools").fetchone()
            now = last + timedelta(minutes=1)
        else:
            now = pinned_now()
            migrate(url)
            built = build(url, n, now=now, raw_hours=raw_hours, days=days)
            print(f"  built {n} pools: {built['raw rows']:,} raw buckets ({raw_hours} h), {built['hour rows']:,} "
                  f"older hour rows ({days} d), {built['MiB']:,.0f} MiB; raw {built['raw buckets']:.0f} s, rollups "
                  f"{built['rollups']:.0f} s, older rollups {built['older rollups']:.0f} s", flush=True)
        if repeats <= 0:
            return {"pools": n, "tasks": [], "built": built}
        s = Settings(_env_file=None, database_url=url, alert_rules_file=str(ROOT / "alerts.example.yaml"))
        engine = make_engine(url)
        factory = make_sessionmaker(engine)
        tasks = measure(factory, s, url=url, name=make_url(url).database, now=now, repeats=repeats,
                        warm_up=warm_up)
        engine.dispose()
        if finalize and not attach_to:
            fin = Task.every("finalize (direct scrape)", s.collect_interval_seconds,
                             replaces="collect (write path)", mean=True)
            # every run over whole replica-grain cycles (one run in ten also writes the 10-minute replica rows):
            # their mean is the cost a minute
            cycle = max(1, s.replica_grain // 60)
            fin.py, fin.pg = finalize_cost.measure(n, meter_for, admin_url=admin_url, start=now,
                                                   minutes=cycle * max(1, -(-repeats // cycle)))
            tasks.insert(1, fin)
        return {"pools": n, "tasks": tasks, "built": built}


def measure(factory, s: Settings, *, url: str, name: str, now: datetime, repeats: int,
            warm_up: bool = True) -> list[Task]:
    every = Task.every
    tasks = [every("collect (write path)", s.collect_interval_seconds), every("rollups", s.rollup_interval_seconds),
             every("rollups, hour ended", HOUR_ROLLUP_PERIOD)]
    tasks += [Task(f"fleet snapshot {_fmt(w)}", fleet.refresh_period(w, s), snapshot_runs_per_minute(s, w))
              for w in s.fleet_snapshot_windows]
    tasks += [every("alert evaluation", s.alert_eval_interval_seconds),
              every("outbox", s.alert_deliver_interval_seconds),
              every("rollout evaluation", s.rollout_eval_interval_seconds),
              every("digest check", s.digest_check_interval_seconds),
              every("retention", s.storage_interval_seconds)]
    by_name = {t.name: t for t in tasks}
    with psycopg.connect(libpq(url), autocommit=True) as mconn:
        meter = Meter(mconn, name)
        # warm-up: connections, first alert states and rollout tracks, prepared plans
        if warm_up:
            _cycle(factory, s, url, now, meter, None)
        for i in range(1, repeats + 1):
            _cycle(factory, s, url, now + timedelta(minutes=i), meter, by_name)
    return tasks


def _fmt(seconds: float) -> str:
    for unit, k in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= k and seconds % k == 0:
            return f"{int(seconds // k)}{unit}"
    return f"{seconds:g}s"


def _cycle(factory, s: Settings, url: str, now: datetime, meter: Meter, tasks: dict[str, Task] | None) -> None:
    """Every task once at `now` (one minute of the schedule, each task run once); collect writes the bucket
    ending at `now` (the newest stored one ends a minute before)."""
    records = next_records(url, now)

    def record(label: str, fn: Callable[[], object]) -> None:
        py, pg = meter.measure(fn)
        if tasks is not None:
            tasks[label].py.append(py)
            tasks[label].pg.append(pg)

    def collect() -> None:
        with session_scope(factory) as session:
            ingest.write_records(session, records, width=s.bucket_seconds, source="prometheus", now=now)

    def roll() -> None:
        while True:
            with session_scope(factory) as session:
                if not rollup.maintain(session, settings=s, now=now).more:
                    return

    record("collect (write path)", collect)
    record("rollups", roll)
    ended = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    with psycopg.connect(libpq(url), autocommit=True) as conn:  # unmeasured: as collect's last bucket queues it
        conn.execute("INSERT INTO rollup_dirty (pool_id, hour_start) SELECT id, %s FROM pools ON CONFLICT DO NOTHING",
                     (ended,))
    record("rollups, hour ended", roll)
    for w in s.fleet_snapshot_windows:
        one = s.model_copy(update={"fleet_snapshot_windows": [w]})

        def snap(one=one) -> None:
            with session_scope(factory) as session:
                fleet.refresh_snapshots(session, now=now, settings=one, force=True)

        record(f"fleet snapshot {_fmt(w)}", snap)

    def in_session(task: Callable[..., object]) -> Callable[[], None]:  # as its worker task runs it
        def run() -> None:
            with session_scope(factory) as session:
                task(session, settings=s, now=now)
        return run

    record("alert evaluation", in_session(alerts.evaluate))
    record("outbox", lambda: dispatch.deliver_due(factory, s, max_run=1.0))
    record("rollout evaluation", in_session(rollout.evaluate))
    record("digest check", in_session(report_digest.send_digest))
    record("retention", in_session(rollup.storage))


# ------------------------------------------------------------------------------------------ report


def table(result: dict) -> str:
    n = result["pools"]
    lines = [f"{n:,} pools",
             (f"  {'task':26s} {'period s':>8s} {'runs/min':>8s} {'py s/run':>9s} {'pg s/run':>9s} "
             f"{'CPU s/min':>9s} {'ms/pool-min':>11s}")]
    tasks = {t.name: t for t in result["tasks"]}
    total = 0.0
    for t in result["tasks"]:
        py, pg = t.per_run
        total += 0.0 if t.replaces else t.per_minute
        lines.append(f"  {t.name:26s} {t.period:8.0f} {t.runs_per_minute:8.3f} {py:9.3f} {pg:9.3f} "
                     f"{t.per_minute:9.3f} {t.per_minute / n * 1000:11.2f}"
                     + (f"   (instead of {t.replaces}: not in the total)" if t.replaces else ""))
    budget = TARGET_MS_PER_POOL_MINUTE * n / 1000

    def total_line(label: str, value: float) -> str:
        verdict = "met" if value <= budget else "NOT MET"
        return (f"  {label:26s} {'':8s} {'':8s} {'':9s} {'':9s} {value:9.3f} {value / n * 1000:11.2f}"
                f"   target <= {budget:.1f} CPU s/min ({TARGET_MS_PER_POOL_MINUTE:g} ms/pool-min, "
                f"{budget / 60:.0%} of a core): {verdict}")

    lines.append(total_line("total", total))
    for t in result["tasks"]:
        if t.replaces and t.replaces in tasks:
            lines.append(total_line(f"total, {t.name.split('(')[-1].rstrip(')')}",
                                    total - tasks[t.replaces].per_minute + t.per_minute))
    return "\n".join(lines)


def run(argv: list[str] | None = None) -> list[dict]:
    ap = common.parser(__doc__, prog="python -m benchmarks periodic")
    ap.add_argument("--pools", help="fleet sizes, comma-separated (default 100,1000,5000; --quick: 100)")
    ap.add_argument("--quick", action="store_true", help="100 pools, 3 h of raw buckets, 7 days, one repeat")
    ap.add_argument("--repeats", type=int, help="minutes run per task after a warm-up (median counts; default 3)")
    ap.add_argument("--raw-hours", type=int, help="hours of 1-minute buckets (default 25: the 24 h window's)")
    ap.add_argument("--days", type=int, help="days of hourly rollups (default 30: the longest snapshot window)")
    ap.add_argument("--keep", action="store_true", help="keep the databases (--repeats 0: build only)")
    ap.add_argument("--attach", help="measure a database kept by an earlier run (no build; --pools ignored)")
    ap.add_argument("--no-warm-up", action="store_true", help="no unmeasured first minute (an attached database "
                    "that was measured before already has its alert states and rollout tracks)")
    ap.add_argument("--finalize", action="store_true", help="also time the direct-scrape source's finalize at "
                    "each size (its own database; slow above a few hundred pools, see docs/scale.md)")
    a = ap.parse_args(argv or [])
    pools = tuple(int(x) for x in a.pools.split(",")) if a.pools else (QUICK_POOLS if a.quick else POOLS)
    repeats = a.repeats if a.repeats is not None else (1 if a.quick else 3)
    if a.attach:
        pools = (0,)
    raw_hours = a.raw_hours or (3 if a.quick else 25)
    days = a.days or (7 if a.quick else 30)
    blas.single_threaded()  # as a worker process runs (workers.celery_app)
    out = []
    for n in pools:
        print(f"-- {a.attach or f'{n:,} pools'}", flush=True)
        out.append(bench_one(n, admin_url=a.admin_url, repeats=repeats, raw_hours=raw_hours, days=days, keep=a.keep,
                             attach_to=a.attach, warm_up=not a.no_warm_up, finalize=a.finalize))
        if out[-1]["tasks"]:
            print(table(out[-1]), flush=True)
    print("\nperiodic work, CPU seconds per minute (this process + the database's backends):")
    for r in out:
        if r["tasks"]:
            print(table(r))
    return out


if __name__ == "__main__":
    import sys

    run(sys.argv[1:])
