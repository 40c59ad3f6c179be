"""Time the summary and acceptance endpoints over 30 days x 20 pools at 1-minute buckets.

    python -m benchmarks.api_bench [--admin-url URL] [--pools 20] [--days 30] [--repeats 20] [--keep]

Creates a throwaway database (migrated by alembic), fills `pool_buckets` with one bulk
INSERT ... SELECT generate_series per pool, then calls the API in-process (FastAPI TestClient: routing,
SQL, domain math and JSON serialisation included) and prints p50/p95 per call, twice: with every hour
dirty (straight after the fill, as after a back-fill before the rollup task caught up: reads take those
hours from the raw buckets) and after running the rollup task to completion. `run()` is the entry point
for `make bench`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import psycopg
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.api.deps import get_now
from backend.cli.serve import migrate
from backend.config import Settings
from backend.db import rollups
from backend.db.session import make_engine, make_sessionmaker
from benchmarks import peer_storage
from tests.support.db import libpq

BOUNDS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CLASSES = ("chat", "code")


def _with_db(url: str, name: str) -> str:
    head, _, _ = url.rpartition("/")
    return f"{head}/{name}"


def fill(url: str, *, pools: int, days: int, now: datetime = NOW) -> None:
    """pools/4 models x 2 classes x (eagle3, off); one row per pool and minute up to `now`."""
    start = now - timedelta(days=days)
    with make_sessionmaker(make_engine(url))() as session:  # the daily partitions the rows go into
        rollups.ensure_partitions(session, [(start + timedelta(days=i)).date() for i in range(days + 2)])
        session.commit()
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        conn.execute("INSERT INTO histogram_layouts (bounds) VALUES (%s)", (BOUNDS,))
        layout = conn.execute("SELECT id FROM histogram_layouts").fetchone()[0]
        for i in range(pools):
            model, cls, mode = f"model-{i // 4}", CLASSES[(i // 2) % 2], ("eagle3", "off")[i % 2]
            k = 3 if mode == "eagle3" else None
            pid = conn.execute(
                "INSERT INTO pools (model_name, traffic_class, spec_mode, num_spec_tokens, first_seen, last_seen)"
                " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id", (model, cls, mode, k, start, now)).fetchone()[0]
            spec = mode == "eagle3"
            conn.execute(f"""
                INSERT INTO pool_buckets (pool_id, bucket_start, bucket_seconds, drafts, draft_tokens,
                    accepted_tokens, accepted_per_pos, itl_layout_id, itl_buckets, itl_sum, itl_count,
                    tpot_layout_id, tpot_buckets, tpot_sum, tpot_count, generation_tokens, finished_requests,
                    running_mean, source, collected_at)
                SELECT %(pid)s, t, 60,
                       {"200, 600, a0 + a1 + a2, ARRAY[a0, a1, a2]" if spec else "NULL, NULL, NULL, NULL"},
                       %(layout)s, ARRAY[0, 0, h1, h1 + h2, h1 + h2 + 5, h1 + h2 + 8, h1 + h2 + 9, h1 + h2 + 10,
                                         h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10,
                                         h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10,
                                         h1 + h2 + 10, h1 + h2 + 10]::double precision[],
                       (h1 + h2 + 10) * 0.05, h1 + h2 + 10,
                       %(layout)s, ARRAY[0, h1, h1 + h2, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10,
                                         h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10,
                                         h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10,
                                         h1 + h2 + 10, h1 + h2 + 10, h1 + h2 + 10]::double precision[],
                       (h1 + h2 + 10) * {0.02 if spec else 0.04}, h1 + h2 + 10, 1000, 10, 5 + h2 / 10.0,
                       'prometheus', t
                FROM generate_series(%(start)s::timestamptz, %(end)s::timestamptz, interval '1 minute') AS t,
                     LATERAL (SELECT 150 + floor(random() * 20) AS a0, 90 + floor(random() * 20) AS a1,
                                     40 + floor(random() * 10) AS a2, 40 + floor(random() * 20) AS h1,
                                     30 + floor(random() * 20) AS h2 OFFSET 0) AS r
            """, {"pid": pid, "layout": layout, "start": start, "end": now - timedelta(minutes=1)})
        conn.execute("ANALYZE")


def _time(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]


def scratch_database(admin_url: str | None, prefix: str) -> tuple[str, str, str]:
    """A new empty database for one bench run: (the admin URL, its name, its URL); the caller drops it."""
    admin = admin_url or os.environ.get("SPECWATCH_TEST_DATABASE_URL",
                                        "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(libpq(admin), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin, name, _with_db(admin, name)


def run(admin_url: str | None = None, *, pools: int = 20, days: int = 30, repeats: int = 20,
        keep: bool = False) -> dict[tuple[str, str], tuple[float, float]]:
    admin, name, url = scratch_database(admin_url, "specwatch_bench")
    try:
        migrate(url)
        t0 = time.perf_counter()
        fill(url, pools=pools, days=days)
        print(f"filled {pools} pools x {days} days at 1-minute buckets in {time.perf_counter() - t0:.1f} s")
        # the same question repeated: with the response cache every repeat would be a kept answer; this
        # bench times computing it (the load bench measures the cache)
        app = create_app(Settings(_env_file=None, database_url=url, api_cache_entries=0, anonymous_read=True))
        app.dependency_overrides[get_now] = lambda: NOW
        window = f"{days}d"
        calls = {
            f"summary model-0 window={window}": ("/api/v1/summary", {"model": "model-0", "window": window}),
            "summary model-0 window=1h": ("/api/v1/summary", {"model": "model-0", "window": "1h"}),
            f"acceptance chat range={window} (auto step)": (
                "/api/v1/acceptance", {"model": "model-0", "traffic_class": "chat", "range": window}),
            f"acceptance mixed range={window} step=1h window=7d": (
                "/api/v1/acceptance", {"model": "model-0", "range": window, "step": "1h", "window": "7d"}),
            "fleet window=1h": ("/api/v1/fleet", {"window": "1h"}),
        }
        results = {}
        for state in ("dirty", "rolled up"):
            if state == "rolled up":  # what the beat-scheduled rollup task keeps up with
                t0 = time.perf_counter()
                hours = peer_storage.rollup(url)
                print(f"rolled up {hours:,} pool-hours in {time.perf_counter() - t0:.1f} s")
            else:
                print("every hour dirty (as straight after a back-fill, before the rollup task caught up):")
            with TestClient(app) as client:  # a new process's pools and prepared statements per state
                for label, (path, params) in calls.items():
                    def call(path=path, params=params):
                        r = client.get(path, params=params)
                        r.raise_for_status()
                    results[(state, label)] = p50, p95 = _time(call, repeats)
                    print(f"{state:9s}  {label:55s} p50 {p50 * 1000:8.1f} ms   p95 {p95 * 1000:8.1f} ms")
        return results
    finally:
        if not keep:
            with psycopg.connect(libpq(admin), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        else:
            print(f"kept database {url}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--admin-url")
    ap.add_argument("--pools", type=int, default=20)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args(argv)
    run(a.admin_url, pools=a.pools, days=a.days, repeats=a.repeats, keep=a.keep)


if __name__ == "__main__":
    main()
