"""Summary numbers on simulator data: acceptance, tau and per-position equal the simulator's exact truth;
P99 equals Prometheus's own histogram_quantile over the same buckets."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

import pytest

from backend.config import Settings
from backend.prom.client import PromClient
from backend.services.collect import run_prometheus
from backend.services.history import seed_history
from backend.sim.server import Simulator, start_in_thread
from tests.support.auth import get_over
from tests.support.clock import FakeClock
from tests.support.stack import factory_for

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_summary_equals_truth_from_the_simulator(fresh_db_url):
    s = Settings(_env_file=None, database_url=fresh_db_url, bucket_seconds=60, stale_after_seconds=10**9)
    end = 1_796_040_000
    # a 1 s simulator tick (the scenario's is 0.1 s): the same 20 buckets through the same scrape -> assemble
    # -> ingest path, a tenth of the simulation work (the tick shapes the traffic, not what is compared)
    seed_history(factory_for(fresh_db_url), s, scenario="steady", seconds=1200, end=end, seed=3, tick=1.0)
    start = end - 1200
    # an independent simulator with the same seed and tick is the ground truth at the same instants
    sim = Simulator("steady", seed=3, clock=FakeClock(end), tick=1.0, history_seconds=1300, start=start - 15)
    t0, t1 = ({p["traffic_class"] + "/" + p["spec_mode"]: p for p in sim.truth(at=t)["pools"]} for t in (start, end))

    body = get_over(s, "summary", MODEL, start, end)
    rows = {r["traffic_class"]: r for r in body["classes"]}
    assert set(rows) == {"chat", "code", "mixed"}
    mix = {"A": 0.0, "D": 0.0, "N": 0.0}
    for cls in ("chat", "code"):
        a, b = t0[f"{cls}/eagle3"]["counters"], t1[f"{cls}/eagle3"]["counters"]
        A = b["accepted_tokens"] - a["accepted_tokens"]
        D = b["draft_tokens"] - a["draft_tokens"]
        N = b["drafts"] - a["drafts"]
        P = [y - x for x, y in zip(a["accepted_per_pos"], b["accepted_per_pos"])]
        mix["A"] += A
        mix["D"] += D
        mix["N"] += N
        r = rows[cls]
        assert r["acceptance_rate"] == pytest.approx(A / D, rel=1e-12)
        assert r["mean_acceptance_length"] == pytest.approx(1 + A / N, rel=1e-12)
        assert r["per_position_unconditional"] == pytest.approx([p / N for p in P], rel=1e-12)
        prev = [N, *P[:-1]]
        assert r["per_position_conditional"] == pytest.approx([p / q for p, q in zip(P, prev)], rel=1e-12)
        assert r["volume"]["drafts"] == pytest.approx(N, rel=1e-12)
    # the mix pools the counters (never a mean of the class rates)
    assert rows["mixed"]["acceptance_rate"] == pytest.approx(mix["A"] / mix["D"], rel=1e-12)
    assert rows["mixed"]["mean_acceptance_length"] == pytest.approx(1 + mix["A"] / mix["N"], rel=1e-12)
    assert abs(rows["mixed"]["acceptance_rate"]
               - (rows["chat"]["acceptance_rate"] + rows["code"]["acceptance_rate"]) / 2) > 1e-3


@pytest.mark.prometheus
def test_p99_equals_prometheus_histogram_quantile_over_the_same_buckets(prometheus_factory, fresh_db_url):
    width = 5
    sim = start_in_thread("steady", seed=21)
    try:
        prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
        prom.wait_for_samples("vllm:inter_token_latency_seconds_count", min_series=4)
        time.sleep(8 * width)
        # the buckets as Prometheus' increase() has them, so that its histogram_quantile reads the same ones
        s = Settings(_env_file=None, database_url=fresh_db_url, prometheus_url=prom.url, bucket_seconds=width,
                     settle_seconds=2, initial_lookback_seconds=60, stale_after_seconds=10**9,
                     prometheus_increases="increase")
        now = datetime.now(UTC)
        run_prometheus(factory_for(fresh_db_url), PromClient(prom.url), s, now=now)
    finally:
        sim.stop()
    end = int(now.timestamp() - 2) // width * width
    n = 6
    start = end - n * width
    body = get_over(s, "summary", MODEL, start, end, now=now)
    rows = {r["traffic_class"]: r for r in body["classes"]}
    checked = 0
    for cls in ("chat", "code"):
        for metric, family in (("itl", "vllm:inter_token_latency_seconds"),
                               ("tpot", "vllm:request_time_per_output_token_seconds")):
            for mode, side in (("eagle3", "spec"), ("off", "baseline")):
                ours = next(q for q in rows[cls][metric]["quantiles"] if q["q"] == 0.99)[side]["value"]
                # the same n buckets, summed in Prometheus: a subquery at the bucket step over (start, end]
                sel = f'{family}_bucket{{traffic_class="{cls}",spec_mode="{mode}"}}'
                promql = (f"histogram_quantile(0.99, sum by (le) (sum_over_time("
                          f"(sum by (le) (increase({sel}[{width}s])))[{n * width - 2}s:{width}s])))")
                res = prom.query(promql, at=end)
                theirs = float(res[0]["value"][1]) if res else math.nan
                if math.isnan(theirs):
                    assert ours is None
                else:
                    assert ours == pytest.approx(theirs, rel=1e-9), (cls, metric, mode, ours, theirs)
                    checked += 1
    assert checked >= 6
