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


def _flat(runs):
    """The runs as flat entries (key, end, value): what grain_sums would be given without them."""
    keys, ends, vals = [], [], []
    for key, last_end, values, n in ((r.key, r.last_end, r.values, r.n) for r in runs):
        for r, e in enumerate(last_end):
            for j in range(n):
                keys.append(key)
                ends.append(int(e) - (n - 1 - j) * 60)
                vals.append(values[r * n + j])
    return np.asarray(keys, np.int64), np.asarray(ends, np.int64), np.asarray(vals, float)


@pytest.mark.parametrize("first", [600, 630])  # grains aligned with the slots, and straddling them
def test_runs_sum_as_the_same_entries_given_flat(first):
    """Back-to-back rows (one slice), rows with a gap, rows running off both ends of the grid, a NaN slot,
    an unknown key, and flat entries beside them (two in one grain): placed whole, they sum exactly as
    all the entries given flat do."""
    grid = gridsum.TimeGrid(first=first, step=60, span=60, count=30)  # grains end at first .. first + 29 min
    rng = np.random.default_rng(7)
    runs = [
        gridsum.Run(0, np.array([840, 1140, 1440]), rng.integers(0, 9, 15).astype(float), 5),  # one slice
        gridsum.Run(1, np.array([900, 1500]), rng.integers(0, 9, 10).astype(float), 5),  # a gap between rows
        gridsum.Run(2, np.array([600, 2700]), rng.integers(0, 9, 10).astype(float), 5),  # off both ends
        gridsum.Run(3, np.array([], np.int64), np.array([]), 5),  # no rows
        gridsum.Run(7, np.array([900]), np.ones(5), 5),  # a key outside n_keys is ignored
    ]
    runs[1].values[3] = NAN
    fk, fe, fv = np.array([1, 1, 3, 0]), np.array([1200, 1170, 660, 2000]), np.array([4.0, 5.0, 6.0, NAN])
    rk, r_e, rv = _flat(runs[:4])
    keys, ends, vals = np.concatenate([rk, fk]), np.concatenate([r_e, fe]), np.concatenate([rv, fv])
    want = gridsum.grain_sums(keys, ends, vals, n_keys=4, grid=grid)
    got = gridsum.grain_sums(fk, fe, fv, n_keys=4, grid=grid, runs=runs)
    assert np.array_equal(got.sums, want.sums) and np.array_equal(got.counts, want.counts > 0)
    assert got.counts.dtype == bool  # only whether a cell reported is kept (GrainSums)
    flat_cells = set(gridsum.grain_index(fk[:2], fe[:2], n_keys=4, grid=grid).tolist())  # one or two, by `first`
    assert got.counts[0].sum() == 15 and got.counts[1].sum() == 9 + len(flat_cells)  # the NaN slot is not counted
    assert np.array_equal(gridsum.point_sums(got, grid), gridsum.point_sums(want, grid), equal_nan=True)


def test_runs_alone_count_as_booleans_and_sum_like_integers():
    grid = gridsum.TimeGrid(first=120, step=60, span=60, count=2)
    got = gridsum.grain_sums(np.array([], np.int64), np.array([], np.int64), np.array([]), n_keys=1, grid=grid,
                             runs=[gridsum.Run(0, np.array([180]), np.array([3.0, NAN]), 2)])
    assert got.counts.dtype == bool
    sums = gridsum.point_sums(got, grid)[0]
    assert sums[0] == 3.0 and math.isnan(sums[1])


def test_combine_adds_rows_per_group_and_passes_one_series_per_key_through():
    parts = gridsum.GrainSums(np.array([[1.0, 2.0], [10.0, 20.0], [100.0, 200.0]]),
                              np.array([[1, 1], [1, 0], [0, 1]]))
    same = gridsum.combine(parts, [[0], [1], [2]])
    assert same.sums.tolist() == parts.sums.tolist() and same.counts.tolist() == parts.counts.tolist()
    swapped = gridsum.combine(parts, [[1], [0], [2]])  # one key per group, but not in key order
    assert swapped.sums.tolist() == [[10.0, 20.0], [1.0, 2.0], [100.0, 200.0]]
    assert swapped.counts.tolist() == [[1, 0], [1, 1], [0, 1]]
    fewer = gridsum.combine(parts, [[0], [1]])  # a key left out
    assert fewer.sums.tolist() == [[1.0, 2.0], [10.0, 20.0]]
    mixed = gridsum.combine(parts, [[0, 2], [], [1, 2]])
    assert mixed.sums.tolist() == [[101.0, 202.0], [0.0, 0.0], [110.0, 220.0]]
    assert mixed.counts.tolist() == [[True, True], [False, False], [True, True]]  # reported: any member did
