import math

import pytest

from backend.domain.counters import promql_increase, promql_rate, reset_aware_increase, summed_increase


def test_plain_increase():
    assert reset_aware_increase([10, 20, 35]) == 25


def test_reset_counts_value_after_restart():
    assert reset_aware_increase([100, 150, 30, 80]) == 130  # 50 + 30 + 50
    assert reset_aware_increase([50, 60, 5, 20, 3, 9]) == 39


def test_fewer_than_two_samples_is_undefined_not_zero():
    assert reset_aware_increase([]) is None
    assert reset_aware_increase([42]) is None
    assert reset_aware_increase([None, 42, None]) is None


def test_constant_series_is_a_real_zero():
    assert reset_aware_increase([7, 7, 7]) == 0.0


def test_missed_scrape_is_skipped_not_zero():
    assert reset_aware_increase([1000, None, 3000, 4000]) == 3000
    assert reset_aware_increase([1000, math.nan, 3000, 4000]) == 3000
    # reading the gap as 0 would fake a reset: 0 -> 3000 adds 3000 and the drop adds 1000
    assert reset_aware_increase([1000, 0, 3000, 4000]) == 4000


def test_reset_per_series_then_sum():
    a = [1000, 1200, 1400]
    b = [5000, 100, 300]
    assert summed_increase([a, b]) == 700
    assert reset_aware_increase([x + y for x, y in zip(a, b)]) == 1700  # the mistake


def test_summed_increase_drops_short_series_and_all_dropped_is_none():
    assert summed_increase([[1, 5], [3]]) == 4
    assert summed_increase([[3], []]) is None
    assert summed_increase([]) is None


def _series(values, step=15.0):
    return [(i * step, v) for i, v in enumerate(values)]


def test_promql_increase_extrapolates_to_both_edges():
    samples = _series([10.0 * i for i in range(21)])
    assert promql_increase(samples, 7, 307) == pytest.approx(200.0, abs=1e-9)  # 190*300/285


def test_promql_increase_series_starting_inside_window():
    vals = [None] * 10 + [40.0 + 10 * i for i in range(11)]
    assert promql_increase(_series(vals), 7, 307) == pytest.approx(100 * (150 + 7.5 + 7) / 150, abs=1e-9)


def test_promql_zero_clamp_limits_start_extrapolation():
    # counter starts at 5 with slope 1/s: extrapolating the full 10 s gap would go negative
    samples = [(10.0, 5.0), (20.0, 15.0), (30.0, 25.0)]
    # gap to start 10 s < 1.1*10 would be used, but zero point is 5 s before the first sample
    assert promql_increase(samples, 0, 30) == pytest.approx(20 * (20 + 5) / 20)


def test_promql_increase_handles_reset_and_closed_range():
    samples = [(0.0, 100.0), (15.0, 130.0), (30.0, 10.0), (45.0, 40.0), (60.0, 70.0)]
    # range [0, 60] includes both ends in Prometheus 2.x: raw = 70 - 100 + 130 = 100, no gaps
    assert promql_increase(samples, 0, 60) == pytest.approx(100.0)
    assert promql_rate(samples, 0, 60) == pytest.approx(100.0 / 60)


def test_promql_needs_two_samples_in_range():
    assert promql_increase([(0.0, 1.0), (100.0, 5.0)], 50, 150) is None
    assert promql_rate([(100.0, 5.0)], 50, 150) is None
    with pytest.raises(ValueError):
        promql_increase([(0.0, 1.0)], 10, 10)
