"""The simulator's per-request records: one pool serving two classes, consistent with its own counters."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from backend.sim.fleet import FleetSim
from backend.sim.fleet_state import drift_factor
from backend.sim.scenario import ScenarioError, load_scenario
from backend.sim.server import Simulator, request_record
from tests.support.per_request_sim import shared_pool

# 8 running requests, then none admitted after 60 s: the last ones drain
TWO_CLASSES = shared_pool("two-classes-one-pool", concurrency={"points": [[0, 8], [60, 0]], "interp": "step"},
                          output_len={"mean": 60, "sigma": 0.5, "max": 300}, per_request={"classes": [
                              {"name": "chat", "share": 0.7, "acceptance": {"mode": "iid", "a": 0.8}},
                              {"name": "code", "share": 0.3, "acceptance": {"mode": "iid", "a": 0.3}}]})


def _scenario(**per_request) -> dict:
    sc = copy.deepcopy(TWO_CLASSES)
    sc["pools"][0]["per_request"].update(per_request)
    return sc


def _counters(sim: FleetSim) -> dict:
    lay, eng = sim.pools[0].layout, sim.states[0].engines[0]
    return {"drafts": eng.cum[lay.drafts], "draft_tokens": eng.cum[lay.draft_tokens],
            "accepted": eng.cum[lay.accepted], "per_pos": eng.cum[lay.per_pos].tolist(),
            "finished": eng.cum[lay.success].sum(), "generation": eng.cum[lay.generation]}


def test_records_add_up_to_the_engine_counters_exactly() -> None:
    sim = FleetSim(load_scenario(TWO_CLASSES), seed=5)
    sim.advance_to(int(200 / sim.tick))  # admissions stop at 60 s; everything has finished by 200 s
    recs = sim.take_requests()
    c = _counters(sim)
    assert len(recs) == c["finished"] > 50
    hists = np.array([r["histogram"] for r in recs])
    steps = hists.sum(axis=1)
    accepted = hists @ np.arange(4)
    assert steps.sum() == c["drafts"] and 3 * steps.sum() == c["draft_tokens"] and accepted.sum() == c["accepted"]
    per_pos = [int(hists[:, i + 1:].sum()) for i in range(3)]
    assert per_pos == c["per_pos"]
    assert sum(r["output_tokens"] for r in recs) == c["generation"]
    # the two classes really differ, each near its own acceptance
    by = {name: [r for r in recs if r["traffic_class"] == name] for name in ("chat", "code")}
    rate = {name: sum(np.dot(r["histogram"], range(4)) for r in rs) / (3 * sum(sum(r["histogram"]) for r in rs))
            for name, rs in by.items()}
    assert rate["chat"] > 0.55 > rate["code"]
    assert len({r["request_id"] for r in recs}) == len(recs)


def test_records_are_deterministic_and_replays_emit_nothing() -> None:
    a, b = FleetSim(load_scenario(TWO_CLASSES), seed=5), FleetSim(load_scenario(TWO_CLASSES), seed=5)
    a.advance_to(300)
    b.advance_to(150)
    first = b.take_requests()
    b.state_at(100)  # replaying history for /truth must not emit again
    b.advance_to(300)
    assert first + b.take_requests() == a.take_requests()


def test_report_share_withholds_some() -> None:
    sim = Simulator(_scenario(report_share=0.5), seed=5, clock=lambda: 1_000_000.0 + 120, start=1_000_000.0)
    reported = sim.request_records()
    assert reported and all(r["finish_time"] > 1_000_000.0 for r in reported)
    sim2 = Simulator(_scenario(report_share=0.5), seed=5, clock=lambda: 1_000_000.0 + 120, start=1_000_000.0)
    everything = sim2.request_records(include_withheld=True)
    assert 0.3 < len(reported) / len(everything) < 0.7


def test_scenario_validation() -> None:
    bad = _scenario()
    bad["pools"][0]["per_request"]["classes"][1]["name"] = "chat"
    with pytest.raises(ScenarioError, match="unique"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match="report_share"):
        load_scenario(_scenario(report_share=1.5))


DRIFT = {
    "name": "context-drift",
    "tick": 0.1,
    "pools": [{
        "id": "shared", "model": "m1", "traffic_class": "default", "spec_mode": "eagle3", "k": 3,
        "acceptance": {"mode": "iid", "a": 0.7}, "concurrency": 16,
        "output_len": {"mean": 60, "sigma": 0.5, "max": 300},
        "prompt_len": {"mean": 500, "sigma": 0.0, "max": 500},
        "per_request": {"classes": [
            {"name": "chat", "share": 0.5, "acceptance": {"mode": "iid", "a": 0.8}},
            {"name": "code", "share": 0.5, "acceptance": {"mode": "iid", "a": 0.8},
             "prompt_len": {"mean": 30000, "sigma": 1.0, "max": 300000},
             "context_drift": {"from": 8192, "per_doubling": 0.25}}]},
    }],
}


def test_records_carry_prompt_tokens_from_their_class() -> None:
    sim = FleetSim(load_scenario(DRIFT), seed=2)
    sim.advance_to(int(60 / sim.tick))
    recs = sim.take_requests()
    chat = [r for r in recs if r["traffic_class"] == "chat"]
    code = [r for r in recs if r["traffic_class"] == "code"]
    assert chat and code
    assert {r["prompt_tokens"] for r in chat} == {500}  # the pool's prompt_len (no spread)
    assert max(r["prompt_tokens"] for r in code) > 65536 and min(r["prompt_tokens"] for r in code) < 8192
    assert all(1 <= r["prompt_tokens"] <= 300000 for r in code)
    rec = request_record(code[0], 1.0)
    assert rec["prompt_tokens"] == code[0]["prompt_tokens"]


def test_context_drift_lowers_alpha_with_prompt_length() -> None:
    sim = FleetSim(load_scenario(DRIFT), seed=4)
    sim.advance_to(int(120 / sim.tick))
    recs = [r for r in sim.take_requests() if r["traffic_class"] == "code" and sum(r["histogram"])]

    def alpha(rs):  # pooled: accepted / drafted over the requests
        return sum(sum(j * h for j, h in enumerate(r["histogram"])) for r in rs) / sum(3 * sum(r["histogram"]) for r in rs)
    short = [r for r in recs if r["prompt_tokens"] <= 8192]
    long_ = [r for r in recs if r["prompt_tokens"] >= 65536]  # p_i scaled by at most 1 - 0.25 * 3 = 0.25
    assert len(short) > 30 and len(long_) > 30
    # iid a = 0.8, K = 3: alpha = (a + a^2 + a^3) / 3 = 0.6507 unscaled; at factor <= 0.25, a <= 0.2: <= 0.08
    assert alpha(short) == pytest.approx((0.8 + 0.64 + 0.512) / 3, abs=0.05)
    assert alpha(long_) < 0.1


def test_drift_factor_and_its_errors() -> None:
    code = load_scenario(DRIFT).pools[0].per_request.classes[1]
    assert drift_factor(code, np.array([100, 8192, 16384, 32768, 10**6])).tolist() == [1.0, 1.0, 0.75, 0.5, 0.0]
    bad = copy.deepcopy(DRIFT)
    bad["pools"][0]["per_request"]["classes"][1]["context_drift"] = {"from": 8192, "per_doubling": 1.5}
    with pytest.raises(ScenarioError, match=r"classes\[1\].context_drift.per_doubling"):
        load_scenario(bad)
    bad["pools"][0]["per_request"]["classes"][1]["context_drift"] = {"from": 8192}
    with pytest.raises(ScenarioError, match="per_doubling"):
        load_scenario(bad)
