"""GET /api/v1/k-advice on stored buckets: measured p_j per class, each class's own step overhead eps_step
(mean ITL against the baseline) calibrated across two K of the same drafter, the mix pooling the classes'
counts, against hand-computed values."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from tests.factories import T0, make_bucket, make_pool

CHAT3 = [900, 810, 729]  # p = 0.9 flat, N = 1000 per bucket
CODE3 = [800, 400, 200]  # p = 0.8, 0.5, 0.5
CHAT5 = [900.0, 810.0, 729.0, 656.1, 590.49]
TAU_MIX3 = 1 + (sum(CHAT3) + sum(CODE3)) / 2000  # 2.9195
TAU5 = 1 + sum(CHAT5) / 1000  # 4.68559


def _spec(db, now, mode, k, cls, per_pos, eps_step):
    """Two buckets of a spec pool whose engine steps take (1 + eps_step) x the baseline's 0.04 s (ITL)."""
    pool = make_pool(db, spec_mode=mode, num_spec_tokens=k, traffic_class=cls, last_seen=now)
    for i in range(2):
        make_bucket(db, pool, T0 + timedelta(minutes=i), drafts=1000, draft_tokens=1000 * k,
                    accepted_tokens=sum(per_pos), accepted_per_pos=per_pos, itl_sum=4.0 * (1 + eps_step),
                    itl_count=100, running_mean=5.0)
    return pool


def _base(db, now, cls="chat"):
    base = make_pool(db, spec_mode="off", traffic_class=cls, last_seen=now)
    for i in range(2):  # ITL mean 0.04 s per plain step
        make_bucket(db, base, T0 + timedelta(minutes=i), itl_sum=4.0, itl_count=100, running_mean=5.0)


@pytest.fixture
def fleet(db, now):
    _base(db, now)
    # each class its own step overhead: chat 0.25 and code 0.30 at K = 3, chat 0.35 at K = 5
    _spec(db, now, "eagle3-k3", 3, "chat", CHAT3, 0.25)
    _spec(db, now, "eagle3-k3", 3, "code", CODE3, 0.30)
    _spec(db, now, "eagle3-k5", 5, "chat", CHAT5, 0.35)


def _mode(body, name):
    return next(m for m in body["modes"] if m["spec_mode"] == name)


def _cls(mode, name):
    return next(c for c in mode["classes"] if c["name"] == name)


def test_k_advice_from_measured_curves_and_two_k_calibration(client, fleet):
    r = client.get("/api/v1/k-advice", params={"model": "llama-70b", "window": "1h"})
    assert r.status_code == 200, r.text
    k3 = _mode(r.json(), "eagle3-k3")
    assert k3["k"] == 3 and k3["concurrency_band"] == "1-8"
    chat = _cls(k3, "chat")
    # chat's own eps_step: 0.05 / 0.04 - 1 = 0.25 at K = 3, and 0.35 at K = 5 for the same drafter and band:
    # eps0 = 0.1, eps_tok = 0.05
    assert chat["eps_step_source"] == "measured" and chat["eps_step"] == pytest.approx(0.25)
    ov = chat["overhead"]
    assert ov["source"] == "measurements at several K, linear fit"
    assert ov["eps0"] == pytest.approx(0.1) and ov["eps_tok"] == pytest.approx(0.05)
    assert chat["conditional"] == pytest.approx([0.9, 0.9, 0.9])
    assert [x["k"] for x in chat["rows"]] == [2, 3, 4, 5]
    assert [x["speedup"] for x in chat["rows"]] == pytest.approx([2.71 / 1.2, 3.439 / 1.25, 4.0951 / 1.3,
                                                                  4.68559 / 1.35])
    assert [x["extrapolated"] for x in chat["rows"]] == [False, False, True, True]
    assert chat["best_k"] == 5 and chat["best_is_extrapolated"]
    code = _cls(k3, "code")
    slope = (math.log(0.5) - math.log(0.8)) / 2  # least squares through 3 equally spaced points
    assert code["fit"]["log_slope"] == pytest.approx(slope)
    p4 = math.exp((math.log(0.8) + 2 * math.log(0.5)) / 3 + 2 * slope)
    assert code["rows"][2]["tau"] == pytest.approx(2.4 + 0.2 * p4)
    # code keeps its own eps_step 0.30 at K = 3; the line through (3, 0.30) and chat's (5, 0.35) at K = 5:
    # eps_tok = 0.025, eps0 = 0.225
    assert code["eps_step"] == pytest.approx(0.30) and code["eps_step_source"] == "measured"
    assert code["overhead"]["eps0"] == pytest.approx(0.225) and code["overhead"]["eps_tok"] == pytest.approx(0.025)
    assert [x["eps"] for x in code["rows"]] == pytest.approx([0.275, 0.30, 0.325, 0.35])
    assert code["rows"][0]["speedup"] == pytest.approx(2.2 / 1.275)
    assert code["rows"][1]["speedup"] == pytest.approx(2.4 / 1.3)
    assert code["best_k"] == 4  # (2.4 + 0.2 p_4) / 1.325 = 1.8665 beats 1.8462: its own overhead grows slowly
    # the mix pools counts: output tokens T = N + A (chat 2000 + 4878, code 2000 + 2800), steps T / tau
    # (2000 each at K = 3), step time steps x (1 + eps_c): eps_mix(3) = (2000 x 1.25 + 2000 x 1.30) / 4000 - 1
    mix = k3["mix"]
    assert mix["name"] == "mixed" and mix["rows"][1]["tau"] == pytest.approx(TAU_MIX3)
    assert mix["eps_step"] == pytest.approx(0.275) and mix["eps_step_source"] == "pooled from classes"
    assert mix["current_speedup"] == pytest.approx(TAU_MIX3 / 1.275)
    assert mix["rows"][0]["tau"] == pytest.approx((6878 + 4800) / (6878 / 2.71 + 4800 / 2.2))
    # at K' = 2: total tokens over total time, each class at its own speedup
    assert mix["rows"][0]["speedup"] == pytest.approx(
        (6878 + 4800) / (6878 / (2.71 / 1.2) + 4800 / (2.2 / 1.275)))
    assert mix["overhead"] is None
    assert not k3["incomplete"] and k3["unavailable"] == {}
    k5 = _mode(r.json(), "eagle3-k5")
    assert [x["k"] for x in _cls(k5, "chat")["rows"]] == [4, 5, 6, 7]
    # at K = 5 the busiest measurement at K = 3 of the same drafter and band (chat's 0.25; equal volume:
    # the first class) joins chat's own 0.35
    assert _cls(k5, "chat")["overhead"]["eps_tok"] == pytest.approx(0.05)


