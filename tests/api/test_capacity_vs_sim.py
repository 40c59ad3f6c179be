"""Capacity on simulator data (the scrape path, real Postgres): output tokens equal the simulator's exact
truth, and where the verify cost grows with the batch (eps = eps0 + slope x R) speculation pays at 4 running
requests and stops paying at 200, the band the API states."""

from __future__ import annotations

import pytest

from backend.config import Settings
from backend.services.history import seed_history
from backend.sim.server import Simulator
from tests.support.auth import get_over
from tests.support.clock import FakeClock
from tests.support.stack import factory_for

MODEL = "acme-8b"
END = 1_796_040_000
SECONDS = 1800
# both pools: 4 running requests for the first 900 s of simulated time, then 200 (a step)
CONCURRENCY = {"points": [[0, 4], [900, 200]], "interp": "step"}
SCENARIO = {
    "tick": 1.0,
    "defaults": {"model": MODEL, "step_time": {"base": 0.007, "per_seq": 0.00012},
                 "overhead": {"eps0": 0.35, "slope": 0.01}, "concurrency": CONCURRENCY},
    "pools": [{"id": "chat-eagle3", "traffic_class": "chat", "spec_mode": "eagle3", "k": 3,
               "acceptance": {"mode": "rate", "r": 0.7}},
              {"id": "chat-off", "traffic_class": "chat", "spec_mode": "off"}],
}


def test_capacity_on_simulated_traffic(fresh_db_url):
    s = Settings(_env_file=None, database_url=fresh_db_url, bucket_seconds=60, stale_after_seconds=10**9,
                 gpu_hour_price={MODEL: 2.0}, pool_replicas={MODEL: {"*": 1}})
    seed_history(factory_for(fresh_db_url), s, scenario=SCENARIO, seconds=SECONDS, end=END, seed=5, tick=1.0)
    start = END - SECONDS
    sim = Simulator(SCENARIO, seed=5, clock=FakeClock(END), tick=1.0, history_seconds=SECONDS + 100,
                    start=start - 15)
    truth = [{p["spec_mode"]: p["counters"] for p in sim.truth(at=t)["pools"]} for t in (start, END)]

    body = get_over(s, "capacity", MODEL, start, END)
    (chat,) = body["classes"]
    for side, mode in (("spec", "eagle3"), ("baseline", "off")):
        tokens = truth[1][mode]["generation_tokens"] - truth[0][mode]["generation_tokens"]
        assert chat[side]["tokens"] == pytest.approx(tokens, rel=1e-12)  # counters summed exactly
        assert chat[side]["throughput"] == pytest.approx(tokens / SECONDS, rel=1e-12)
        assert chat[side]["per_replica"] == pytest.approx(tokens / SECONDS, rel=1e-12)  # one replica
    bands = {b["band"]: b for b in chat["bands"]}
    low, high = bands["1-8"], bands[">128"]
    # per running request the ratio is the per-sequence speedup tau / (1 + eps0 + slope R):
    # 3.1 / 1.39 = 2.23 at R = 4, 3.1 / 3.35 = 0.93 at R = 200 (tau = 1 + K r = 3.1 in expectation)
    assert low["ratio_per_request"] == pytest.approx(3.1 / 1.39, rel=0.1)
    assert high["ratio_per_request"] == pytest.approx(3.1 / 3.35, rel=0.1)
    assert low["pays"] == "yes" and low["saved_in_window"] > 0
    assert high["ratio_per_replica"] < 1 and high["saved_in_window"] < 0
    assert chat["stops_paying_band"] == ">128"
    assert high["pays"] in ("no", "uncertain") and chat["stops_paying_significant"] is (high["pays"] == "no")
    m = chat["money"]
    assert m["saved_in_window"] == pytest.approx(sum(b["saved_in_window"] for b in chat["bands"] if b["saved_in_window"] is not None))
    assert m["saved_in_window_low"] <= m["saved_in_window"] <= m["saved_in_window_high"]
    assert m["per_week_at_window_rate"] == pytest.approx(m["saved_in_window"] * 7 * 86400 / SECONDS)
