"""Counters summed on a time grid, then divided: the vectorised form of the series rules (spec-math §1, §7).

A grid is points t_i = first + i * step (i < count), each covering (t_i - span, t_i]. Values arrive as
flat arrays (one entry per bucket or hour, keyed by a small integer and the END of its interval), NaN
meaning "not reported". Sums follow SQL's `sum`: a point with no reported value is NaN (undefined,
never 0), a point with some is the sum of those. Ratios are taken of the sums, never averaged, and are
NaN where the scalar functions in backend.domain.acceptance give None (denominator 0 or undefined).

Summation: values are first added per grain of gcd(step, span) seconds; a point then adds its span/grain
grains. Tumbling windows (span == step) sum each point's grains directly. Sliding windows over whole
numbers (counters' increases are, when read straight from vLLM's /metrics; Prometheus's increase()
extrapolates them to fractions) take the difference of two running sums in int64: exact, and 2-3x faster
than the general method. Otherwise (fractions, NaN, infinities) sliding windows use the van
Herk / Gil-Werman block method: rows are cut into blocks of one window's width, each block gets its prefix
sums (left to right) and suffix sums (right to left), and a window is one block's suffix from its first
grain plus the next block's prefix up to its last grain (a block-aligned window is a whole block). Only
the window's own terms are ever added, and never subtracted (no running difference, so no cancellation
against the rest of the series): the rounding error is that of adding the window's terms in sequence, at
most ~(grains per point) x 1.1e-16 x the sum of their magnitudes; integer counts stay exact. Cost is
O(keys x grains) whatever the window width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import gcd

import numpy as np


@dataclass(frozen=True)
class TimeGrid:
    first: int
    step: int
    span: int
    count: int

    @property
    def grain(self) -> int:
        return gcd(self.step, self.span)

    @property
    def start(self) -> int:
        """Ends in (start, last] feed the grid."""
        return self.first - self.span

    @property
    def last(self) -> int:
        return self.first + (self.count - 1) * self.step

    @property
    def grains(self) -> int:
        return (self.last - self.start) // self.grain if self.count > 0 else 0

    def times(self) -> np.ndarray:
        return self.first + self.step * np.arange(self.count, dtype=np.int64)


@dataclass
class GrainSums:
    """Per key and grain: the sum of the reported values and how many were reported."""

    sums: np.ndarray  # (keys, grains)
    counts: np.ndarray  # (keys, grains), integers or booleans: only whether a cell's is > 0 is ever used


def grain_index(keys: np.ndarray, ends: np.ndarray, *, n_keys: int, grid: TimeGrid) -> np.ndarray:
    """Flat (key, grain) cell of each entry, -1 for entries outside (start, last] or with a bad key."""
    g, n = grid.grain, grid.grains
    gi = -((grid.start - ends) // g) - 1  # ceil((end - start) / g) - 1
    ok = (gi >= 0) & (gi < n) & (keys >= 0) & (keys < n_keys)
    return np.where(ok, keys * n + gi, -1)


def grain_sums(keys: np.ndarray, ends: np.ndarray, values: np.ndarray, *, n_keys: int, grid: TimeGrid,
               cells: np.ndarray | None = None, runs: Sequence[Run] = ()) -> GrainSums:
    """keys: 0 <= key < n_keys per entry; ends: unix seconds; entries outside (start, last] are ignored.
    cells: grain_index(keys, ends, ...) when several value columns share the same entries.
    runs: more entries, packed in runs of consecutive slots one grain wide (see Run), disjoint from the
    flat entries and from each other (each of their cells is filled once). They are placed whole, a run
    of rows back to back as one slice copy, and the flat entries added at their cells."""
    n = grid.grains
    size = n_keys * n
    cells = grain_index(keys, ends, n_keys=n_keys, grid=grid) if cells is None else cells
    present = (cells >= 0) & ~np.isnan(values)
    if present.all():  # the usual case: no copies of the entries that count
        idx, weights = cells, values
    else:
        idx, weights = cells[present], values[present]
    if not runs:
        sums = np.bincount(idx, weights=weights, minlength=size)[:size].reshape(n_keys, n)
        counts = np.bincount(idx, minlength=size)[:size].reshape(n_keys, n)
        return GrainSums(sums, counts)
    sums = _place(runs, n_keys=n_keys, grid=grid)
    unset = np.isnan(sums)
    counts = ~unset
    np.copyto(sums, 0.0, where=unset)  # not nan_to_num: it also scans for infinities (~0.7 ms a counter)
    if idx.size:  # the flat entries, summed per distinct cell (a grain may hold several)
        at, inverse = np.unique(idx, return_inverse=True)
        sums.reshape(-1)[at] += np.bincount(inverse, weights=weights)
        counts.reshape(-1)[at] = True  # only whether a cell reported matters (GrainSums)
    return GrainSums(sums, counts)


@dataclass(frozen=True)
class Run:
    """Rows of n values (values: rows * n, row-major; NaN = not reported) for one key, row r filling the n
    consecutive slots of one grain each that end at last_end[r] (placed by their END, like flat entries)."""

    key: int
    last_end: np.ndarray
    values: np.ndarray
    n: int


def _place(runs: Sequence[Run], *, n_keys: int, grid: TimeGrid) -> np.ndarray:
    """(keys, grains) values of the runs, NaN where none; slots outside (start, last] are dropped."""
    g, size = grid.grain, grid.grains
    dense = np.full((n_keys, size), np.nan)
    for r in runs:
        if not r.last_end.size or not 0 <= r.key < n_keys:
            continue
        last = -((grid.start - r.last_end) // g) - 1  # grain of each row's last slot
        lo, hi = int(last[0]) - (r.n - 1), int(last[-1]) + 1
        if lo >= 0 and hi <= size and (last.size == 1 or (np.diff(last) == r.n).all()):
            dense[r.key, lo:hi] = r.values
        else:
            cells = ((last - (r.n - 1))[:, None] + np.arange(r.n)).ravel()
            ok = (cells >= 0) & (cells < size)
            dense[r.key, cells[ok]] = r.values[ok]
    return dense


def combine(parts: GrainSums, groups: list[list[int]]) -> GrainSums:
    """Rows of `parts` added per group (a key may sit in several groups, e.g. a class and the mix). When
    group i is exactly key i for every key (one series per pool), `parts` is already the answer."""
    if len(groups) == parts.sums.shape[0] and all(g == [i] for i, g in enumerate(groups)):
        return parts
    n = parts.sums.shape[1]
    sums = np.zeros((len(groups), n))
    counts = np.zeros((len(groups), n), dtype=bool)
    for i, g in enumerate(groups):
        if g:
            sums[i] = parts.sums[g].sum(axis=0)
            np.any(parts.counts[g] > 0, axis=0, out=counts[i])
    return GrainSums(sums, counts)


def _geometry(x: np.ndarray, grid: TimeGrid) -> tuple[int, int, int, int]:
    """A grid's windows over the grains of x (keys, grains): (width, stride, points, n), point p covering
    grains [p * stride, p * stride + width) and the points n grains (== grid.grains); x must hold them."""
    width, stride, p = grid.span // grid.grain, grid.step // grid.grain, grid.count
    n = (p - 1) * stride + width
    if x.shape[1] < n:
        raise ValueError(f"{x.shape[1]} grains for {p} points of {width} grains every {stride}: need {n}")
    return width, stride, p, n


def _windows(x: np.ndarray, grid: TimeGrid) -> np.ndarray:
    """(keys, count): per row of x (keys, grains), point p sums grains [p * stride, p * stride + width)."""
    keys = x.shape[0]
    if grid.count <= 0:
        return np.zeros((keys, 0), dtype=x.dtype)
    width, stride, p, n = _geometry(x, grid)
    if width == stride:
        return x[:, :n].reshape(keys, p, width).sum(axis=2)
    starts = np.arange(p, dtype=np.int64) * stride
    whole = _as_integers(x[:, :n])
    if whole is not None:  # integer counts: one running sum, a window is the difference of two, exactly
        prefix = np.zeros((keys, n + 1), dtype=np.int64)
        np.cumsum(whole, axis=1, out=prefix[:, 1:])
        out = prefix.take(starts + width, axis=1) - prefix.take(starts, axis=1)
        return out if x.dtype == np.int64 else out.astype(x.dtype)
    blocks = -(-n // width)
    if blocks * width == n:
        y = x[:, :n].reshape(keys, blocks, width)
    else:  # the last block padded with zeros (never inside a window: windows end by grain n - 1)
        y = np.zeros((keys, blocks * width), dtype=x.dtype)
        y[:, :n] = x[:, :n]
        y = y.reshape(keys, blocks, width)
    # prefix[b * width + o]: grains b * width .. b * width + o of block b, added left to right
    prefix = np.cumsum(y, axis=2).reshape(keys, blocks * width)
    out = prefix.take(starts + (width - 1), axis=1)
    cut = starts % width != 0  # windows straddling two blocks: suffix of the first + prefix of the second
    if cut.any():
        # suffix[b * width + o]: grains b * width + o .. block end, added right to left; one more block
        # whose first grain is 0 stands for the empty suffix of block-aligned windows
        suffix = np.empty((keys, blocks + 1, width), dtype=prefix.dtype)
        np.cumsum(y[:, :, ::-1], axis=2, dtype=prefix.dtype, out=suffix[:, :blocks, ::-1])
        suffix[:, blocks, 0] = 0
        out += suffix.reshape(keys, (blocks + 1) * width).take(np.where(cut, starts, blocks * width), axis=1)
    return out


def _as_integers(x: np.ndarray) -> np.ndarray | None:
    """x as int64 when every value is a whole number and their magnitudes add up to less than 2**62 (so no
    running sum can overflow); an int64 array as it is (its sums wrap like any int64 sum). Else None: NaN,
    infinities, fractions and huge values take the block method."""
    if x.dtype == np.int64:
        return x
    if x.size and not np.array_equal(x[0], np.trunc(x[0])):  # a fraction in the first row: no full check
        return None
    with np.errstate(invalid="ignore"):
        whole = x.astype(np.int64)
    return whole if (whole == x).all() and np.abs(x).sum() < 2.0**62 else None


def point_sums(parts: GrainSums, grid: TimeGrid, reported: np.ndarray | None = None) -> np.ndarray:
    """(keys, count) sums per grid point; NaN where nothing was reported in the point's interval.
    reported: reported(parts, grid) when already known (several counters with the same counts)."""
    return np.where(_reported(parts.counts, grid) if reported is None else reported, _windows(parts.sums, grid),
                    np.nan)


def reported(parts: GrainSums, grid: TimeGrid) -> np.ndarray:
    """(keys, count) booleans: did anything report in point p's interval?"""
    return _reported(parts.counts, grid)


