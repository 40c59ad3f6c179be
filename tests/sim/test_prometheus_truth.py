"""A real Prometheus scrapes the simulator: PromQL's increase(accepted)/increase(draft_tokens) over a window
equals the simulator's /truth over the same window, per pool."""

from __future__ import annotations

import time

import pytest

from backend.sim.server import start_in_thread
from tests.support import sim as simtruth

pytestmark = pytest.mark.prometheus
WINDOW = 12


def test_promql_acceptance_equals_truth_per_pool(prometheus_factory):
    sim = start_in_thread("steady", seed=17)
    try:
        prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
        prom.wait_for_samples("vllm:spec_decode_num_drafts_total", min_series=2)
        time.sleep(WINDOW + 3)
        at = time.time() - 1
        ratio = prom.query(
            f"sum by (traffic_class, spec_mode) (increase(vllm:spec_decode_num_accepted_tokens_total[{WINDOW}s]))"
            f" / sum by (traffic_class, spec_mode) (increase(vllm:spec_decode_num_draft_tokens_total[{WINDOW}s]))",
            at=at)
        raw = prom.query(f"vllm:spec_decode_num_accepted_tokens_total[{WINDOW}s]", at=at)
        assert len(ratio) == 2 and len(raw) == 2
        # a scrape is stamped when Prometheus starts it and the simulator renders within the scrape's own
        # duration, which Prometheus records beside it (longer on a busy machine, whatever it is)
        [durations] = prom.query(f"scrape_duration_seconds[{WINDOW}s]", at=at)
        took = {float(t): float(v) for t, v in durations["values"]}
        for series in raw:
            labels = series["metric"]
            pool = (labels["model_name"], labels["traffic_class"], labels["spec_mode"])
            samples = [(float(t), float(v)) for t, v in series["values"]]
            assert len(samples) >= WINDOW // 2
            # every scraped value is the simulator's exact counter at an instant within its scrape
            for t, v in samples:
                lo = simtruth.truth(sim.url, t)[pool]["counters"]["accepted_tokens"]
                hi = simtruth.truth(sim.url, t + took[t])[pool]["counters"]["accepted_tokens"]
                assert lo <= v <= hi, (t, took[t], lo, v, hi)
            # and PromQL's ratio is the truth's ratio between the first and last sample of the window
            (t0, _), (t1, _) = samples[0], samples[-1]
            a = simtruth.true_increase(sim.url, t0, t1, "accepted_tokens")[pool]
            d = simtruth.true_increase(sim.url, t0, t1, "draft_tokens")[pool]
            promql = next(float(r["value"][1]) for r in ratio
                          if (r["metric"]["traffic_class"], r["metric"]["spec_mode"]) == pool[1:])
            assert promql == pytest.approx(a / d, abs=2e-3)
            expected_r = {"chat": 0.70, "code": 0.40}[pool[1]]
            assert abs(promql - expected_r) < 0.05
    finally:
        sim.stop()
