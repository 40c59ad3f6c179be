"""Vectorised series math: the same sums and ratios as SQL's `sum` and the scalar domain functions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backend.domain import acceptance as acc
from backend.domain import gridsum

NAN = math.nan


def _sums(ends, values, grid, keys=None, n_keys=1):
    keys = np.zeros(len(ends), np.int64) if keys is None else np.asarray(keys, np.int64)
    parts = gridsum.grain_sums(keys, np.asarray(ends, np.int64), np.asarray(values, float), n_keys=n_keys, grid=grid)
    return gridsum.point_sums(parts, grid)


def test_points_cover_right_closed_intervals_and_empty_is_nan():
    grid = gridsum.TimeGrid(first=300, step=300, span=300, count=3)  # (0,300], (300,600], (600,900]
    out = _sums([60, 300, 660, 900, 960, 0], [1, 2, 4, 8, 100, 100], grid)[0]
    assert out[0] == 3 and math.isnan(out[1]) and out[2] == 12  # 960 and 0 lie outside (0, 900]


def test_nan_values_are_not_reported_and_a_point_of_only_nan_is_undefined():
    grid = gridsum.TimeGrid(first=120, step=60, span=60, count=2)
    out = _sums([120, 120, 180], [NAN, 5, NAN], grid)[0]
    assert out[0] == 5 and math.isnan(out[1])


def test_rolling_window_sums_trailing_grains():  # sliding windows: tests/domain/test_gridsum_windows.py
    rng = np.random.default_rng(1)
    ends = np.arange(60, 6001, 60)
    vals = rng.integers(0, 1000, len(ends)).astype(float)
    vals[::7] = NAN
    grid = gridsum.TimeGrid(first=1200, step=300, span=1020, count=16)  # grain gcd(300, 1020) = 60
    out = _sums(ends, vals, grid)[0]
    for i, t in enumerate(grid.times()):
        window = [v for e, v in zip(ends, vals) if t - 1020 < e <= t and not math.isnan(v)]
        assert out[i] == (sum(window) if window else pytest.approx(NAN, nan_ok=True))


def test_keys_are_kept_apart_and_groups_add_them():
    grid = gridsum.TimeGrid(first=60, step=60, span=60, count=2)
    parts = gridsum.grain_sums(np.array([0, 1, 1]), np.array([60, 60, 120]), np.array([1.0, 2.0, 4.0]),
                               n_keys=2, grid=grid)
    per_key = gridsum.point_sums(parts, grid)
    assert per_key[0][0] == 1 and math.isnan(per_key[0][1]) and per_key[1].tolist() == [2, 4]
    both = gridsum.point_sums(gridsum.combine(parts, [[0, 1], [1], []]), grid)
    assert both[0].tolist() == [3, 4] and both[1].tolist() == [2, 4] and np.isnan(both[2]).all()


CASES = [(0.9, 1.0), (0.0, 5.0), (3.0, 0.0), (None, 4.0), (4.0, None), (6.0, 5.0), (NAN, 1.0), (1.0, NAN)]


@pytest.mark.parametrize("a,d", CASES)
def test_ratios_match_the_scalar_functions(a, d):
    va = np.array([NAN if a is None else a])
    vd = np.array([NAN if d is None else d])
    for vec, scalar in ((gridsum.acceptance_rate(va, vd), acc.acceptance_rate(a, d)),
                        (gridsum.mean_acceptance_length(va, vd), acc.mean_acceptance_length(a, d)),
                        (gridsum.seed_alpha(va, vd, 3), acc.seed_alpha(a, d, 3))):
        assert (scalar is None and math.isnan(vec[0])) or vec[0] == scalar
