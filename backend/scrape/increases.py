"""One target's scrapes in a window as a matrix (a column per series) -> per-bucket values: counter
increases across resets, dips and series that appear (domain.buckets), gauge means."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.domain.buckets import (
    RawSample,
    appeared_from,
    bucket_increases,
    bucket_means,
    bucket_start,
    ran_on,
    split_increment,
    split_shares,
)
from backend.domain.families import RESTART_SERIES_ALL
from backend.scrape.layout import LabelsKey, Layout


@dataclass
class Columns:
    """One target's scrapes in a window as a matrix: rows in time order, a column per series (the union of
    its layouts' series, in order of first appearance)."""

    keys: list[tuple[str, LabelsKey]]
    ts: list[float]
    values: np.ndarray  # rows x series, NaN where a scrape lacks the series
    present: np.ndarray  # rows x series
    created: np.ndarray  # rows x series, the series' _created value (NaN where it has none)
    has_created: np.ndarray  # rows x series
    layout: Layout | None = None  # the one layout of every row, if so (then the columns are its series)


def bucket_values(c: Columns, kinds: list[str], *, width: int, first_bucket: int, last_bucket: int,
                  max_gap: float, dip_tolerance: float,
                  split_within: float | None = None) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], dict[int, Any]]:
    """(fast, slow): per bucket, (values, has): a value per column and whether the column has one there, for
    the columns done together; and for each other column its Increases (counters, histograms) or bucket
    means (gauges). All as domain.buckets.bucket_increases / bucket_means give from the column's samples.

    Columns present in every row (nearly all of them) are done together: a gauge's mean per bucket, and a
    counter's increments when it has a steady `_created` and no drop between consecutive samples: the
    differences, split between the buckets each interval overlaps (domain.buckets.split_shares, the same
    parts as sample by sample) and summed per bucket in time order. The others (a drop, a restart, a series
    that comes or goes) go sample by sample."""
    n, m = c.values.shape
    starts = [bucket_start(t, width) for t in c.ts]
    pairs = [k for k in range(1, n) if c.ts[k] - c.ts[k - 1] <= max_gap]  # the others yield no increment
    gauge = np.array([k == "gauge" for k in kinds], dtype=bool)
    present = c.present.all(axis=0)
    if pairs:
        rows = np.array(pairs)
        diff = c.values[rows] - c.values[rows - 1]
        changed = (c.has_created[rows] & c.has_created[rows - 1]
                   & (c.created[rows] != c.created[rows - 1])).any(axis=0)
        counting = present & (diff >= 0).all(axis=0) & ~changed & ~gauge
    else:
        counting = present & ~gauge
    averaging = present & gauge
    fast: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i, k in enumerate(pairs):
        shares = ([(starts[k], None)] if starts[k - 1] == starts[k]
                  else split_shares(c.ts[k - 1], c.ts[k], width, split_within=split_within))
        for b, part in split_increment(diff[i], shares):
            if first_bucket <= b <= last_bucket:
                got = fast.get(b)
                fast[b] = (np.zeros(m) + part, counting) if got is None else (got[0] + part, counting)
    if averaging.any():
        cols = np.flatnonzero(averaging)
        means: dict[int, list] = {}
        for k in range(n):
            b = starts[k]
            if first_bucket <= b <= last_bucket:
                acc = means.setdefault(b, [np.zeros(len(cols)), 0])
                acc[0] = acc[0] + c.values[k, cols]
                acc[1] += 1
        for b, (total, count) in means.items():
            values, has = fast.get(b, (np.zeros(m), np.zeros(m, dtype=bool)))
            values = values.copy()
            values[cols] = total / count
            fast[b] = (values, has | averaging)
    slow: dict[int, Any] = {}
    for j in np.flatnonzero(~(counting | averaging)).tolist():
        samples = [_sample(c, k, j) for k in range(n) if c.present[k, j]]
        if kinds[j] == "gauge":
            slow[j] = bucket_means(samples, width=width, first_bucket=first_bucket, last_bucket=last_bucket)
        else:
            zero = _appeared(c, j, max_gap=max_gap, dip_tolerance=dip_tolerance)
            if zero is not None:
                samples.insert(0, zero)
            slow[j] = bucket_increases(samples, width=width, max_gap=max_gap, first_bucket=first_bucket,
                                       last_bucket=last_bucket, dip_tolerance=dip_tolerance,
                                       split_within=split_within)
    return fast, slow


def _sample(c: Columns, k: int, j: int) -> RawSample:
    return RawSample(c.ts[k], float(c.values[k, j]), float(c.created[k, j]) if c.has_created[k, j] else None)


def _appeared(c: Columns, j: int, *, max_gap: float, dip_tolerance: float) -> RawSample | None:
    """The zero a counter column started from when it first appears after the target's first scrape in the
    window while the target ran on (domain.buckets.ran_on) between that scrape and the one before: every
    restart series of the target whose labels the column's include (its engine's output-token counter, of
    the same model and data-parallel engine) is in both scrapes and shows no restart. Then the column's first
    value is an increase from 0 (domain.buckets.appeared_from), not a base: llama-server writes its
    per-position counters only once a request that drafted has finished; a labelled child a client library
    creates on its first increment appears the same way. None otherwise (a target's first scrape, an engine
    that joins or restarts, a restart series that itself appears: no evidence, the first value is a base)."""
    rows = np.flatnonzero(c.present[:, j])
    k = int(rows[0]) if rows.size else 0
    if k == 0:
        return None
    labels = set(c.keys[j][1])
    restart = [r for r, (name, lkey) in enumerate(c.keys) if name in RESTART_SERIES_ALL and set(lkey) <= labels]
    if not restart or not all(c.present[k - 1, r] and c.present[k, r] and ran_on(
            _sample(c, k - 1, r), _sample(c, k, r), max_gap=max_gap, dip_tolerance=dip_tolerance) for r in restart):
        return None
    return appeared_from(_sample(c, k, j), c.ts[k - 1])
