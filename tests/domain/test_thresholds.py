"""Ratios of counts against configured thresholds compare exactly (hand-computed boundary cases): the
shared helper, the alert rule, the rollout gate and the plan's "needs" all agree at the boundary."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from backend.domain import alerting as al
from backend.domain import rollout as ro
from backend.domain import thresholds as thr


def test_threshold_read_as_its_decimal_text() -> None:
    assert thr.exact(0.55) == Fraction(11, 20)  # not 0.55000000000000004440892098500626...
    assert thr.exact("0.42") == Fraction(21, 50)
    assert thr.exact(Decimal("0.35")) == Fraction(7, 20)
    assert thr.exact(1) == 1
    assert thr.as_pair(0.55) == (11, 20)
    assert thr.plus(0.55, 0.05) == Fraction(3, 5)  # 0.55 + 0.05 is 0.6000000000000001 in floats
    with pytest.raises(TypeError):
        thr.exact(True)
    for bad in (float("nan"), float("inf"), "nan"):
        with pytest.raises(ValueError):
            thr.exact(bad)


def test_twenty_records_at_exactly_the_threshold_are_not_below() -> None:
    # alpha = 11n / 20n = 0.55 exactly for n = 1..20; floating point `A < 0.55 * D` calls 8 of them below
    pairs = [(11 * n, 20 * n) for n in range(1, 21)]
    assert sum(a < 0.55 * d for a, d in pairs) == 8  # the defect this module removes (n = 5, 9, 10, 11, 17..20)
    assert [thr.ratio_below(a, d, 0.55) for a, d in pairs] == [False] * 20
    assert [thr.compare_ratio(a, d, 0.55) for a, d in pairs] == [0] * 20
    assert [thr.ratio_at_least(a, d, 0.55) for a, d in pairs] == [True] * 20


def test_one_count_either_side_of_the_boundary() -> None:
    assert thr.ratio_below(10, 20, 0.55) is True
    assert thr.ratio_below(12, 20, 0.55) is False
    # 0.55 - 5e-18: the float quotient rounds to 0.55, the counts say below
    a, d = 11 * 10**16 - 1, 2 * 10**17
    assert a / d == 0.55 and thr.ratio_below(a, d, 0.55) is True
    # float counts (a Prometheus increase) convert exactly: the float 1.1 is 1.1000000000000000888, a hair above
    assert thr.compare_ratio(1.1, 2.0, 0.55) == 1
    assert thr.compare_ratio(0.75, 1.5, 0.5) == 0


def test_undefined_ratio_is_neither_below_nor_above() -> None:
    assert thr.ratio_below(0, 0, 0.55) is None
    assert thr.ratio_below(None, 20, 0.55) is None
    assert thr.rate_below(None, 0.55) is None
    assert thr.rate_below(0.55, 0.55) is False  # a rate known only as a float: its decimal value
    assert thr.rate_below(0.5499999999999999, 0.55) is True
    assert thr.rate_below(0.55, 0.55, num=a_less(), den=20 * 10**16) is True  # counts win over the rate


def a_less() -> int:
    return 11 * 10**16 - 1


def test_alert_rule_at_the_boundary() -> None:
    kw = {"threshold": 0.55, "recover_margin": 0.05, "min_drafts": 1000}
    w = lambda s, a, d: al.WindowStat(s, a / d, 5000, a, d)
    # both windows exactly at 0.55 (11/20): not below -> not breached; long at threshold, short 0.55 < 0.60
    assert al.alpha_low(w(300, 1100, 2000), w(3600, 11000, 20000), **kw).status == "hold"
    # short exactly at threshold + margin = 0.60 (3/5), long exactly at the threshold: recovered
    # (in floats 0.6 >= 0.55 + 0.05 = 0.6000000000000001 is false and it held)
    ev = al.alpha_low(w(300, 1200, 2000), w(3600, 11000, 20000), **kw)
    assert ev.status == "ok" and ev.values["recover_at"] == 0.6
    # one accepted token fewer on each window: both below -> breached
    assert al.alpha_low(w(300, 1099, 2000), w(3600, 10999, 20000), **kw).status == "breached"
    # counts whose float quotient rounds onto the threshold still breach
    d = 20 * 10**16
    assert al.alpha_low(w(300, a_less(), d), w(3600, a_less(), d), **kw).status == "breached"
    # a window with a rate but no counts (older callers) compares the rate's decimal value
    assert al.alpha_low(al.WindowStat(300, 0.55, 5000), al.WindowStat(3600, 0.55, 5000), **kw).status == "hold"


def test_rollout_gate_at_the_boundary() -> None:
    p = ro.GatePolicy(threshold=0.55, min_drafts=1000)
    facts = lambda a, d: ro.Facts(baseline=True, spec=True, spec_data=True, drafts=5000, alpha=a / d,
                                  accepted=a, draft_tokens=d)
    assert ro.measure_gate(facts(11000, 20000), p).result == "pass"  # exactly 0.55: pass
    assert ro.measure_gate(facts(10999, 20000), p).result == "fail"
    assert ro.measure_gate(facts(a_less(), 20 * 10**16), p).result == "fail"  # alpha rounds to 0.55, counts below
    only_rate = ro.Facts(baseline=True, spec=True, spec_data=True, drafts=5000, alpha=0.55)
    assert ro.measure_gate(only_rate, p).result == "pass"
