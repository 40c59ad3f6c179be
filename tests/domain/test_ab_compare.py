"""Drafter / configuration A/B (domain.ab_compare): hand-computed intervals and verdicts, load matching."""

from __future__ import annotations

import math

import pytest

from backend.domain import ab_compare as ab
from backend.domain.ab_compare import Bin


def test_ratio_variance_hand_computed():
    # R = 30 / 40 = 0.75; residuals y - R x = 0.5, -1.5, -0.5, 1.5 -> 5; var = 4/3 * 5 / 40^2
    r, var, n = ab.ratio_variance([(8, 10), (6, 10), (7, 10), (9, 10)])
    assert (r, n) == (0.75, 4)
    assert var == pytest.approx(4 / 3 * 5 / 1600, rel=1e-12)
    assert ab.ratio_variance([(1, 0)]) == (None, None, 0)
    assert ab.ratio_variance([(3, 4)]) == (0.75, None, 1)


def _alpha_bins(accepted):
    return [Bin(drafts=1000, draft_tokens=3000, accepted=a, per_pos=(a * 0.5, a * 0.3, a * 0.2), tokens=1000 + a)
            for a in accepted]


def test_alpha_better_hand_computed():
    # A: alpha 6000/12000 = 0.5, residuals 0, 60, -60, 0 -> var = 4/3 * 7200 / 12000^2 = 6.667e-5 (B the same
    # around 0.6). ln(0.6/0.5) = 0.182322, se = sqrt(var/0.36 + var/0.25) = 0.0212568; 95 %: +15.10 to +25.11 %
    a = {"1-8": _alpha_bins([1500, 1560, 1440, 1500])}
    b = {"1-8": _alpha_bins([1800, 1860, 1740, 1800])}
    c = ab.compare(a, b)
    m = c.metric("alpha")
    assert (m.a, m.b) == (pytest.approx(0.5), pytest.approx(0.6))
    assert m.change == pytest.approx(0.2)
    assert m.change_low == pytest.approx(0.15103205641598513, rel=1e-9)
    assert m.change_high == pytest.approx(0.2510511692296267, rel=1e-9)
    assert m.verdict == "better"
    tau = c.metric("tau")
    assert (tau.a, tau.b) == (pytest.approx(2.5), pytest.approx(2.8))
    assert tau.verdict == "better"
    # conditional p_0 = P_0 / N: 0.5 * 1500 / 1000 = 0.75 on A, 0.9 on B
    assert c.metric("p_0").a == pytest.approx(0.75) and c.metric("p_0").b == pytest.approx(0.9)
    # the reverse direction is "worse"
    assert ab.compare(b, a).metric("alpha").verdict == "worse"
    assert c.drafts == (4000.0, 4000.0) and c.strata == ("1-8",) and c.compared_fraction == 1.0


def test_same_drafter_reads_no_significant_change():
    a = {"1-8": _alpha_bins([1500, 1560, 1440, 1500])}
    b = {"1-8": _alpha_bins([1560, 1500, 1500, 1440])}
    m = ab.compare(a, b).metric("alpha")
    assert m.change == pytest.approx(0.0, abs=1e-12)
    assert m.change_low < 0 < m.change_high
    assert m.verdict == "no-significant-change"


def _speedup_bins(spec_sums):
    return [Bin(drafts=1000, draft_tokens=3000, accepted=1500, tpot_sum=s, tpot_count=100, base_tpot_sum=3.0,
                base_tpot_count=100, tokens=2500) for s in spec_sums]


def test_measured_speedup_hand_computed():
    # A: mean TPOT base 0.03, spec 8/400 = 0.02 -> S = 1.5; ln S linearised: u_i = 0 (constant baseline),
    # v_i = (s_i - 0.02 * 100) / (0.02 * 400) = 0, .025, -.025, 0 -> var = 4/3 * 0.00125. B: spec 0.016 -> 1.875,
    # the same relative spread. Change +25 %, se = sqrt(2 * 4/3 * 0.00125) = 0.0577350: +11.63 to +39.98 %
    a = {"9-32": _speedup_bins([2.0, 2.2, 1.8, 2.0])}
    b = {"9-32": _speedup_bins([1.6, 1.76, 1.44, 1.6])}
    m = ab.compare(a, b).metric("measured_speedup")
    assert (m.a, m.b) == (pytest.approx(1.5), pytest.approx(1.875))
    assert m.change == pytest.approx(0.25)
    assert m.change_low == pytest.approx(0.11626130175137908, rel=1e-9)
    assert m.change_high == pytest.approx(0.3997618635963519, rel=1e-9)
    assert m.verdict == "better"


def test_cost_and_saving_per_week_hand_computed():
    # 1 replica-hour per bin; A 1e6 tokens -> 10 per 1 M at 10 per replica-hour, B 1.25e6 -> 8 (-20 %)
    a = {"1-8": [Bin(drafts=2000, draft_tokens=6000, accepted=3000, tokens=1e6, replica_seconds=3600)] * 4}
    b = {"1-8": [Bin(drafts=2000, draft_tokens=6000, accepted=3000, tokens=1.25e6, replica_seconds=3600)] * 4}
    c = ab.compare(a, b, replica_hour_price=10.0, b_tokens_per_week=100e6)
    m = c.metric("cost_per_mtok")
    assert (m.a, m.b) == (pytest.approx(10.0), pytest.approx(8.0))
    assert m.change == pytest.approx(-0.2) and m.verdict == "better" and m.higher_is_better is False
    assert c.saving_per_week == pytest.approx(200.0)  # 100 M tokens x (10 - 8) / 1 M
    assert (c.saving_per_week_low, c.saving_per_week_high) == (pytest.approx(200.0), pytest.approx(200.0))
    # replicas unknown on one bin: no cost figures at all
    a2 = {"1-8": [*a["1-8"][:3], Bin(drafts=2000, draft_tokens=6000, accepted=3000, tokens=1e6)]}
    assert ab.compare(a2, b, replica_hour_price=10.0).metric("cost_per_mtok") is None