def test_each_class_uses_its_own_eps_not_the_mixed_rows(client, fleet):
    """The mixed summary row's eps_step pools the classes' ITL (0.275 here); no class borrows it."""
    summary = client.get("/api/v1/summary", params={"model": "llama-70b", "window": "1h"}).json()
    mixed = next(c for c in summary["classes"] if c["traffic_class"] == "mixed" and c["spec_mode"] == "eagle3-k3")
    assert mixed["eps_step"] == pytest.approx(0.051 / 0.04 - 1)  # (5.0 + 5.0 + 5.2 + 5.2) / 400 = 0.051 s
    k3 = _mode(client.get("/api/v1/k-advice", params={"model": "llama-70b", "window": "1h"}).json(), "eagle3-k3")
    chat, code = _cls(k3, "chat"), _cls(k3, "code")
    assert chat["eps_step"] == pytest.approx(0.25) != mixed["eps_step"]
    assert code["eps_step"] == pytest.approx(0.30) != mixed["eps_step"]
    # chat's S(K = 4) with its own eps (0.1 + 4 x 0.05 = 0.3), not with the mixed row's
    assert chat["rows"][2]["speedup"] == pytest.approx(4.0951 / 1.3)


def test_k_advice_without_per_position_data_says_why(client, db, now):
    pool = make_pool(db, num_spec_tokens=3, last_seen=now)
    make_bucket(db, pool, T0, drafts=1000, draft_tokens=3000, accepted_tokens=1500, running_mean=5.0)
    body = client.get("/api/v1/k-advice", params={"model": "llama-70b", "window": "1h"}).json()
    (mode,) = body["modes"]
    assert mode["classes"] == [] and mode["mix"] is None and mode["incomplete"]
    assert "per-position" in mode["unavailable"]["chat"]
    assert "eps_step" not in mode and "overhead" not in mode  # overheads are per class


def test_k_advice_unknown_model_and_bad_window(client, fleet):
    assert client.get("/api/v1/k-advice", params={"model": "gpt-9"}).status_code == 404
    assert client.get("/api/v1/k-advice", params={"model": "llama-70b", "window": "5x"}).status_code == 422


def test_classes_at_different_k_in_one_mode_calibrate_each_other(client, db, now):
    # like the simulator's steady scenario: one drafter, chat at K = 3 and code at K = 5, each with a baseline
    for cls in ("chat", "code"):
        _base(db, now, cls)
    _spec(db, now, "eagle3", 3, "chat", CHAT3, 0.25)
    _spec(db, now, "eagle3", 5, "code", CHAT5, 0.35)
    (mode,) = client.get("/api/v1/k-advice", params={"model": "llama-70b", "window": "1h"}).json()["modes"]
    assert mode["k"] is None and mode["mix"] is None and "different K (3, 5)" in mode["unavailable"]["mixed"]
    chat, code = _cls(mode, "chat"), _cls(mode, "code")
    assert chat["eps_step"] == pytest.approx(0.25) and code["eps_step"] == pytest.approx(0.35)
    for c in (chat, code):
        assert c["overhead"]["source"] == "measurements at several K, linear fit"
        assert c["overhead"]["eps0"] == pytest.approx(0.1) and c["overhead"]["eps_tok"] == pytest.approx(0.05)
    assert [r["k"] for r in code["rows"]] == [4, 5, 6, 7]
    assert code["rows"][1]["speedup"] == pytest.approx(TAU5 / 1.35)
