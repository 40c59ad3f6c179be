import math

import pytest

from backend.domain.histogram import histogram_quantile, parse_le, quantile_delta, sum_histograms

INF = math.inf
H = [(0.05, 500), (0.1, 980), (0.15, 995), (0.2, 1000), (INF, 1000)]


def test_interpolation_and_bucket_bounds():
    r = histogram_quantile(0.99, H)
    assert r.value == pytest.approx(0.1 + 0.05 * 10 / 15, abs=1e-15)
    assert (r.bucket_low, r.bucket_high) == (0.1, 0.15)
    assert r.width == pytest.approx(0.05)
    assert not r.lower_bound and not r.fixed_monotonicity and r.reason is None


def test_first_bucket_starts_at_zero():
    assert histogram_quantile(0.5, H).value == pytest.approx(0.05)
    assert histogram_quantile(0.25, H).value == pytest.approx(0.025)
    assert histogram_quantile(0.25, H).bucket_low == 0.0


def test_input_order_and_string_bounds_do_not_matter():
    shuffled = [("+Inf", 1000), ("0.15", 995), (0.05, 500), ("0.2", 1000), (0.1, 980)]
    assert histogram_quantile(0.99, shuffled).value == histogram_quantile(0.99, H).value
    assert parse_le("+Inf") == INF


@pytest.mark.parametrize("q, reason", [(-0.1, "q_below_0"), (1.1, "q_above_1"), (math.nan, "q_nan")])
def test_q_out_of_range_is_none_with_reason(q, reason):
    r = histogram_quantile(q, H)
    assert r.value is None and r.reason == reason


@pytest.mark.parametrize("buckets, reason", [
    ([], "no_buckets"),
    ([(0.1, 5), (0.2, 10)], "no_inf_bucket"),
    ([(INF, 10)], "fewer_than_2"),
    ([(INF, 4), (INF, 6)], "fewer_than_2"),
    ([(0.1, 0), (0.2, 0), (INF, 0)], "no_observations"),
    ([(0.1, math.nan), (INF, 3)], "nan_count"),
])
def test_nan_cases_are_none_never_zero(buckets, reason):
    r = histogram_quantile(0.99, buckets)
    assert r.value is None and r.reason == reason


def test_q_zero_with_empty_first_bucket_is_nan_in_prometheus():
    assert histogram_quantile(0.0, [(0.1, 0), (0.2, 5), (INF, 5)]).reason == "zero_first_bucket"
    assert histogram_quantile(0.0, [(0.1, 2), (0.2, 5), (INF, 5)]).value == 0.0


def test_quantile_in_inf_bucket_is_a_flagged_lower_bound():
    r = histogram_quantile(0.99, [(0.05, 2000), (0.1, 9000), (0.2, 9890), (INF, 10000)])
    assert r.value == 0.2 and r.lower_bound
    assert r.bucket_low == 0.2 and r.bucket_high is None and r.width is None


def test_first_bucket_with_non_positive_le_returns_le():
    r = histogram_quantile(0.1, [(-1.0, 5), (0.0, 8), (1.0, 10), (INF, 10)])
    assert r.value == -1.0 and r.bucket_low is None
    assert histogram_quantile(0.1, [(0.0, 5), (1.0, 10), (INF, 10)]).value == 0.0


def test_monotonicity_is_forced_and_flagged():
    r = histogram_quantile(0.99, [(0.1, 50), (0.2, 45), (0.5, 100), (INF, 100)])
    assert r.value == pytest.approx(0.2 + 0.3 * 49 / 50)
    assert r.fixed_monotonicity


def test_equal_le_are_merged_by_summing():
    split = [(0.1, 300), (0.1, 200), (0.2, 600), (0.2, 400), (INF, 600), (INF, 400)]
    r = histogram_quantile(0.5, split)
    assert r.merged_duplicates
    assert r.value == histogram_quantile(0.5, [(0.1, 500), (0.2, 1000), (INF, 1000)]).value == 0.1


def test_rank_on_a_boundary_and_q_one():
    assert histogram_quantile(0.5, [(0.1, 50), (0.2, 100), (INF, 100)]).value == 0.1
    assert histogram_quantile(1.0, [(0.1, 50), (0.2, 100), (0.5, 100), (INF, 100)]).value == 0.2


def test_fleet_quantile_from_summed_buckets():
    i1 = [(0.05, 900), (0.1, 990), (0.2, 1000), (INF, 1000)]
    i2 = [(0.05, 10), (0.1, 50), (0.2, 90), (INF, 100)]
    summed = sum_histograms([i1, i2])
    assert summed == [(0.05, 910), (0.1, 1040), (0.2, 1090), (INF, 1100)]
    assert histogram_quantile(0.99, summed).value == pytest.approx(0.198)
    assert sum_histograms([]) == []


def test_delta_exact_and_resolved():
    base = histogram_quantile(0.99, [(0.025, 0), (0.05, 8000), (0.075, 9800), (0.1, 9950), (0.15, 10000), (INF, 10000)])
    spec = histogram_quantile(0.99, [(0.025, 0), (0.05, 2000), (0.075, 7000), (0.1, 9500), (0.15, 9850), (0.2, 9960),
                                     (0.3, 10000), (INF, 10000)])
    d = quantile_delta(spec, base)
    assert d.kind == "exact" and d.resolved
    assert d.delta == pytest.approx(0.081060606061)
    assert d.delta_rel == pytest.approx(0.884297520661)
    assert d.resolution == pytest.approx(0.05)


def test_delta_bounds_and_unknown():
    inside = histogram_quantile(0.99, [(0.05, 8000), (0.1, 9950), (0.2, 10000), (INF, 10000)])
    in_inf = histogram_quantile(0.99, [(0.05, 2000), (0.1, 9000), (0.2, 9890), (INF, 10000)])
    lower = quantile_delta(in_inf, inside)
    assert lower.kind == "lower_bound" and lower.delta == pytest.approx(0.101282051282) and lower.resolved
    upper = quantile_delta(inside, in_inf)
    assert upper.kind == "upper_bound" and upper.delta == pytest.approx(-0.101282051282)
    both = quantile_delta(in_inf, in_inf)
    assert both.kind == "unknown" and both.delta is None and not both.resolved
    empty = histogram_quantile(0.99, [(0.1, 0), (INF, 0)])
    assert quantile_delta(empty, inside).delta is None


def test_delta_narrower_than_bucket_is_not_resolved():
    base = histogram_quantile(0.5, [(0.1, 0), (0.2, 100), (INF, 100)])  # 0.15
    spec = histogram_quantile(0.5, [(0.1, 0), (0.2, 80), (INF, 100)])   # 0.1625
    d = quantile_delta(spec, base)
    assert d.delta == pytest.approx(0.0125) and d.kind == "exact"
    assert not d.resolved
