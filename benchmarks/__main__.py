"""`make bench`: every benchmark, one after the other, each printing its own table.

    python -m benchmarks [sim] [collect] [api] [capacity] [load] [ingest] [replicas] [dashboard] [periodic] [scrape] [fleet-page]
    python -m benchmarks periodic --pools 100,1000 --quick scrape --targets 1000   (options after a name go to it)

Speed and memory targets live here, never in timed tests."""

from __future__ import annotations

import importlib
import sys
import time

SUITES = {  # name: what it measures; its module is benchmarks.<name>_bench (replicas: replica_bench)
    "sim": "simulator at 400 pools: ms per 1 s tick (target < 1000) and /metrics render",
    "collect": "collection at scale: requests per cycle, cycle time, rows/s vs COPY",
    "api": "API over 30 days x 20 pools: summary / acceptance / fleet p50 and p95",
    "capacity": "capacity and money over 30 days x 20 pools: /capacity, /capacity/fleet",
    "load": "API under load: 64 clients x 30 s on /fleet and /summary, req/s, p50/p99",
    "ingest": "per-request ingest: records/s into Postgres in batches of 1,000",
    "replicas": "storage per pool-day with 8 replicas per pool vs the pool rows (limit 2x)",
    "dashboard": "dashboard in headless Chromium over 90 days x 100 pools",
    "periodic": "every periodic task at 100 / 1,000 / 5,000 pools: CPU s per minute",
    "scrape": "direct scrape of 1,000 targets on one worker vs the 15 s interval",
    "fleet-page": "/fleet at 5,000 pools: one page (filter, sort, offset) p50/p95",
}


def main(argv: list[str]) -> int:
    options: dict[str, list[str]] = {}  # a benchmark's own options follow its name
    wanted: list[str] = []
    for i, arg in enumerate(argv):
        if wanted and (arg not in SUITES or argv[i - 1].startswith("-")):
            options[wanted[-1]].append(arg)
        else:
            wanted.append(arg)
            options[arg] = []
    wanted = wanted or list(SUITES)
    unknown = [w for w in wanted if w not in SUITES]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; choose from {', '.join(SUITES)}", file=sys.stderr)
        return 2
    for name in wanted:
        print(f"\n== {name}: {SUITES[name]}")
        started = time.perf_counter()
        mod = importlib.import_module(f"benchmarks.{name.replace('-', '_').removesuffix('s')}_bench")
        if options.get(name):
            cli = getattr(mod, "main", None) or mod.run  # main(argv) parses a benchmark's own options
            cli(options[name])
        else:
            mod.run()
        print(f"({name} took {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