def _week(bands, spread=0.02):
    """A week of the SAME drafter: speedup 2.2 at 1-8 running, 1.5 at 33-128 (step cost grows with load);
    `bands` maps band -> number of time bins; each bin's spec TPOT wobbles by +-spread."""
    out = {}
    for band, n in bands.items():
        s = 2.2 if band == "1-8" else 1.5
        out[band] = [Bin(drafts=5000, draft_tokens=15000, accepted=7500 * (1 + spread * (-1) ** i),
                         tpot_sum=300 / s * (1 + spread * (-1) ** i), tpot_count=10000, base_tpot_sum=300,
                         base_tpot_count=10000, tokens=37500) for i in range(n)]
    return out


def test_quieter_week_control_does_not_read_better():
    busy = _week({"1-8": 6, "33-128": 160})  # last week: mostly at 33-128 running
    quiet = _week({"1-8": 160, "33-128": 6})  # this week: mostly idle-ish
    # pooled without load matching, the quiet week looks like a much better drafter
    naive = ab.compare({"all": [x for v in busy.values() for x in v]}, {"all": [x for v in quiet.values() for x in v]})
    assert naive.metric("measured_speedup").verdict == "better"
    c = ab.compare(busy, quiet)
    m = c.metric("measured_speedup")
    assert m.change == pytest.approx(0.0, abs=1e-12)
    assert m.verdict == "no-significant-change"
    assert c.metric("alpha").verdict != "better"
    # weights are the B (quiet) side's traffic
    assert c.weights == pytest.approx((160 / 166, 6 / 166))


def test_no_shared_band_is_inconclusive():
    c = ab.compare(_week({"33-128": 10}), _week({"1-8": 10}))
    assert c.strata == () and c.a_only == ("33-128",) and c.b_only == ("1-8",)
    assert {m.verdict for m in c.metrics} == {"inconclusive"}
    assert "no concurrency band" in c.metric("alpha").reason


def test_too_few_drafts_or_bins_is_inconclusive():
    tiny = {"1-8": [Bin(drafts=10, draft_tokens=30, accepted=15 + i, tokens=40) for i in range(5)]}
    m = ab.compare(tiny, tiny).metric("alpha")
    assert m.verdict == "inconclusive" and "50 drafts (< 1000)" in m.reason
    few = {"1-8": _alpha_bins([1500, 1560])}
    m = ab.compare(few, few).metric("alpha")
    assert m.verdict == "inconclusive" and "for 4 time bins or more" in m.reason
    # a transition band with 2 bins is left out, the others compared
    a = {"1-8": _alpha_bins([1500, 1560, 1440, 1500]), "9-32": _alpha_bins([1500, 1500])}
    b = {"1-8": _alpha_bins([1800, 1860, 1740, 1800]), "9-32": _alpha_bins([100, 100])}
    c = ab.compare(a, b)
    assert c.strata == ("1-8",) and c.metric("alpha").change == pytest.approx(0.2)
    assert c.notes[0] == "band 9-32 left out: fewer than 4 time bins on a side"


def test_bad_input_raises():
    with pytest.raises(ValueError, match="confidence"):
        ab.compare({}, {}, confidence=1.0)
    with pytest.raises(ValueError, match="min_bins"):
        ab.compare({}, {}, min_bins=1)
    with pytest.raises(ValueError, match="finite"):
        ab.compare({"1-8": [Bin(drafts=-1)]}, {})
    with pytest.raises(ValueError, match="finite"):
        ab.compare({"1-8": [Bin(tokens=math.nan)]}, {})


def test_percent_text():
    assert ab.percent_text(0.231, 0.18, 0.284) == "+23 % (18–28 %)"
    assert ab.percent_text(0.04, -0.021, 0.09) == "+4 % (−2–9 %)"
    assert ab.percent_text(-0.004, -0.02, 0.01) == "+0 % (−2–1 %)"
    assert ab.percent_text(None, None, None) == "n/a"


def test_p99_histograms_standardised_to_bs_mix_hand_computed():
    # cumulative rows [<= le1, +Inf]. A: lo 10 of 20 fast, hi 0 of 10; B: lo 5 of 10, hi 0 of 30; "x" only A's.
    a = {"lo": {0: [10, 20]}, "hi": {0: [0, 10]}, "x": {1: [7, 7]}}
    b = {"lo": {0: [5, 10]}, "hi": {1: [0, 30]}}
    rows_a, rows_b = ab.standardised_histograms(a, b, ["lo", "hi", "x"])
    # n_A = 30, n_B = 40 over the strata both observed; w_lo = (10/40)/(20/30) = 0.375, w_hi = (30/40)/(10/30) = 2.25
    assert rows_a == [pytest.approx([3.75, 30.0])]  # A's fast share 0.125 = 0.25 x 1/2 + 0.75 x 0, n stays 30
    assert rows_b == [[5.0, 10.0], [0.0, 30.0]]  # B's rows as they are, per time bin
    assert ab.standardised_histograms(a, {}, ["lo"]) == ([], [])
