"""Direct scrape's per-minute task at fleet scale: `scrape.finalize` turning a minute of stored raw scrapes
into buckets, for the periodic bench (`python -m benchmarks periodic`).

With `SPECWATCH_SOURCE=scrape` the scrape task stores every target's parsed samples every 15 s
(`benchmarks.scrape` measures that) and the collect task finalises each complete bucket from them: it
replaces the Prometheus source's collection, whose write path the periodic bench times as "collect".
Measured here in a throwaway database of its own (its pools are the simulator's, not the bench fleet's):
n targets of one pool each, as `benchmarks.scrape` serves them (3 engines, about 180 lines an engine),
rendered by the simulator on a pinned clock that moves 15 s a scrape, parsed as the scrape task parses
them and stored (unmeasured), starting `scrape_max_gap_seconds` + 1 minute back (the history each run
reads); then, minute after minute, the finalize run of the bucket that completed (measured: this process's
CPU and the database's backends', as every periodic task).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backend.cli.serve import migrate
from backend.config import Settings
from backend.config_core import ScrapeTarget
from backend.db import scrape_repo
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.scrape.fetch import FetchResult
from backend.services import scrape
from backend.sim.server import Simulator
from benchmarks.common import scratch_database
from benchmarks.scrape_bench import _fleet
from tests.support.db import drop_database

SCRAPE_EVERY = 15  # seconds, SPECWATCH_SCRAPE_INTERVAL_SECONDS's default
ENGINES = 3


def measure(n: int, meter_for, *, admin_url: str | None, start: datetime, minutes: int) -> tuple[list, list]:
    """(python CPU s, postgres CPU s) of each of `minutes` finalize runs after an unmeasured first one, at n
    pools (any `replica_grain // 60` consecutive runs include one that writes the replica rows).
    `meter_for(url, name)` gives the bench's Meter of that database (a context manager)."""
    admin, name, url = scratch_database(admin_url, "specwatch_pbench_scrape")
    engine = None
    try:
        migrate(url)
        engine = make_engine(url)
        factory = make_sessionmaker(engine)
        # the unmeasured first run ends a replica-grain bucket, so the measured runs meet each target's
        # layouts and replicas as a running worker does (its plans kept from the run before)
        defaults = Settings(_env_file=None)
        grain = defaults.replica_grain or 60
        base = -(-int(start.timestamp()) // grain) * grain
        # a bucket's increases start from each series' sample before it, up to scrape_max_gap_seconds back, so
        # finalize reads that much history every run: store it first, as a running scrape task has
        history = defaults.scrape_max_gap_seconds + 60
        first = float(base - history)
        clock = [first]
        sim = Simulator(_fleet(n, ENGINES), seed=0, clock=lambda: clock[0], start=first - 60.0, tick=float(SCRAPE_EVERY))
        targets = [ScrapeTarget(url=f"http://sim.invalid/pools/p{i}/metrics",
                                labels={"traffic_class": f"class-{i // 2}", "spec_mode": "eagle3" if i % 2 == 0 else "off"})
                   for i in range(n)]
        s = Settings(_env_file=None, database_url=url, source="scrape", scrape_targets=targets)

        def scrape_at(t: float) -> None:  # what the scrape task stores at t (unmeasured)
            clock[0] = t
            rows: list = []
            for i, target in enumerate(targets):
                text = sim.metrics(f"p{i}").decode()
                scrape._parse_one(FetchResult(target.url, t, text, None), target.labels, s,
                                  datetime.fromtimestamp(t, UTC), rows, [], {})
            with session_scope(factory) as session:
                scrape_repo.add_raw_scrapes(session, rows, now=datetime.fromtimestamp(t, UTC))

        py, pg = [], []
        with meter_for(url, name) as meter:
            t = first
            for minute in range(minutes + 1):
                end = base + 60 * minute  # the bucket (end - 60, end] completes once its settle has passed
                ready = end + max(s.settle_seconds, s.scrape_interval_seconds)
                while t <= ready:
                    scrape_at(t)
                    t += SCRAPE_EVERY
                now = datetime.fromtimestamp(ready, UTC) + timedelta(seconds=1)
                run_py, run_pg = meter.measure(lambda now=now: scrape.finalize(factory, s, now=now))
                if minute:  # the first run also walks the initial lookback and the stored history
                    py.append(run_py)
                    pg.append(run_pg)
        return py, pg
    finally:
        if engine is not None:
            engine.dispose()
        drop_database(admin, name)
