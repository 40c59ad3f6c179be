"""Time GET /capacity and /capacity/fleet (the overview's saving column) over N pools x D days.

    python -m benchmarks.capacity_bench [--admin-url URL] [--pools 20] [--days 30] [--repeats 10] [--keep]

The fill of benchmarks.api_bench (pools/4 models x 2 classes x (eagle3, off), one row per pool and minute with
generation tokens and running requests), every pool priced and with one replica; in-process calls (routing,
SQL, bootstrap, JSON), p50/p95 with every hour dirty and after the rollup. `run()` is the entry point for
`make bench`."""

from __future__ import annotations

import argparse
import time

import psycopg
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.api.deps import get_now
from backend.cli.serve import migrate
from backend.config import Settings
from benchmarks import peer_storage
from benchmarks.api_bench import NOW, _time, fill, scratch_database
from tests.support.db import libpq


def run(admin_url: str | None = None, *, pools: int = 20, days: int = 30, repeats: int = 10,
        keep: bool = False) -> dict[tuple[str, str], tuple[float, float]]:
    admin, name, url = scratch_database(admin_url, "specwatch_capbench")
    try:
        migrate(url)
        t0 = time.perf_counter()
        fill(url, pools=pools, days=days)
        print(f"filled {pools} pools x {days} days at 1-minute buckets in {time.perf_counter() - t0:.1f} s")
        app = create_app(Settings(_env_file=None, database_url=url, gpu_hour_price={"*": 2.0},
                                  pool_replicas={"*": {"*": 1}}, anonymous_read=True))
        app.dependency_overrides[get_now] = lambda: NOW
        calls = {f"capacity model-0 window={w}": ("/api/v1/capacity", {"model": "model-0", "window": w})
                 for w in ("1h", "7d", f"{days}d")}
        calls |= {f"capacity/fleet window={w}": ("/api/v1/capacity/fleet", {"window": w}) for w in ("1h", "24h", "7d")}
        results = {}
        for state in ("dirty", "rolled up"):
            if state == "rolled up":
                t0 = time.perf_counter()
                hours = peer_storage.rollup(url)
                print(f"rolled up {hours:,} pool-hours in {time.perf_counter() - t0:.1f} s")
            with TestClient(app) as client:
                for label, (path, params) in calls.items():
                    def call(path=path, params=params):
                        client.get(path, params=params).raise_for_status()
                    results[(state, label)] = p50, p95 = _time(call, repeats)
                    print(f"{state:9s}  {label:35s} p50 {p50 * 1000:8.1f} ms   p95 {p95 * 1000:8.1f} ms")
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
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args(argv)
    run(a.admin_url, pools=a.pools, days=a.days, repeats=a.repeats, keep=a.keep)


if __name__ == "__main__":
    main()
