"""GET /api/v1/k-advice on stored buckets: measured p_j per class, eps measured against the baseline and
calibrated across two K of the same drafter, against hand-computed values."""

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


def _spec(db, now, mode, k, cls, per_pos, tpot_sum):
    pool = make_pool(db, spec_mode=mode, num_spec_tokens=k, traffic_class=cls, last_seen=now)
    for i in range(2):
        make_bucket(db, pool, T0 + timedelta(minutes=i), drafts=1000, draft_tokens=1000 * k,
                    accepted_tokens=sum(per_pos), accepted_per_pos=per_pos, tpot_sum=tpot_sum, tpot_count=100,
                    running_mean=5.0)
    return pool


@pytest.fixture
def fleet(db, now):
    base = make_pool(db, spec_mode="off", traffic_class="chat", last_seen=now)
    for i in range(2):
        make_bucket(db, base, T0 + timedelta(minutes=i), tpot_sum=4.0, tpot_count=100, running_mean=5.0)
    # TPOT means: baseline 0.04; spec chosen so that eps = tau / S - 1 is 0.25 at K = 3 and 0.35 at K = 5
    s3, s5 = TAU_MIX3 / 1.25, TAU5 / 1.35
    _spec(db, now, "eagle3-k3", 3, "chat", CHAT3, 4.0 / s3)
    _spec(db, now, "eagle3-k3", 3, "code", CODE3, 4.0 / s3)
    _spec(db, now, "eagle3-k5", 5, "chat", CHAT5, 4.0 / s5)


def _mode(body, name):
    return next(m for m in body["modes"] if m["spec_mode"] == name)


def _cls(mode, name):
    return next(c for c in mode["classes"] if c["name"] == name)


def test_k_advice_from_measured_curves_and_two_k_calibration(client, fleet):
    r = client.get("/api/v1/k-advice", params={"model": "llama-70b", "window": "1h"})
    assert r.status_code == 200, r.text
    k3 = _mode(r.json(), "eagle3-k3")
    assert k3["k"] == 3 and k3["eps_source"] == "measured" and k3["eps"] == pytest.approx(0.25)
    # eps(3) = 0.25 and eps(5) = 0.35 for the same drafter and band: eps0 = 0.1, eps_tok = 0.05
    ov = k3["overhead"]
    assert ov["source"] == "measurements at several K, linear fit"
    assert ov["eps0"] == pytest.approx(0.1) and ov["eps_tok"] == pytest.approx(0.05)
    chat = _cls(k3, "chat")
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
    assert code["rows"][0]["speedup"] == pytest.approx(2.2 / 1.2) and code["rows"][1]["speedup"] == pytest.approx(1.92)
    assert code["best_k"] == 3 and code["gain"] == pytest.approx(0.0)  # 2.4 / 1.25 beats 2.2 / 1.2
    # the mix weights classes by output tokens N + A; at the measured K it is the pooled 1 + sum A / sum N
    mix = k3["mix"]
    assert mix["name"] == "mixed" and mix["rows"][1]["tau"] == pytest.approx(TAU_MIX3)
    assert mix["rows"][0]["tau"] == pytest.approx((3439 + 2400) / (3439 / 2.71 + 2400 / 2.2))
    assert mix["current_speedup"] == pytest.approx(TAU_MIX3 / 1.25)
    assert not k3["incomplete"] and k3["unavailable"] == {}
    k5 = _mode(r.json(), "eagle3-k5")
    assert [x["k"] for x in _cls(k5, "chat")["rows"]] == [4, 5, 6, 7]
    assert k5["overhead"]["eps_tok"] == pytest.approx(0.05)


def test_k_advice_without_per_position_data_says_why(client, db, now):
    pool = make_pool(db, num_spec_tokens=3, last_seen=now)
    make_bucket(db, pool, T0, drafts=1000, draft_tokens=3000, accepted_tokens=1500, running_mean=5.0)
    body = client.get("/api/v1/k-advice", params={"model": "llama-70b", "window": "1h"}).json()
    (mode,) = body["modes"]
    assert mode["classes"] == [] and mode["mix"] is None and mode["incomplete"]
    assert "per-position" in mode["unavailable"]["chat"]
    # eps from the band default, split by the configured share (0: all of it grows with K)
    assert mode["eps_source"] == "default-for-band" and mode["overhead"]["eps0"] == 0.0


def test_k_advice_unknown_model_and_bad_window(client, fleet):
    assert client.get("/api/v1/k-advice", params={"model": "gpt-9"}).status_code == 404
    assert client.get("/api/v1/k-advice", params={"model": "llama-70b", "window": "5x"}).status_code == 422


def test_classes_at_different_k_in_one_mode_calibrate_each_other(client, db, now):
    # like the simulator's steady scenario: one drafter, chat at K = 3 and code at K = 5, each with a baseline
    for cls in ("chat", "code"):
        base = make_pool(db, spec_mode="off", traffic_class=cls, last_seen=now)
        for i in range(2):
            make_bucket(db, base, T0 + timedelta(minutes=i), tpot_sum=4.0, tpot_count=100, running_mean=5.0)
    _spec(db, now, "eagle3", 3, "chat", CHAT3, 4.0 / (3.439 / 1.25))  # eps = 0.25 at K = 3
    _spec(db, now, "eagle3", 5, "code", CHAT5, 4.0 / (TAU5 / 1.35))  # eps = 0.35 at K = 5
    (mode,) = client.get("/api/v1/k-advice", params={"model": "llama-70b", "window": "1h"}).json()["modes"]
    assert mode["k"] is None and mode["mix"] is None and "different K (3, 5)" in mode["unavailable"]["mixed"]
    chat, code = _cls(mode, "chat"), _cls(mode, "code")
    assert chat["eps"] == pytest.approx(0.25) and code["eps"] == pytest.approx(0.35)
    for c in (chat, code):
        assert c["overhead"]["source"] == "measurements at several K, linear fit"
        assert c["overhead"]["eps0"] == pytest.approx(0.1) and c["overhead"]["eps_tok"] == pytest.approx(0.05)
    assert [r["k"] for r in code["rows"]] == [4, 5, 6, 7]
    assert code["rows"][1]["speedup"] == pytest.approx(TAU5 / 1.35)
