import math

import numpy as np
import pytest

from backend.domain import resample
from backend.domain.verdict import latency_verdict, latency_verdicts

FINITE = [round(0.005 * i, 3) for i in range(1, 41)]  # 5 ms buckets up to 200 ms
BOUNDS = FINITE + [math.inf]
MEDIAN = 0.05


def _rows(seed, n_time=600, per_bucket=20, scale=1.0, transform=None):
    """Per-time-bucket cumulative histogram increases of log-normal latencies around 50 ms."""
    rng = np.random.default_rng(seed)
    x = rng.lognormal(math.log(MEDIAN), 0.3, size=(n_time, per_bucket)) * scale
    if transform is not None:
        x = transform(x)
    counts = (x[:, :, None] <= np.asarray(FINITE)[None, None, :]).sum(axis=1)
    return np.concatenate([counts, np.full((n_time, 1), per_bucket)], axis=1).astype(float)


BASE = _rows(1)


def test_identical_distributions_no_significant_change():
    for seed in (2, 3, 4):
        v = latency_verdict(_rows(seed), BASE, BOUNDS, 0.99)
        assert v.verdict in ("no-significant-change", "unresolved"), v.reason
        assert v.delta_low < 0 < v.delta_high  # the true delta may be either sign
    # the same data: one bucket, so the order is below the resolution - never "no change" nor "better"
    same = latency_verdict(BASE, BASE, BOUNDS, 0.99)
    assert same.verdict == "unresolved" and same.statistic == 0.0 and same.tail_shift == "none"
    assert same.spec_exceedance == same.base_exceedance


def test_thirty_percent_p99_regression_is_worse():
    v = latency_verdict(_rows(5, scale=1.3), BASE, BOUNDS, 0.99)
    assert v.verdict == "worse", v.reason
    assert v.statistic == pytest.approx(0.3 * v.base_value, rel=0.25)
    assert 0 <= v.delta_low <= v.statistic <= v.delta_high
    assert v.spec_exceedance_low > 0.01 >= v.base_exceedance_high
    assert v.resolved and v.resolution == pytest.approx(0.005)
    assert (v.n_spec, v.n_base, v.t_spec, v.t_base) == (12000, 12000, 600, 600)


def test_widened_tail_same_median_is_worse_at_p99_only():
    def widen(x):
        return np.where(x > MEDIAN, MEDIAN + (x - MEDIAN) * 1.6, x)
    spec = _rows(6, transform=widen)
    p99 = latency_verdict(spec, BASE, BOUNDS, 0.99)
    assert p99.verdict == "worse", p99.reason
    p50 = latency_verdict(spec, BASE, BOUNDS, 0.5)
    assert p50.verdict == "unresolved" and p50.tail_shift == "none", p50.reason


def test_improvement_is_better():
    v = latency_verdict(_rows(7, scale=0.75), BASE, BOUNDS, 0.99)
    assert v.verdict == "better", v.reason
    assert v.delta_high <= 0 and v.delta_low < 0


def test_ten_samples_is_inconclusive():
    v = latency_verdict(_rows(8, n_time=10, per_bucket=1, scale=2.0), BASE, BOUNDS, 0.99)
    assert v.verdict == "inconclusive"
    assert v.n_spec == 10 and "too little data" in v.reason


def test_few_time_buckets_is_inconclusive_even_with_many_observations():
    v = latency_verdict(_rows(9, n_time=5, per_bucket=2000, scale=1.5), BASE, BOUNDS, 0.99)
    assert v.n_spec == 10000 and v.verdict == "inconclusive"
    assert "time buckets" in v.reason


def test_change_below_resolution_is_never_significant():
    coarse = [0.1, 0.2, math.inf]

    def coarse_rows(seed, scale):
        fine = _rows(seed, scale=scale)
        idx = [FINITE.index(0.1), FINITE.index(0.2), len(FINITE)]
        return fine[:, idx]
    # 4 % slower, many samples: both medians in one 100 ms bucket, so the order is unresolved; the share
    # above the bucket's edge shows the tail moved
    v = latency_verdict(coarse_rows(10, 1.04), coarse_rows(1, 1.0), coarse, 0.5)
    assert v.verdict == "unresolved" and v.tail_shift == "heavier", v.reason
    assert v.resolution == pytest.approx(0.1) and not v.resolved
    assert (v.delta_low, v.delta_high) == (pytest.approx(-0.1), pytest.approx(0.1))


def test_deterministic_for_a_seed():
    spec = _rows(11, scale=1.05)
    a = latency_verdict(spec, BASE, BOUNDS, 0.99, seed=42)
    b = latency_verdict(spec, BASE, BOUNDS, 0.99, seed=42)
    c = latency_verdict(spec, BASE, BOUNDS, 0.99, seed=43)
    assert a == b
    assert (a.spec_exceedance_low, a.spec_exceedance_high) != (c.spec_exceedance_low, c.spec_exceedance_high)


def test_spec_in_inf_bucket_can_be_worse_but_never_better():
    spec = _rows(12, scale=3.0)  # P99 beyond 200 ms -> +Inf bucket
    v = latency_verdict(spec, BASE, BOUNDS, 0.99)
    assert v.spec_lower_bound and v.verdict == "worse"
    rev = latency_verdict(BASE, spec, BOUNDS, 0.99)
    assert rev.base_lower_bound and rev.verdict == "better"  # clipped baseline only understates the gain
    both = latency_verdict(spec, spec, BOUNDS, 0.99)
    assert both.verdict == "inconclusive"


