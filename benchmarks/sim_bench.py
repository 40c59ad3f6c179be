"""The simulator at the reference fleet size: 400 pools at a 1 s tick must keep up with real time on one
core, and one /metrics render must fit well inside a scrape timeout.

    python -m benchmarks.sim_bench [--pools 400] [--ticks 10]

Printed: ms of CPU-bound work per simulated tick (target: under the tick, 1000 ms) and seconds to render
the whole fleet's exposition (target: under 5 s), each the best of three runs, and the exposition size.
Correctness at this size (every pool advances and is exposed) is tests/sim/test_big_fleet.py."""

from __future__ import annotations

import argparse
import time

from backend.sim.exposition import render
from backend.sim.fleet import FleetSim
from tests.sim.test_big_fleet import big_fleet

TICK_TARGET_S = 1.0  # real time at a 1 s tick
RENDER_TARGET_S = 5.0


def measure(pools: int, ticks: int, repeats: int = 3) -> dict:
    per_tick, render_s, size = [], [], 0
    for r in range(repeats):
        fleet = FleetSim(big_fleet(pools, 1.0), seed=r)
        fleet.advance_to(2)  # warm up
        t0 = time.perf_counter()
        fleet.advance_to(2 + ticks)
        per_tick.append((time.perf_counter() - t0) / ticks)
        t0 = time.perf_counter()
        body = render(fleet.pools, fleet.states, created_wall=[0.0] * pools)
        render_s.append(time.perf_counter() - t0)
        size = len(body)
    return {"pools": pools, "tick_s": min(per_tick), "render_s": min(render_s), "mb": size / 1e6}


def run(pools: int = 400, ticks: int = 10) -> dict:
    r = measure(pools, ticks)
    tick_ok = "met" if r["tick_s"] < TICK_TARGET_S else "MISSED"
    render_ok = "met" if r["render_s"] < RENDER_TARGET_S else "MISSED"
    print(f"{'pools':>6} {'ms/tick':>8} {'target':>7} {'':>6} {'render s':>9} {'target':>7} {'':>6} {'MB':>5}")
    print(f"{r['pools']:>6} {r['tick_s'] * 1000:>8.0f} {TICK_TARGET_S * 1000:>7.0f} {tick_ok:>6} "
          f"{r['render_s']:>9.2f} {RENDER_TARGET_S:>7.1f} {render_ok:>6} {r['mb']:>5.1f}")
    return r


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", type=int, default=400)
    ap.add_argument("--ticks", type=int, default=10)
    args = ap.parse_args(argv)
    run(args.pools, args.ticks)


if __name__ == "__main__":
    main()
