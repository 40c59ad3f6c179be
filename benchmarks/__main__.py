"""`make bench`: every benchmark, one after the other, each printing its own table.

    python -m benchmarks [sim] [collect] [api] [capacity] [load] [ingest] [replicas] [dashboard] [periodic]      (default: all)
    python -m benchmarks periodic --pools 100,1000 --quick       (options go to the one suite named)

Speed and memory targets live here, never in timed tests."""

from __future__ import annotations

import importlib
import sys
import time

SUITES = {
    "sim": ("benchmarks.sim_bench", "simulator at 400 pools: ms per 1 s tick (target < 1000) and /metrics render"),
    "collect": ("benchmarks.collect_bench", "collection at scale: requests per cycle, cycle time, rows/s vs COPY"),
    "api": ("benchmarks.api_bench", "API over 30 days x 20 pools: summary / acceptance / fleet p50 and p95"),
    "capacity": ("benchmarks.capacity_bench", "capacity and money over 30 days x 20 pools: /capacity, /capacity/fleet"),
    "load": ("benchmarks.load_bench", "API under load: 64 clients x 30 s on /fleet and /summary, req/s, p50/p99"),
    "ingest": ("benchmarks.ingest_bench", "per-request ingest: records/s into Postgres in batches of 1,000"),
    "replicas": ("benchmarks.replica_bench", "storage per pool-day with 8 replicas per pool vs the pool rows (limit 2x)"),
    "dashboard": ("benchmarks.dashboard_bench", "dashboard in headless Chromium over 90 days x 100 pools"),
    "periodic": ("benchmarks.periodic_bench", "every periodic task at 100 / 1,000 / 5,000 pools: CPU s per minute"),
}


def main(argv: list[str]) -> int:
    options = argv[next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv)):]
    wanted = argv[:len(argv) - len(options)] or list(SUITES)
    if options and len(wanted) != 1:
        print("options (--...) need exactly one benchmark named before them", file=sys.stderr)
        return 2
    unknown = [w for w in wanted if w not in SUITES]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(SUITES)}", file=sys.stderr)
        return 2
    for name in wanted:
        module, title = SUITES[name]
        print(f"\n== {name}: {title}")
        started = time.perf_counter()
        suite = importlib.import_module(module)
        suite.run(options) if options else suite.run()
        print(f"({name} took {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
