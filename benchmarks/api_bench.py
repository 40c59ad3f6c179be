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

import time
from datetime import UTC, datetime, timedelta

import psycopg
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.api.deps import get_now
from backend.cli.serve import migrate
from backend.config import Settings
from backend.db import rollups
from backend.db.session import make_engine, make_sessionmaker
from benchmarks import common, peer_storage
from tests.support.db import libpq

BOUNDS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CLASSES = ("chat", "code")


def fill(url: str, *, pools: int, days: int, now: datetime = NOW) -> None:
    """pools/4 models x 2 classes x (eagle3, off); one row per pool and minute up to `now` (timed)."""
    t0 = time.perf_counter()
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
    print(f"filled {pools} pools x {days} days at 1-minute buckets in {time.perf_counter() - t0:.1f} s")


def run(admin_url: str | None = None, *, pools: int = 20, days: int = 30, repeats: int = 20,
        keep: bool = False) -> dict[tuple[str, str], tuple[float, float]]:
    with common.scratch(admin_url, "specwatch_bench", keep=keep) as url:
        migrate(url)
        fill(url, pools=pools, days=days)
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
        return time_calls(app, url, calls, repeats, width=55)


def time_calls(app, url: str, calls: dict[str, tuple[str, dict]], repeats: int,
               width: int) -> dict[tuple[str, str], tuple[float, float]]:
    """p50/p95 of each (label: (path, params)) call in-process, with every hour dirty and after the rollup."""
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
                    client.get(path, params=params).raise_for_status()
                results[(state, label)] = p50, p95 = common.timed(call, repeats)
                print(f"{state:9s}  {label:{width}s} p50 {p50 * 1000:8.1f} ms   p95 {p95 * 1000:8.1f} ms")
    return results


def main(argv: list[str] | None = None) -> None:
    a = common.parser(__doc__, keep=True, pools=20, days=30, repeats=20).parse_args(argv)
    run(a.admin_url, pools=a.pools, days=a.days, repeats=a.repeats, keep=a.keep)


if __name__ == "__main__":
    main()
