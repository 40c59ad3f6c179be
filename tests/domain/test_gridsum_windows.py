"""Sliding and tumbling window sums (gridsum._windows, the block prefix/suffix method) against a plain sum
of each window's own grains: exact for integers, within rounding of a sequential sum for floats."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backend.domain import gridsum

G = 60  # seconds per grain when width and stride are coprime

# (width, stride, count) in grains: sliding (width > stride, multiple or not), gaps (width < stride),
# width 1, tumbling, one point, windows longer than several strides, widths that do or do not fill the last block
SHAPES = [(168, 1, 720), (7, 3, 40), (3, 7, 20), (1, 3, 17), (1, 1, 9), (5, 5, 8), (2, 1, 1), (50, 7, 1),
          (50, 7, 2), (50, 7, 9), (13, 1, 100), (11, 4, 33), (4, 11, 5), (6, 4, 10), (12, 8, 7), (9, 3, 12),
          (3, 2, 1), (1000, 1, 3), (17, 16, 30), (16, 17, 30), (2, 3, 1)]


def _grid(width: int, stride: int, count: int) -> gridsum.TimeGrid:
    return gridsum.TimeGrid(first=10_000 * G, step=stride * G, span=width * G, count=count)


def _reference(x: np.ndarray, grid: gridsum.TimeGrid, add) -> list[list]:
    """Point p covers grains (p * step, p * step + span] / grain - 1, i.e. [p * stride, p * stride + width)."""
    width, stride = grid.span // grid.grain, grid.step // grid.grain
    return [[add(row[p * stride: p * stride + width].tolist()) for p in range(grid.count)] for row in x]


@pytest.mark.parametrize("width,stride,count", SHAPES)
def test_integer_counts_are_exact_and_stay_int64(width, stride, count):
    grid = _grid(width, stride, count)
    rng = np.random.default_rng(width * 1000 + stride * 10 + count)
    x = rng.integers(-(2**40), 2**40, size=(3, grid.grains), dtype=np.int64)  # signed: no reliance on >= 0
    out = gridsum._windows(x, grid)
    assert out.dtype == np.int64 and out.shape == (3, count)
    assert out.tolist() == _reference(x, grid, sum)


@pytest.mark.parametrize("width,stride,count", SHAPES)
def test_integer_valued_floats_are_exact(width, stride, count):
    grid = _grid(width, stride, count)
    rng = np.random.default_rng(count * 7 + width)
    x = rng.integers(0, 2**30, size=(4, grid.grains)).astype(np.float64)
    x[:, ::5] = 0.0
    out = gridsum._windows(x, grid)
    assert out.dtype == np.float64
    assert out.tolist() == _reference(x, grid, sum)


@pytest.mark.parametrize("width,stride,count", SHAPES)
def test_mixed_magnitudes_within_1e12_of_the_exact_window_sum(width, stride, count):
    grid = _grid(width, stride, count)
    rng = np.random.default_rng(width + 31 * stride + 977 * count)
    big = rng.random((5, grid.grains)) < 0.3
    x = np.where(big, rng.random((5, grid.grains)) * 1e12, rng.random((5, grid.grains)) * 1e-3)
    x[0] = 0.0
    x[1, ::3] = 0.0
    x[2] = rng.random(grid.grains) * 1e-3  # only small terms
    out = gridsum._windows(x, grid)
    ref = np.array(_reference(x, grid, math.fsum))
    assert out.dtype == np.float64 and out.shape == ref.shape
    assert np.all(np.abs(out - ref) <= 1e-12 * np.abs(ref))


@pytest.mark.parametrize("width,stride,count", SHAPES)
def test_signed_floats_within_rounding_of_a_sequential_sum(width, stride, count):
    grid = _grid(width, stride, count)
    rng = np.random.default_rng(3 * width + stride + count)
    x = rng.standard_normal((3, grid.grains)) * 10.0 ** rng.integers(-3, 13, (3, grid.grains))
    out = gridsum._windows(x, grid)
    ref = np.array(_reference(x, grid, math.fsum))
    mag = np.array(_reference(np.abs(x), grid, math.fsum))
    assert np.all(np.abs(out - ref) <= width * np.finfo(float).eps * mag)


def test_a_window_adds_only_its_own_grains():
    """No running difference: a huge or infinite grain elsewhere leaves other windows' sums untouched."""
    grid = _grid(24, 1, 100)
    x = np.ones((1, grid.grains))
    x[0, 60] = np.inf
    x[0, 10] = 1e300
    out = gridsum._windows(x, grid)[0]
    inside = (np.arange(100) <= 60) & (np.arange(100) + 24 > 60)
    assert np.isinf(out[inside]).all()
    rest = ~inside & ~((np.arange(100) <= 10) & (np.arange(100) + 24 > 10))
    assert rest.sum() > 30 and (out[rest] == 24.0).all()


def test_extra_columns_are_ignored_and_too_few_refused():
    grid = _grid(7, 3, 10)
    rng = np.random.default_rng(5)
    x = rng.integers(0, 100, size=(2, grid.grains + 11), dtype=np.int64)
    assert gridsum._windows(x, grid).tolist() == _reference(x, grid, sum)
    with pytest.raises(ValueError):
        gridsum._windows(x[:, : grid.grains - 1], grid)


