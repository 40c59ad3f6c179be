"""The latency verdict against hand-computed cases on vLLM's default bucket layouts (spec-math 7.2).

Each case is a per-time-bucket histogram (the same counts in every time bucket unless noted), so the
quantiles, the buckets holding them, the interval [l_s - u_b, u_s - l_b] and the exceedances of the shared
edge follow by hand; every case asserts the label, the interval and the one-line reason.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from backend.domain.verdict import latency_verdict

ITL = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
        80.0, 160.0, 640.0, 2560.0]
INF = math.inf


def hist(per_bucket: dict[float, int], bounds=ITL, times: int = 60) -> np.ndarray:
    """`times` identical time buckets, each with per_bucket[le] observations in the bucket ending at le."""
    per = [per_bucket.get(b, 0) for b in (*bounds, INF)]
    return np.tile(np.cumsum(per).astype(float), (times, 1))


def rows(*parts: np.ndarray) -> np.ndarray:
    return np.vstack(parts)


def case(**fields) -> dict:
    return fields


MS = 0.001
CASES = {
    # long-context: spec TPOT all in (10, 25] -> P99 10 + 15 * 0.99 = 24.85 ms; baseline all in (0, 10] -> 9.9
    "long-context P99 TPOT worse": case(
        spec=hist({0.025: 100}), base=hist({0.01: 100}), values=(24.85, 9.9), label="worse", interval=(0, 25),
        buckets=((10, 25), (0, 10)), edge=10, exceed=(1.0, 0.0),
        reason="P99 (10, 25] ms vs (0, 10] ms: spec slower by 0 to 25 ms; above 10 ms: spec 100 %, "
               "baseline 0 % (limit 1 %)"),
    # drift: spec ITL 99 % in (25, 50], 1 % in (50, 75] -> P99 = 50 ms; baseline 99 % in (10, 25] -> 25 ms
    "drift P99 ITL worse": case(
        spec=hist({0.05: 99, 0.075: 1}), base=hist({0.025: 99, 0.05: 1}), values=(50, 25), label="worse",
        interval=(0, 40), buckets=((25, 50), (10, 25)), edge=25, exceed=(1.0, 0.01),
        reason="P99 (25, 50] ms vs (10, 25] ms: spec slower by 0 to 40 ms; above 25 ms: spec 100 %, "
               "baseline 1 % (limit 1 %)"),
    # steady chat: spec TPOT all in (0, 10] -> 9.9; baseline 70 % in (0, 10], 30 % in (10, 25] -> 24.5
    "steady chat P99 TPOT better": case(
        spec=hist({0.01: 100}), base=hist({0.01: 70, 0.025: 30}), values=(9.9, 24.5), label="better",
        interval=(-25, 0), buckets=((0, 10), (10, 25)), edge=10, exceed=(0.0, 0.3),
        reason="P99 (0, 10] ms vs (10, 25] ms: spec faster by 0 to 25 ms; above 10 ms: spec 0 %, "
               "baseline 30 % (limit 1 %)"),
    # two buckets apart: spec 60 in (50, 75] of 100, baseline all in (10, 25]: the order holds at 25 ms
    "buckets apart worse": case(
        spec=hist({0.05: 40, 0.075: 60}), base=hist({0.025: 100}), values=(74.583333, 24.85), label="worse",
        interval=(25, 65), buckets=((50, 75), (10, 25)), edge=25, exceed=(1.0, 0.0),
        reason="P99 (50, 75] ms vs (10, 25] ms: spec slower by 25 to 65 ms; above 25 ms: spec 100 %, "
               "baseline 0 % (limit 1 %)"),
    # the same histogram: one bucket, nothing moved, and still not "no change": below the resolution
    "same bucket, no tail shift": case(
        spec=hist({0.01: 50, 0.025: 50}), base=hist({0.01: 50, 0.025: 50}), values=(24.7, 24.7),
        label="unresolved", interval=(-15, 15), buckets=((10, 25), (10, 25)), edge=25, exceed=(0.0, 0.0),
        tail="none",
        reason="change below the histogram's resolution: both P99s in (10, 25] ms; above 25 ms: spec 0 %, "
               "baseline 0 % (no tail shift)"),
    # spec 98 of 200 in (10, 25] and 2 above 25 ms (1 %: P99 = 25 exactly), baseline none above 25 ms
    "same bucket, tail heavier on spec": case(
        spec=hist({0.01: 100, 0.025: 98, 0.05: 2}), base=hist({0.01: 100, 0.025: 100}), values=(25, 24.7),
        label="unresolved", interval=(-15, 15), buckets=((10, 25), (10, 25)), edge=25, exceed=(0.01, 0.0),
        tail="heavier",
        reason="change below the histogram's resolution: both P99s in (10, 25] ms; above 25 ms: spec 1 %, "
               "baseline 0 % (tail heavier on spec)"),
    # the mirror: the baseline's tail reaches past 25 ms, the spec's does not
    "same bucket, tail lighter on spec": case(
        spec=hist({0.01: 100, 0.025: 100}), base=hist({0.01: 100, 0.025: 98, 0.05: 2}), values=(24.7, 25),
        label="unresolved", interval=(-15, 15), buckets=((10, 25), (10, 25)), edge=25, exceed=(0.0, 0.01),
        tail="lighter",
        reason="change below the histogram's resolution: both P99s in (10, 25] ms; above 25 ms: spec 0 %, "
               "baseline 1 % (tail lighter on spec)"),
    # spec 2 % beyond 80 s: its P99 is only known to be above 80 s; the delta has no upper end
    "spec in +Inf worse": case(
        spec=hist({0.025: 98, INF: 2}), base=hist({0.025: 100}), values=(80000, 24.85), label="worse",
        interval=(79975, None), buckets=((80000, None), (10, 25)), edge=25, exceed=(0.02, 0.0),
        reason="P99 (80000, +Inf) vs (10, 25] ms: spec slower by at least 79975 ms; above 25 ms: spec 2 %, "
               "baseline 0 % (limit 1 %)"),
    "baseline in +Inf better": case(
        spec=hist({0.025: 100}), base=hist({0.025: 98, INF: 2}), values=(24.85, 80000), label="better",
        interval=(None, -79975), buckets=((10, 25), (80000, None)), edge=25, exceed=(0.0, 0.02),
        reason="P99 (10, 25] ms vs (80000, +Inf): spec faster by at least 79975 ms; above 25 ms: spec 0 %, "
               "baseline 2 % (limit 1 %)"),
    "both in +Inf": case(
        spec=hist({0.025: 97, INF: 3}), base=hist({0.025: 98, INF: 2}), values=(80000, 80000),
        label="inconclusive", interval=(None, None), buckets=((80000, None), (80000, None)),
        reason="both P99s fall in the +Inf bucket (above 80000 ms); only lower bounds are known"),
    # 1.2 % of spec above 25 ms overall (P99 = 25 + 25 * (1980 - 1976) / 24), but all of it in one of 20
    # time buckets: within sampling noise
    "different buckets within noise": case(
        spec=rows(hist({0.025: 100}, times=19), hist({0.025: 76, 0.05: 24}, times=1)),
        base=hist({0.025: 100}, times=20), values=(29.166667, 24.85), label="no-significant-change",
        interval=(-40, 40), buckets=((25, 50), (10, 25)), edge=25, exceed=(0.012, 0.0),
        reason="P99 (25, 50] ms vs (10, 25] ms, but above 25 ms spec 1.2 % vs baseline 0 % is within sampling "
               "noise of 1 %: no significant shift"),
    # 1.5 % of spec beyond 80 s, all in one of 20 time buckets: within noise, and the size is unbounded
    "spec in +Inf within noise": case(
        spec=rows(hist({0.025: 100}, times=19), hist({0.025: 70, INF: 30}, times=1)),
        base=hist({0.025: 100}, times=20), values=(80000, 24.85), label="no-significant-change",
        interval=(None, None), buckets=((80000, None), (10, 25)), edge=25, exceed=(0.015, 0.0),
        reason="P99 (80000, +Inf) vs (10, 25] ms, but above 25 ms spec 1.5 % vs baseline 0 % is within sampling "
               "noise of 1 %: no significant shift"),
    # 180 observations a side; q = 0.99 needs 5 / 0.01 = 500
    "sparse: 3 observations per minute": case(
        spec=hist({0.05: 3}), base=hist({0.025: 3}), values=(49.75, 24.85), label="inconclusive",
        interval=(0, 40), buckets=((25, 50), (10, 25)),
        reason="too little data for a verdict at q=0.99: spec: 180 observations (< 500); "
               "baseline: 180 observations (< 500)"),
    "sparse: 5 time buckets": case(
        spec=hist({0.05: 1000}, times=5), base=hist({0.025: 1000}, times=5), values=(49.75, 24.85),
        label="inconclusive", interval=(0, 40), buckets=((25, 50), (10, 25)),
        reason="too little data for a verdict at q=0.99: spec: 5 time buckets (< 10); baseline: 5 time "
               "buckets (< 10)"),
    # TTFT, default layout: spec all in (0.25, 0.5] s, baseline all in (0.1, 0.25] s
    "TTFT P99 worse": case(
        spec=hist({0.5: 100}, TTFT), base=hist({0.25: 100}, TTFT), bounds=TTFT, values=(497.5, 248.5),
        label="worse", interval=(0, 400), buckets=((250, 500), (100, 250)), edge=250, exceed=(1.0, 0.0),
        reason="P99 (250, 500] ms vs (100, 250] ms: spec slower by 0 to 400 ms; above 250 ms: spec 100 %, "
               "baseline 0 % (limit 1 %)"),
    # P50 of the drift shape: 50 % rank in (25, 50] for spec, in (10, 25] for the baseline
    "drift P50 ITL worse": case(
        spec=hist({0.05: 99, 0.075: 1}), base=hist({0.025: 99, 0.05: 1}), q=0.5, values=(37.626263, 17.575758),
        label="worse", interval=(0, 40), buckets=((25, 50), (10, 25)), edge=25, exceed=(1.0, 0.01),
        reason="P50 (25, 50] ms vs (10, 25] ms: spec slower by 0 to 40 ms; above 25 ms: spec 100 %, "
               "baseline 1 % (limit 50 %)"),
}


def _ms(x):
    return None if x is None else pytest.approx(x * MS, abs=1e-9)


@pytest.mark.parametrize("name", list(CASES))
def test_verdict_against_hand_computed_case(name):
    case = CASES[name]
    v = latency_verdict(case["spec"], case["base"], case.get("bounds", ITL), case.get("q", 0.99))
    assert v.verdict == case["label"], v.reason
    assert v.reason == case["reason"]
    assert (v.delta_low, v.delta_high) == tuple(_ms(x) for x in case["interval"])
    assert (v.spec_value, v.base_value) == tuple(_ms(x) for x in case["values"])
    (sl, sh), (bl, bh) = case["buckets"]
    assert (v.spec_bucket_low, v.spec_bucket_high, v.base_bucket_low, v.base_bucket_high) == (
        _ms(sl), _ms(sh), _ms(bl), _ms(bh))
    if "edge" in case:
        assert v.edge == _ms(case["edge"])
        assert (v.spec_exceedance, v.base_exceedance) == pytest.approx(case["exceed"], abs=1e-12)
        assert v.spec_exceedance_low <= v.spec_exceedance <= v.spec_exceedance_high
    else:
        assert v.edge is None and v.spec_exceedance is None
    assert v.tail_shift == case.get("tail")
    assert v.resolved == (case["label"] in ("worse", "better", "no-significant-change"))
    assert "-0 " not in v.reason and "−0" not in v.reason


def test_every_quantile_gets_the_same_rules():
    """P50, P90 and P99 of one pair of histograms, each from its own buckets."""
    from backend.domain.verdict import latency_verdicts

    spec, base = hist({0.01: 50, 0.025: 45, 0.05: 5}), hist({0.01: 50, 0.025: 50})
    p50, p90, p99 = latency_verdicts(spec, base, ITL, (0.5, 0.9, 0.99))
    assert (p50.verdict, p50.spec_bucket_high, p50.base_bucket_high) == ("unresolved", 0.01, 0.01)
    assert (p90.verdict, p90.tail_shift) == ("unresolved", "heavier")  # both in (10, 25]; 5 % vs 0 % above 25
    assert p99.verdict == "worse" and (p99.delta_low, p99.delta_high) == (pytest.approx(0), pytest.approx(0.04))
