"""latency.Histograms: one side's bins summed per time bin on its main layout."""

import math

import numpy as np

from backend.db.queries import HistogramBin
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