def test_missing_time_buckets_are_dropped_and_bounds_without_inf_accepted():
    spec = _rows(13, scale=1.3)
    with_gap = np.vstack([spec, np.full((1, spec.shape[1]), np.nan)])
    v = latency_verdict(with_gap, BASE, FINITE, 0.99)  # +Inf appended to the layout
    assert v.t_spec == 600 and v.verdict == "worse"


def test_bad_input_raises():
    with pytest.raises(ValueError):
        latency_verdict(BASE, BASE, BOUNDS, 1.0)
    with pytest.raises(ValueError):
        latency_verdict(BASE[:, :5], BASE, BOUNDS, 0.99)
    with pytest.raises(ValueError):
        latency_verdict(BASE, BASE, list(reversed(BOUNDS)), 0.99)
    with pytest.raises(ValueError):
        latency_verdict(-BASE, BASE, BOUNDS, 0.99)


def test_bootstrap_weights_are_drawn_once_per_shape_with_the_same_verdicts(monkeypatch):
    """A fleet's verdicts share one weight draw per shape (the cache); every verdict is the one fresh
    draws give, the kept weights are read-only, and shapes too large to keep are drawn each time."""
    resample._cached_weights.cache_clear()
    base, spec, other = _rows(1, n_time=300), _rows(2, n_time=300), _rows(7, n_time=300, scale=1.3)
    first = latency_verdict(spec, base, BOUNDS, 0.99, seed=5)
    second = latency_verdict(other, base, BOUNDS, 0.99, seed=5)
    info = resample._cached_weights.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    assert second.verdict == "worse" and first.verdict == "no-significant-change"
    monkeypatch.setattr(resample, "CACHED_CELLS", 0)  # nothing kept: every call draws anew
    assert latency_verdict(spec, base, BOUNDS, 0.99, seed=5) == first
    assert latency_verdict(other, base, BOUNDS, 0.99, seed=5) == second
    assert resample._cached_weights.cache_info().misses == 1
    monkeypatch.undo()
    w_s, w_b = resample.resample_weights(5, 300, 300, 1000)
    fresh = resample._draw_weights(5, 300, 300, 1000)
    assert np.array_equal(w_s, fresh[0]) and np.array_equal(w_b, fresh[1]) and not np.array_equal(w_s, w_b)
    assert w_s.shape == (1000, 300) and (w_s.sum(axis=1) == 300).all()
    with pytest.raises(ValueError, match="read-only"):
        w_s[0, 0] = 99.0


def test_several_quantiles_at_once_are_the_verdicts_one_at_a_time():
    """latency_verdicts draws the bootstrap once for all quantiles: each verdict, CI included, is the one
    latency_verdict gives alone (the same seeded draws), not one from a generator already advanced."""
    spec = _rows(7, scale=1.1)
    qs = (0.5, 0.9, 0.99)
    together = latency_verdicts(spec, BASE, BOUNDS, qs, seed=3)
    alone = [latency_verdict(spec, BASE, BOUNDS, q, seed=3) for q in qs]
    assert together == alone
    assert [v.q for v in together] == list(qs) and all(v.spec_exceedance_low is not None for v in together)
    again = latency_verdict(spec, BASE, BOUNDS, 0.5, seed=4)
    assert (together[0].spec_exceedance_low, together[0].spec_exceedance_high) != (
        again.spec_exceedance_low, again.spec_exceedance_high)  # the seed matters
    with pytest.raises(ValueError, match="q must be in"):
        latency_verdicts(spec, BASE, BOUNDS, (0.5, 1.0))


def test_linear_quantiles_are_numpys_own_floats() -> None:
    """The bootstrap's percentile shortcut gives np.quantile's exact floats (ties, tiny and huge n, 0 and 1)."""
    rng = np.random.default_rng(7)
    for trial in range(3000):
        n = int(rng.integers(1, 1500))
        x = [rng.normal(size=n), rng.integers(0, 4, n) / 7.0, rng.random(n) * 1e-3 - 5e-4][trial % 3]
        probs = np.array([0.025, 0.975]) if trial % 2 else np.array([0.0, rng.random(), 1.0])
        assert np.array_equal(resample.linear_quantiles(x, probs), np.quantile(x, probs)), (n, probs)


def test_running_max_equals_accumulate() -> None:
    rng = np.random.default_rng(3)
    for shape in ((1000, 20), (5, 2), (1, 1), (3, 0)):
        a = rng.normal(size=shape)
        assert np.array_equal(resample.running_max(a), np.maximum.accumulate(a, axis=1))


def test_resampled_columns_equal_the_whole_matrix_after_its_running_maximum() -> None:
    """A verdict reads a column of each side's resampled histograms at a time: for cumulative rows a
    matrix-vector product, for a non-monotone side the whole product and its running maximum."""
    rng = np.random.default_rng(11)
    mono = np.cumsum(rng.integers(0, 5, size=(90, 12)).astype(float) / 3.0, axis=1)
    bumpy = mono.copy()
    bumpy[:, 4] = bumpy[:, 5] + 1.0  # a count above the next le's in every time bin
    shared = resample.Resampled(mono, bumpy, seed=5, n_boot=400)
    w_s, w_b = resample.resample_weights(5, 90, 90, 400)
    whole_s, whole_b = resample.running_max(w_s @ mono), resample.running_max(w_b @ bumpy)
    for j in (0, 4, 5, 11, -1):
        assert np.allclose(shared.column(0, j), whole_s[:, j], rtol=1e-13, atol=0)
        assert np.array_equal(shared.column(1, j), whole_b[:, j])
    assert (whole_b[:, 5] >= whole_b[:, 4]).all() and not ((w_b @ bumpy)[:, 5] >= (w_b @ bumpy)[:, 4]).all()