def _reported(counts: np.ndarray, grid: TimeGrid) -> np.ndarray:
    """(keys, count) booleans: did any grain of point p's window [p * stride, p * stride + width) report?
    Only whether the count is 0 matters: the number of reporting grains in each window (_windows over 0/1,
    exact in int64) is above 0."""
    return _windows((counts > 0).astype(np.int64), grid) > 0


def ratio(num: np.ndarray, den: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """num / (den * scale); NaN where either is undefined or the denominator is 0."""
    d = den * scale
    ok = np.isfinite(num) & np.isfinite(d) & (d != 0)
    out = np.full(np.broadcast(num, d).shape, np.nan)
    np.divide(num, d, out=out, where=ok)
    return out


def acceptance_rate(accepted: np.ndarray, draft_tokens: np.ndarray) -> np.ndarray:
    """r = A / D per point (acceptance.acceptance_rate)."""
    return ratio(accepted, draft_tokens)


def mean_acceptance_length(accepted: np.ndarray, drafts: np.ndarray) -> np.ndarray:
    """tau = 1 + A / N per point (acceptance.mean_acceptance_length)."""
    return 1.0 + ratio(accepted, drafts)


def seed_alpha(accepted: np.ndarray, drafts: np.ndarray, k: int) -> np.ndarray:
    """alpha_s = A / (N K) per point (acceptance.seed_alpha)."""
    return ratio(accepted, drafts, float(k))
