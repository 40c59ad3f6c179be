"""eps_step from ITL and the estimate tau / (1 + eps_step) against the TPOT speedup, on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from backend.domain import economics as eco
from backend.domain.step_overhead import LatencySums, speedup_check, step_overhead, tpot_speedup


def _bins(itl_mean: float, tpot_means: list[float]) -> list[LatencySums]:
    """One time bin per TPOT mean: 100 ITL observations at itl_mean, 10 requests at the TPOT mean."""
    return [LatencySums(itl_mean * 100, 100, m * 10, 10) for m in tpot_means]


def test_step_overhead_is_the_itl_ratio():
    assert step_overhead(0.025, 0.02) == pytest.approx(0.25)
    assert step_overhead(0.018, 0.02) == pytest.approx(-0.1)  # a measurement, shown as is
    assert step_overhead(None, 0.02) is None and step_overhead(0.02, None) is None
    assert step_overhead(0.02, 0.0) is None
    assert tpot_speedup(0.0125, 0.02) == pytest.approx(1.6)
    assert tpot_speedup(0.0, 0.02) is None


def test_estimate_and_measurement_disagree_both_right():
    # spec steps take 0.025 s against 0.020 s plain: eps_step = 0.25, tau = 2.5 -> estimate 2.5 / 1.25 = 2.0.
    # spec TPOT means per bin 0.011, 0.013, 0.012, 0.014 (equal counts: mean 0.0125) against 0.020 plain:
    # measured 0.02 / 0.0125 = 1.6. Leave-one-out TPOT means 0.013, 0.037/3, 0.038/3, 0.012 with the
    # estimate fixed at 2.0: d_i = ln(2.0 / (0.02 / m_i)) = ln(1.3), ln(1.2333), ln(1.2667), ln(1.2),
    # jackknife SE = sqrt(3/4 sum (d_i - mean)^2) = 0.0516686; d = ln(2.0 / 1.6) = ln 1.25 = 0.22314 > 2 SE.
    check = speedup_check(2.5, _bins(0.025, [0.011, 0.013, 0.012, 0.014]), _bins(0.02, [0.02] * 4))
    assert check.estimated == pytest.approx(2.0) and check.measured == pytest.approx(1.6)
    assert check.ratio == pytest.approx(1.25)
    assert check.ratio_low == pytest.approx(1.25 * math.exp(-2 * 0.0516686), rel=1e-6)
    assert check.ratio_high == pytest.approx(1.25 * math.exp(2 * 0.0516686), rel=1e-6)
    assert check.bins == 4 and check.verdict == "disagree"
    assert "25.0 % above the measured speedup" in check.reason
    # the effective overhead tau / S_meas - 1 = 0.5625 is a different number, and tau / (1 + eps_eff)
    # would just give back the measured 1.6: the identity this check avoids
    eps_eff = eco.effective_overhead(2.5, check.measured)
    assert eps_eff == pytest.approx(0.5625) and eco.speedup(2.5, eps_eff) == pytest.approx(check.measured)
    assert step_overhead(0.025, 0.02) != pytest.approx(eps_eff)


def test_agreement_within_the_uncertainty():
    exact = speedup_check(2.5, _bins(0.025, [0.009, 0.011, 0.010, 0.010]), _bins(0.02, [0.02] * 4))
    assert exact.ratio == pytest.approx(1.0) and exact.verdict == "agree"
    # TPOT means 0.0095, 0.0115, 0.0095, 0.0115: measured 0.02 / 0.0105 = 1.90476, ratio 1.05;
    # leave-one-out d = ln(1.08333) or ln(1.01667), SE = 0.0550 -> |ln 1.05| = 0.0488 < 2 SE
    near = speedup_check(2.5, _bins(0.025, [0.0095, 0.0115, 0.0095, 0.0115]), _bins(0.02, [0.02] * 4))
    assert near.measured == pytest.approx(0.02 / 0.0105) and near.ratio == pytest.approx(1.05)
    se = math.sqrt(3 / 4 * 4 * ((math.log(1.0833333333) - math.log(1.0166666667)) / 2) ** 2)
    assert near.ratio_high == pytest.approx(1.05 * math.exp(2 * se), rel=1e-6)
    assert near.verdict == "agree"


def test_undetermined_without_enough_bins_or_data():
    few = speedup_check(2.5, _bins(0.025, [0.0125] * 3), _bins(0.02, [0.02] * 3))
    assert few.ratio == pytest.approx(1.25) and few.ratio_low is None and few.verdict == "undetermined"
    assert few.bins == 3
    # a bin where the baseline has no ITL: not counted for the interval, still in the totals
    spec = _bins(0.025, [0.0125] * 4)
    base = _bins(0.02, [0.02] * 3) + [LatencySums(None, None, 0.2, 10)]
    assert speedup_check(2.5, spec, base).bins == 3
    no_base = speedup_check(2.5, spec, [LatencySums()] * 4)
    assert no_base.estimated is None and no_base.measured is None and no_base.verdict == "undetermined"
    assert speedup_check(None, spec, _bins(0.02, [0.02] * 4)).ratio is None
    with pytest.raises(ValueError):
        speedup_check(2.5, spec, base[:3])
    with pytest.raises(ValueError):
        speedup_check(2.5, spec, base, z=0)


def test_a_real_but_small_gap_is_within_the_tolerance():
    # a 1 % gap: spec TPOT 0.0101 in every bin -> measured 0.02 / 0.0101 = 1.9802, ratio 1.01 with SE 0 (bins identical)
    spec, base = _bins(0.025, [0.0101] * 4), _bins(0.02, [0.02] * 4)
    check = speedup_check(2.5, spec, base)
    assert check.ratio == pytest.approx(1.01) and check.ratio_low == pytest.approx(1.01)
    assert check.verdict == "agree" and "within their uncertainty or 3 %" in check.reason
    strict = speedup_check(2.5, spec, base, tolerance=0.0)
    assert strict.verdict == "disagree" and "1.0 % above" in strict.reason
    with pytest.raises(ValueError):
        speedup_check(2.5, spec, base, tolerance=-0.1)
