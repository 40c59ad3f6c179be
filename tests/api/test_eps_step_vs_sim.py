"""eps_step on simulator data (the scrape path, real Postgres): the simulator makes a speculative engine step
(1 + eps0 + slope x R) times a plain one at R running requests, and vLLM's ITL is observed once per engine
step, so the mean ITL ratio in the band recovers that overhead; the estimate tau / (1 + eps_step) is an
independent number, not the measured speedup read back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.api.deps import get_now
from backend.config import Settings
from backend.services.history import seed_history
from tests.support.auth import bearer, make_token
from tests.support.stack import factory_for

MODEL = "acme-8b"
END = 1_796_040_000
SECONDS = 1800
R = 4  # running requests on both pools, all the time
SCENARIO = {
    "tick": 1.0,
    "defaults": {"model": MODEL, "step_time": {"base": 0.007, "per_seq": 0.00012},
                 "overhead": {"eps0": 0.35, "slope": 0.01}, "concurrency": {"points": [[0, R]], "interp": "step"}},
    "pools": [{"id": "chat-eagle3", "traffic_class": "chat", "spec_mode": "eagle3", "k": 3,
               "acceptance": {"mode": "rate", "r": 0.7}},
              {"id": "chat-off", "traffic_class": "chat", "spec_mode": "off"}],
}


def test_eps_step_recovers_the_simulated_step_overhead(fresh_db_url):
    s = Settings(_env_file=None, database_url=fresh_db_url, bucket_seconds=60, stale_after_seconds=10**9)
    seed_history(factory_for(fresh_db_url), s, scenario=SCENARIO, seconds=SECONDS, end=END, seed=5, tick=1.0)
    app = create_app(s)
    app.dependency_overrides[get_now] = lambda: datetime.fromtimestamp(END, UTC)
    with TestClient(app, headers=bearer(make_token(s.database_url))) as client:
        body = client.get("/api/v1/summary", params={
            "model": MODEL, "start": datetime.fromtimestamp(END - SECONDS, UTC).isoformat(),
            "end": datetime.fromtimestamp(END, UTC).isoformat()}).raise_for_status().json()
    chat = next(c for c in body["classes"] if c["traffic_class"] == "chat")
    assert chat["concurrency_band"] == "1-8" and chat["eps_step_source"] == "measured"
    # the simulator's step overhead at R = 4: 0.35 + 0.01 x 4 = 0.39 (step times are lognormal around it)
    assert chat["eps_step"] == pytest.approx(0.39, abs=0.03)
    assert chat["break_even_alpha"] == pytest.approx(chat["eps_step"] / 3)
    tau = chat["mean_acceptance_length"]
    assert chat["estimated_speedup"] == pytest.approx(tau / (1 + chat["eps_step"]))
    assert chat["eps_effective"] == pytest.approx(tau / chat["measured_speedup"] - 1)
    check = chat["speedup_check"]
    assert check["estimated"] == pytest.approx(chat["estimated_speedup"])
    assert check["measured"] == pytest.approx(chat["measured_speedup"])
    # steady traffic: the two agree to about a percent (the mean of per-request TPOTs sits slightly above the
    # step time over the mean tau), inside the 3 % tolerance
    assert check["bins"] >= 4 and check["ratio"] == pytest.approx(1.0, abs=0.03) and check["verdict"] == "agree"
    assert check["ratio_low"] <= check["ratio"] <= check["ratio_high"]
