"""/fleet at 5,000 pools: latency of one page (server-side filtering, sorting and paging) over HTTP.

    python -m benchmarks.fleet_page_bench [--admin-url URL] [--pools 5000] [--repeats 30] [--keep]

Creates a throwaway database (migrated by alembic) with `--pools` speculative pools (models of 4 traffic
classes each, so 5,000 pools are 1,250 models and 6,250 overview rows with the `mixed` rows), stores the
1 h window's fleet snapshot for them as the beat task would (the rows are synthesised with the real
response model: acceptance, margins, verdicts, states and a 48-point sparkline each; computing them is the
snapshot task's cost, measured by the fleet-scale benches, not this one), starts the real API as a child
process and prints p50/p95 of GET /api/v1/fleet for a first page, a sorted page, a deep page, a text
filter and a state filter, against the target of 300 ms per page, each computed (an API with the response
cache off, so every request filters, sorts and pages), with the p95 of the same URL answered from the cache
(an API as deployed) beside it; and the unpaged answer (every row) for comparison. `run()` is the entry
point for `make bench`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

from backend.cli.serve import migrate
from benchmarks import common
from tests.dashboard.seeding import seed_large_fleet
from tests.support.procs import Proc, free_port, wait_for_http
from tests.support.stack import env_for

TARGET_SECONDS = 0.3
CLASSES = ("chat", "code", "rag", "summarize")
WINDOW = 3600
STATES = ("healthy", "healthy", "healthy", "below-threshold", "negative-margin", "stale", "low-volume", "no-data")
VERDICTS = ("better", "worse", "no-significant-change", "unresolved", "inconclusive", None)
ROOT = Path(__file__).resolve().parents[1]


def run(admin_url: str | None = None, *, pools: int = 5000, repeats: int = 30,
        keep: bool = False) -> dict[str, tuple[float, float]]:
    results: dict[str, tuple[float, float]] = {}
    with common.scratch(admin_url, "specwatch_fleetbench", keep=keep) as url:
        migrate(url)
        now = datetime.now(UTC).replace(microsecond=0)
        body = seed_large_fleet(url, pools, now)
        n_rows = body.count(b'"model_name"')
        print(f"{pools:,} pools, {n_rows:,} overview rows; stored 1 h snapshot {len(body) / 1e6:.1f} MB")
        cases = {
            "first page (limit 100)": {"offset": 0, "limit": 100},
            "sorted by margin desc": {"sort": "-margin", "limit": 100},
            "sorted by state, deep page": {"sort": "state", "offset": n_rows - 150, "limit": 100},
            "text filter q=model-12": {"q": "model-12", "sort": "model_name", "limit": 100},
            "state filter below-threshold": {"state": "below-threshold", "sort": "acceptance_rate", "limit": 100},
            "unpaged (every row, as before)": {},
        }
        with tempfile.TemporaryDirectory(prefix="specwatch-fleetbench-") as logs:
            # the stored snapshot stays the one served for the whole run (the beat task is not running here).
            # Two API processes: one with the response cache off, so every request filters, sorts and pages
            # (what the target is about: a page nobody asked for yet), and one as deployed, whose repeats of
            # one URL are answered from the cache
            apis, bases = [], {}
            try:
                for kind, extra in (("computed", {"api_cache_entries": 0}), ("cached", {})):
                    port = free_port()
                    # reads open (SPECWATCH_ANONYMOUS_READ): the figure is the page's cost, not a token lookup
                    env = env_for({"database_url": url, "fleet_snapshot_max_age_seconds": 86400, "anonymous_read": True,
                                   **extra})
                    api = Proc(f"api-{kind}", [sys.executable, "-m", "backend.cli", "api", "--host", "127.0.0.1",
                                               "--port", str(port)], Path(logs) / f"api-{kind}.log", env=env,
                               cwd=ROOT).start()
                    apis.append(api)
                    bases[kind] = f"http://127.0.0.1:{port}"
                    wait_for_http(f"{bases[kind]}/api/v1/health", proc=api)
                print(f"target: a page of /fleet p95 <= {TARGET_SECONDS * 1000:.0f} ms (window=1h from the snapshot), "
                      "computed for every request (response cache off); cached: the same URL again, cache on")
                clients = {k: httpx.Client(base_url=b, timeout=60) for k, b in bases.items()}
                try:
                    for label, params in cases.items():
                        def call(kind: str, params=params):
                            r = clients[kind].get("/api/v1/fleet", params={"window": "1h", **params})
                            r.raise_for_status()
                            return r
                        timed: dict[str, list[float]] = {}
                        for kind in clients:
                            size = len(call(kind).content)  # warm-up (the process's parse of the snapshot)
                            timed[kind] = []
                            for _ in range(repeats):
                                t0 = time.perf_counter()
                                call(kind)
                                timed[kind].append(time.perf_counter() - t0)
                        results[label] = p50, p95 = common.p50_p95(timed["computed"])
                        cached = common.p50_p95(timed["cached"])[1]
                        paged = bool(params)
                        verdict = ("met" if p95 <= TARGET_SECONDS else "MISSED") if paged else "(not a page)"
                        print(f"{label:34s} p50 {p50 * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   "
                              f"{size / 1e3:8.1f} kB   cached p95 {cached * 1000:6.1f} ms   {verdict}")
                finally:
                    for c in clients.values():
                        c.close()
            finally:
                for api in apis:
                    api.stop()
        return results


def main(argv: list[str] | None = None) -> None:
    a = common.parser(__doc__, keep=True, pools=5000, repeats=30).parse_args(argv)
    run(a.admin_url, pools=a.pools, repeats=a.repeats, keep=a.keep)


if __name__ == "__main__":
    main()