@pytest.mark.parametrize("width,stride", [(7, 3), (5, 5)])
def test_no_points_and_no_keys(width, stride):
    empty = _grid(width, stride, 0)
    for dtype in (np.int64, np.float64):
        out = gridsum._windows(np.zeros((3, 0), dtype), empty)
        assert out.shape == (3, 0) and out.dtype == dtype
    grid = _grid(width, stride, 4)
    for dtype in (np.int64, np.float64):
        out = gridsum._windows(np.zeros((0, grid.grains), dtype), grid)
        assert out.shape == (0, 4) and out.dtype == dtype


def test_random_shapes_against_the_reference():
    rng = np.random.default_rng(2024)
    for _ in range(300):
        width, stride, count = (int(v) for v in rng.integers(1, 40, 3))
        grid = _grid(width, stride, count)
        keys = int(rng.integers(1, 4))
        x = rng.integers(0, 1000, size=(keys, grid.grains), dtype=np.int64)
        assert gridsum._windows(x, grid).tolist() == _reference(x, grid, sum), (width, stride, count)
        f = rng.random((keys, grid.grains)) * 10.0 ** rng.integers(-3, 13, (keys, grid.grains))
        out, ref = gridsum._windows(f, grid), np.array(_reference(f, grid, math.fsum))
        assert np.all(np.abs(out - ref) <= 1e-12 * ref), (width, stride, count)


def test_point_sums_seven_day_rolling_hourly_matches_raw_entries():
    """The hot read end to end: hourly ends, a 7-day window every hour, NaN where nothing was reported."""
    grid = gridsum.TimeGrid(first=3600 * 1000, step=3600, span=7 * 86400, count=72)
    rng = np.random.default_rng(9)
    ends = np.repeat(np.arange(grid.start + 3600, grid.last + 1, 3600), 2)
    keys = np.tile(np.array([0, 1]), len(ends) // 2)
    vals = rng.random(len(ends)) * 1e9
    vals[keys == 1] = np.nan
    vals[(keys == 0) & (ends > grid.last - 3 * 86400)] = np.nan
    parts = gridsum.grain_sums(keys, ends, vals, n_keys=2, grid=grid)
    out = gridsum.point_sums(parts, grid)
    assert np.isnan(out[1]).all()
    for i, t in enumerate(grid.times()):
        window = [v for k, e, v in zip(keys, ends, vals) if k == 0 and t - grid.span < e <= t and not math.isnan(v)]
        assert out[0, i] == pytest.approx(math.fsum(window), rel=1e-13)


@pytest.mark.parametrize("step,span,count", [(3600, 7 * 86400, 720), (60, 60, 1000), (300, 300, 40), (120, 600, 50),
                                             (600, 120, 30), (60, 3600, 5), (3600, 3600, 1)])
def test_reported_is_whether_a_window_holds_any_count(step, span, count) -> None:
    """gridsum._reported against looking at each window's grains one by one: a point is reported iff some
    grain of [p * stride, p * stride + width) counted a value (counts above 1 too); sparse and empty rows."""
    grid = gridsum.TimeGrid(first=0, step=step, span=span, count=count)
    rng = np.random.default_rng(step + span + count)
    seen = rng.random((6, grid.grains)) < np.array([[0.0], [0.001], [0.01], [0.2], [0.9], [1.0]])
    counts = seen * rng.integers(1, 4, size=seen.shape)
    got = gridsum._reported(counts, grid)
    assert got.dtype == bool and got.shape == (6, count)
    width, stride = span // grid.grain, step // grid.grain
    want = [[bool(counts[k, p * stride:p * stride + width].any()) for p in range(count)] for k in range(6)]
    assert got.tolist() == want
    assert not got[0].any() and got[5].all()


def test_whole_numbers_take_one_exact_running_sum_and_round_once():
    """Whole-number floats are summed as int64 (a difference of running sums), so a window past 2**53 is
    the exact sum rounded once: 2**53 + 1 + 1 is 2**53 + 2, where adding in float gives 2**53 twice."""
    grid = _grid(3, 1, 4)
    x = np.array([[2.0**53, 1, 1, 1, 1, 1], [-5, 3, -2, 7, 0, -1]], dtype=np.float64)
    out = gridsum._windows(x, grid)
    assert out.dtype == np.float64
    assert out.tolist() == [[2.0**53 + 2, 3.0, 3.0, 3.0], [-4.0, 8.0, 5.0, 6.0]]


@pytest.mark.parametrize("row,integral", [([1.0, 2.0, 3.0], True), ([1.0, 2.5, 3.0], False),
                                          ([1.0, np.nan, 3.0], False), ([1.0, np.inf, 3.0], False),
                                          ([2.0**61, 2.0**61, 0.0], False), ([2.0**61, -(2.0**60), 0.0], True)])
def test_only_whole_numbers_that_cannot_overflow_are_summed_as_integers(row, integral):
    whole = gridsum._as_integers(np.array([row]))
    assert (whole is not None) == integral
    if integral:
        assert whole.dtype == np.int64 and whole.tolist() == [[int(v) for v in row]]
    # the first row only screens: a later row decides as much as the first
    assert (gridsum._as_integers(np.array([[1.0, 2.0, 3.0], row])) is not None) == integral
    assert gridsum._as_integers(np.array([row, [1.0, 2.5, 3.0]])) is None


def test_huge_whole_numbers_do_not_wrap():
    """Magnitudes adding up past 2**62 would overflow int64 running sums: they take the float method."""
    grid = _grid(2, 1, 3)
    x = np.full((1, grid.grains), 2.0**62)
    assert gridsum._windows(x, grid).tolist() == [[2.0**63] * 3]
