"""Simulator mechanics on real values: invariants, determinism, restarts, drift, collapse, calibration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from backend.sim.fleet_state import accepted_length_probs
from backend.sim.scenario import load_scenario, parse_scenario
from backend.sim.server import Simulator, TruthUnavailable
from tests.sim.conftest import START, FakeClock


def check_counter_invariants(c: dict, k: int | None, where: str) -> None:
    """vllm-metrics.md §1.1 and §5, on cumulative values or on increases over an interval."""
    for name in ("itl", "tpot", "ttft", "e2e"):
        h = c[name]
        assert all(b2 >= b1 for b1, b2 in itertools.pairwise(h["buckets"])), (where, name)
        assert h["count"] == h["buckets"][-1], (where, name)
        assert h["sum"] >= 0 and h["buckets"][0] >= 0, (where, name)
    assert c["tpot"]["count"] == c["e2e"]["count"] == c["finished_requests"], where
    if k is None:
        assert c["drafts"] is None and c["accepted_per_pos"] is None, where
        return
    pp = c["accepted_per_pos"]
    assert len(pp) == k, where
    assert all(b <= a for a, b in itertools.pairwise(pp)), (where, pp)
    assert sum(pp) == c["accepted_tokens"], where
    assert 0 <= pp[-1] and pp[0] <= c["drafts"], where
    assert c["accepted_tokens"] <= c["draft_tokens"] == c["drafts"] * k, where
    # ITL is one sample per engine step per request: = drafts (no no-draft outputs in these scenarios)
    assert c["itl"]["count"] == c["drafts"], where


def diff(a: dict, b: dict) -> dict:
    """b - a for a counters dict (histograms included)."""
    out: dict = {}
    for key, va in a.items():
        vb = b[key]
        if va is None:
            out[key] = None
        elif isinstance(va, dict) and "buckets" in va:
            out[key] = {"bounds": va["bounds"], "buckets": [y - x for x, y in zip(va["buckets"], vb["buckets"])],
                        "sum": vb["sum"] - va["sum"], "count": vb["count"] - va["count"]}
        elif isinstance(va, dict):
            out[key] = {kk: vb[kk] - vv for kk, vv in va.items()}
        elif isinstance(va, list):
            out[key] = [y - x for x, y in zip(va, vb)]
        else:
            out[key] = vb - va
    return out


def pools_by_id(truth: dict) -> dict[str, dict]:
    return {p["pool_id"]: p for p in truth["pools"]}


def rate(c: dict) -> float:
    return c["accepted_tokens"] / c["draft_tokens"]


def conditional(c: dict) -> list[float]:
    prev = [c["drafts"], *c["accepted_per_pos"][:-1]]
    return [x / y for x, y in zip(c["accepted_per_pos"], prev)]


@pytest.mark.parametrize("name", ["steady", "drift", "restart", "long-context"])
def test_invariants_every_instant_and_interval(name: str) -> None:
    clock = FakeClock()
    sim = Simulator(name, seed=11, clock=clock, tick=0.25)
    prev = None
    for step in (0.0, 0.25, 1.0, 7.3, 30.0, 60.0, 100.0, 45.0):
        clock.advance(step)
        truth = sim.truth()
        for p in truth["pools"]:
            k = p["k"]
            check_counter_invariants(p["counters"], k, f"{name}/{p['pool_id']}@{truth['sim_time']}")
            check_counter_invariants(p["cumulative_since_start"], k, f"{name}/{p['pool_id']} cum")
            for e in p["per_engine"]:
                check_counter_invariants(e["counters"], k, f"{name}/{p['pool_id']}/engine{e['engine']}")
            if k:
                c = p["counters"]
                # generation tokens count accepted drafts and the bonus token; ITL counts steps
                if c["drafts"] > 1000:
                    assert c["generation_tokens"] > 1.3 * c["itl"]["count"] or rate(c) < 0.1
            if prev is not None:
                before = pools_by_id(prev)[p["pool_id"]]
                inc = diff(before["cumulative_since_start"], p["cumulative_since_start"])
                check_counter_invariants(inc, k, f"{name}/{p['pool_id']} interval")
        prev = truth


def test_exposition_values_equal_truth() -> None:
    clock = FakeClock()
    sim = Simulator("restart", seed=5, clock=clock)
    clock.advance(47.3)
    text = sim.metrics().decode()
    truth = pools_by_id(sim.truth())
    got: dict[tuple, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name in ("vllm:spec_decode_num_drafts_total", "vllm:inter_token_latency_seconds_count",
                          "vllm:generation_tokens_total"):
                key = (s.name, s.labels["traffic_class"], s.labels["spec_mode"])
                got[key] = got.get(key, 0.0) + s.value
    for p in truth.values():
        c = p["counters"]
        assert got[("vllm:generation_tokens_total", p["traffic_class"], p["spec_mode"])] == c["generation_tokens"]
        assert got[("vllm:inter_token_latency_seconds_count", p["traffic_class"], p["spec_mode"])] == c["itl"]["count"]
        if p["k"]:
            assert got[("vllm:spec_decode_num_drafts_total", p["traffic_class"], p["spec_mode"])] == c["drafts"]


def test_same_seed_same_times_identical_exposition() -> None:
    a_clock, b_clock = FakeClock(), FakeClock()
    a = Simulator("steady", seed=7, clock=a_clock)
    b = Simulator("steady", seed=7, clock=b_clock)
    for step in (0.05, 3.0, 12.34):
        a_clock.advance(step)
        b_clock.advance(step)
        assert a.metrics() == b.metrics()
    c_clock = FakeClock()
    c = Simulator("steady", seed=8, clock=c_clock)
    c_clock.advance(15.39)
    assert c.metrics() != a.metrics()


def test_scrape_cadence_does_not_change_values() -> None:
    dense_clock, sparse_clock, once_clock = FakeClock(), FakeClock(), FakeClock()
    dense = Simulator("drift", seed=2, clock=dense_clock)
    sparse = Simulator("drift", seed=2, clock=sparse_clock)
    once = Simulator("drift", seed=2, clock=once_clock)
    for i in range(1, 201):  # every 0.1 s (each tick), up to 20 s
        dense_clock.t = START + i * 0.1
        dense.metrics()
    for step in (0.37, 5.01, 9.9, 3.72):  # irregular, off the tick grid, ending before 20 s
        sparse_clock.advance(step)
        sparse.metrics()
    sparse_clock.t = once_clock.t = START + 20.0
    assert dense.metrics() == sparse.metrics() == once.metrics()


def test_adding_a_pool_does_not_change_the_others() -> None:
    raw = load_scenario("steady").raw
    sc1 = parse_scenario(raw)
    extra = dict(raw, pools=[*raw["pools"], {"id": "extra", "traffic_class": "x", "spec_mode": "off",
                                              "concurrency": 3}])
    sc2 = parse_scenario(extra)
    c1, c2 = FakeClock(), FakeClock()
    s1, s2 = Simulator(sc1, seed=1, clock=c1), Simulator(sc2, seed=1, clock=c2)
    c1.advance(10)
    c2.advance(10)
    assert s1.metrics("code-eagle3") == s2.metrics("code-eagle3")


def test_truth_at_past_instant_is_exact() -> None:
    clock = FakeClock()
    sim = Simulator("restart", seed=4, clock=clock, history_seconds=200, tick=0.5)
    clock.advance(300)
    past = sim.truth(at=START + 123.45)
    fresh_clock = FakeClock()
    fresh = Simulator("restart", seed=4, clock=fresh_clock, tick=0.5)
    fresh_clock.advance(123.45)
    now = fresh.truth()
    assert past["ticks"] == now["ticks"]
    assert past["pools"] == now["pools"]
    # outside the history / in the future
    with pytest.raises(TruthUnavailable):
        sim.truth(at=START - 5)
    clock.advance(100)
    with pytest.raises(TruthUnavailable, match="older than the kept history"):
        sim.truth(at=START + 10)
    with pytest.raises(ValueError, match="future"):
        sim.truth(at=clock.t + 60)


def test_restart_resets_counters_and_changes_created() -> None:
    clock = FakeClock()
    sim = Simulator("restart", seed=9, clock=clock)
    clock.advance(119.9)
    before = pools_by_id(sim.truth())["chat-eagle3"]
    created_before = _created(sim.metrics("chat-eagle3").decode())
    clock.advance(0.1)  # t = 120 s: the restart
    at = pools_by_id(sim.truth())["chat-eagle3"]
    clock.advance(5.0)
    after = pools_by_id(sim.truth())["chat-eagle3"]
    created_after = _created(sim.metrics("chat-eagle3").decode())

    assert before["restarts"] == [] and before["created"] == START
    assert at["restarts"] == [pytest.approx(START + 120.0)]
    assert at["counters"]["drafts"] == 0 and at["counters"]["itl"]["count"] == 0
    assert 0 < after["counters"]["drafts"] < before["counters"]["drafts"]
    assert set(created_before) == {START}
    assert created_after == [pytest.approx(START + 120.0)] * len(created_after)
    assert len(created_after) == len(created_before) > 10  # every _created series changed
    # cumulative_since_start keeps going: before + what happened after the restart
    cb, ca = before["cumulative_since_start"], after["cumulative_since_start"]
    assert ca["drafts"] >= cb["drafts"] + after["counters"]["drafts"]
    assert ca["accepted_tokens"] >= cb["accepted_tokens"] + after["counters"]["accepted_tokens"]
    # the pool that does not restart is untouched
    assert pools_by_id(sim.truth())["chat-off"]["restarts"] == []
    # a second restart at 240 s, monotonic totals across both
    clock.advance(130)
    later = pools_by_id(sim.truth())["chat-eagle3"]
    assert later["restarts"] == [pytest.approx(START + 120.0), pytest.approx(START + 240.0)]
    assert later["created"] == pytest.approx(START + 240.0)
    assert later["cumulative_since_start"]["drafts"] > ca["drafts"]


def _created(text: str) -> list[float]:
    out = []
    for fam in text_string_to_metric_families(text):
        if fam.name.endswith("_created"):
            out.extend(s.value for s in fam.samples)
    return out


def _binomial_tolerance(p: tuple[float, ...], drafts: float, sigmas: float = 5.0) -> float:
    """Standard error of accepted/draft_tokens over `drafts` independent drafts, times `sigmas`."""
    k = len(p)
    probs = accepted_length_probs(p)
    j = np.arange(k + 1)
    var = float(probs @ j**2 - (probs @ j) ** 2)
    return sigmas * math.sqrt(var / drafts) / k


def test_steady_acceptance_rates() -> None:
    """chat ~ 0.70 (K=3), code ~ 0.40 (K=5). Each draft's accepted length is an independent draw, so the
    measured rate's standard error is sd(j)/(K*sqrt(N)); with N ~ 1e5 drafts that is ~0.001. We allow 5
    standard errors (one spurious failure in ~3.5 million runs), at least 0.005."""
    clock = FakeClock()
    sim = Simulator("steady", seed=21, clock=clock)
    clock.advance(120)
    truth = pools_by_id(sim.truth())
    for pool_id, target in (("chat-eagle3", 0.70), ("code-eagle3", 0.40)):
        c = truth[pool_id]["counters"]
        assert c["drafts"] > 50_000
        tol = max(0.005, _binomial_tolerance(tuple(truth[pool_id]["acceptance_conditional"]), c["drafts"]))
        assert rate(c) == pytest.approx(target, abs=tol), pool_id
    assert truth["chat-off"]["counters"]["drafts"] is None
    # spec pools emit more tokens per ITL sample (step) than baselines (exactly 1 per step there)
    off = truth["chat-off"]["counters"]
    assert off["generation_tokens"] == pytest.approx(off["itl"]["count"] + off["ttft"]["count"], abs=0) or \
        off["generation_tokens"] < off["itl"]["count"] + off["ttft"]["count"] + 1
    spec = truth["chat-eagle3"]["counters"]
    assert spec["generation_tokens"] / spec["itl"]["count"] > 2.5
    # spec step (ITL) is longer, per-token latency (TPOT) shorter than the baseline's
    itl = lambda c: c["itl"]["sum"] / c["itl"]["count"]
    tpot = lambda c: c["tpot"]["sum"] / c["tpot"]["count"]
    assert itl(spec) > itl(off) and tpot(spec) < tpot(off)


def test_drift_conditional_acceptance_decays_with_depth_and_load() -> None:
    clock = FakeClock()
    sim = Simulator("drift", seed=3, clock=clock, tick=0.5)
    clock.advance(200)  # concurrency 8 -> ~27: below 32
    low = pools_by_id(sim.truth())["chat-eagle3"]["cumulative_since_start"]
    clock.advance(500)  # past 600 s: 64 running, acceptance scaled by 1 - 0.01*(64-32) = 0.68
    mid = pools_by_id(sim.truth())["chat-eagle3"]["cumulative_since_start"]
    clock.advance(200)
    high = pools_by_id(sim.truth())["chat-eagle3"]["cumulative_since_start"]
    assert sim.truth()["phase"] == "past-32-running"
    p_low = conditional(low)
    p_high = conditional(diff(mid, high))
    for p in (p_low, p_high):
        assert all(b < a - 0.03 for a, b in itertools.pairwise(p)), p  # decays with depth
    assert p_low[0] == pytest.approx(0.88, abs=0.01) and p_low[-1] == pytest.approx(0.56, abs=0.02)
    assert p_high[0] == pytest.approx(0.88 * 0.68, abs=0.01)
    assert rate(diff(mid, high)) < rate(low) - 0.15


def test_long_context_acceptance_collapses() -> None:
    clock = FakeClock()
    sim = Simulator("long-context", seed=6, clock=clock, tick=0.5)
    clock.advance(120)
    truth = pools_by_id(sim.truth())
    long_c, chat_c = truth["long-eagle3"]["counters"], truth["chat-eagle3"]["counters"]
    assert long_c["drafts"] > 10_000  # drafts are still scheduled and counted (zero-filled)
    assert rate(long_c) < 0.02
    assert rate(chat_c) > 0.55
    assert long_c["draft_tokens"] == 3 * long_c["drafts"]


def test_data_parallel_engines_are_separate_series() -> None:
    clock = FakeClock()
    sim = Simulator("restart", seed=1, clock=clock)
    clock.advance(20)
    p = pools_by_id(sim.truth())["code-eagle3"]
    e0, e1 = (e["counters"] for e in p["per_engine"])
    assert e0["drafts"] > 0 and e1["drafts"] > 0 and e0["drafts"] != e1["drafts"]
    assert p["counters"]["drafts"] == e0["drafts"] + e1["drafts"]


def test_acceptance_change_event_and_concurrency_profile() -> None:
    sc = parse_scenario({
        "tick": 0.2,
        "pools": [{"id": "a", "model": "m", "traffic_class": "c", "spec_mode": "eagle3", "k": 4,
                   "acceptance": {"mode": "iid", "a": 0.9},
                   "concurrency": {"points": [[0, 4], [30, 12]], "interp": "step"}}],
        "events": [{"pool": "a", "at": 30, "acceptance": {"mode": "list", "p": [0.5, 0.4, 0.3, 0.2]}}],
    })
    clock = FakeClock()
    sim = Simulator(sc, seed=0, clock=clock)
    clock.advance(31)
    t1 = pools_by_id(sim.truth(at=START + 30))["a"]
    assert t1["gauges"]["running"] == 4
    # R(t) is read at each tick's start: the tick starting at 30 s admits up to 12
    assert pools_by_id(sim.truth(at=START + 30.2))["a"]["gauges"]["running"] == 12
    clock.advance(60)
    t2 = pools_by_id(sim.truth())["a"]
    before, after = conditional(t1["counters"]), conditional(diff(t1["counters"], t2["counters"]))
    assert before == pytest.approx([0.9] * 4, abs=0.02)
    assert after == pytest.approx([0.5, 0.4, 0.3, 0.2], abs=0.03)
