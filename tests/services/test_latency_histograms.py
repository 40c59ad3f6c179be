"""latency.Histograms: one side's bins summed per time bin on its main layout."""

import math

import numpy as np

from backend.db.queries import HistogramBin, HistogramBlock
from backend.services.latency import Histograms


def test_bins_are_summed_per_time_bin_in_time_order_on_the_main_layout():
    bins = [
        HistogramBin(pool_id=1, layout_id=7, bin_end=120, counts=[1.0, 3.0, 4.0], sum=0.4, count=4.0),
        HistogramBin(pool_id=2, layout_id=7, bin_end=60, counts=[0.1, 0.2, 0.7], sum=0.07, count=0.7),
        HistogramBin(pool_id=1, layout_id=7, bin_end=60, counts=[2.0, 2.0, 5.0], sum=0.5, count=5.0),
        HistogramBin(pool_id=3, layout_id=9, bin_end=60, counts=[1.0, 1.0], sum=0.1, count=1.0),  # a minor layout
    ]
    h = Histograms(bins)
    assert h.layouts == [7, 9] and h.layout_id == 7
    # bin 60: pool 2 then pool 1, added in the order the bins came (0.1 + 2.0, ...); then bin 120
    assert np.array_equal(h.samples, np.array([[0.0 + 0.1 + 2.0, 0.0 + 0.2 + 2.0, 0.0 + 0.7 + 5.0],
                                               [1.0, 3.0, 4.0]]))
    assert h.counts == [math.fsum([2.1, 1.0]), math.fsum([2.2, 3.0]), math.fsum([5.7, 4.0])]
    assert h.sum == 0.4 + 0.07 + 0.5 and h.count == 4.0 + 0.7 + 5.0  # the minor layout is left out
    assert h.mean == h.sum / h.count


def test_no_bins_no_histogram():
    h = Histograms([])
    assert h.layout_id is None and h.counts is None and h.mean is None and len(h.samples) == 0


def test_sums_are_the_floats_of_adding_bin_after_bin():
    """Weights, _sum and _count are added one bin after the other, skipping NaN (no stored value), the same
    floats as a loop: a pairwise sum of these values would differ in the last bit."""
    rng = np.random.default_rng(5)
    for trial in range(200):
        blocks = []
        for pool in range(int(rng.integers(1, 4))):
            n = int(rng.integers(1, 40))
            counts = np.cumsum(rng.random((n, 3)) * 10.0 ** rng.integers(-3, 4), axis=1)
            sums, totals = rng.random(n) * 1e-3 + 0.1, counts[:, -1].copy()
            sums[rng.random(n) < 0.2] = np.nan
            totals[rng.random(n) < 0.2] = np.nan
            blocks.append(HistogramBlock(pool, 7, np.arange(n, dtype=np.int64) * 60, counts, sums, totals))
        h = Histograms(blocks)
        expect_sum = expect_count = None
        for blk in blocks:
            for x in blk.sums.tolist():
                if not math.isnan(x):
                    expect_sum = (expect_sum or 0.0) + x
            for x in blk.totals.tolist():
                if not math.isnan(x):
                    expect_count = (expect_count or 0.0) + x
        assert (h.sum, h.count) == (expect_sum, expect_count), trial
    # all NaN: no _sum stored, undefined (never 0)
    blk = HistogramBlock(1, 7, np.array([60]), np.array([[1.0, 2.0]]), np.array([np.nan]), np.array([np.nan]))
    assert (Histograms([blk]).sum, Histograms([blk]).count, Histograms([blk]).mean) == (None, None, None)


def test_the_main_layout_is_the_one_with_the_most_observations():
    a = HistogramBlock(1, 3, np.array([60, 120]), np.array([[1.0, 2.0], [1.0, 2.0]]), np.array([0.1, 0.1]),
                       np.array([2.0, 2.0]))
    b = HistogramBlock(2, 9, np.array([60]), np.array([[1.0, 5.0]]), np.array([0.5]), np.array([5.0]))
    empty = HistogramBlock(3, 4, np.array([60]), np.zeros((1, 0)), np.array([np.nan]), np.array([np.nan]))
    h = Histograms([a, b, empty])
    assert h.layouts == [9, 3, 4] and h.layout_id == 9 and (h.sum, h.count) == (0.5, 5.0)
