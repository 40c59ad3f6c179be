"""Counters summed on a time grid, then divided: the vectorised form of the series rules (spec-math §1, §7).

A grid is points t_i = first + i * step (i < count), each covering (t_i - span, t_i]. Values arrive as
flat arrays (one entry per bucket or hour, keyed by a small integer and the END of its interval), NaN
meaning "not reported". Sums follow SQL's `sum`: a point with no reported value is NaN (undefined,
never 0), a point with some is the sum of those. Ratios are taken of the sums, never averaged, and are
NaN where the scalar functions in backend.domain.acceptance give None (denominator 0 or undefined).

Summation: values are first added per grain of gcd(step, span) seconds; a point then adds its span/grain
grains, exactly (no running difference) unless points x grains per point exceeds EXACT_LIMIT, where a
running sum in extended precision is used (error ~1e-19 relative to the series total).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

import numpy as np

EXACT_LIMIT = 20_000_000


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
    counts: np.ndarray  # (keys, grains)


def grain_index(keys: np.ndarray, ends: np.ndarray, *, n_keys: int, grid: TimeGrid) -> np.ndarray:
    """Flat (key, grain) cell of each entry, -1 for entries outside (start, last] or with a bad key."""
    g, n = grid.grain, grid.grains
    gi = -((grid.start - ends) // g) - 1  # ceil((end - start) / g) - 1
    ok = (gi >= 0) & (gi < n) & (keys >= 0) & (keys < n_keys)
    return np.where(ok, keys * n + gi, -1)


def grain_sums(keys: np.ndarray, ends: np.ndarray, values: np.ndarray, *, n_keys: int, grid: TimeGrid,
               cells: np.ndarray | None = None) -> GrainSums:
    """keys: 0 <= key < n_keys per entry; ends: unix seconds; entries outside (start, last] are ignored.
    cells: grain_index(keys, ends, ...) when several value columns share the same entries."""
    n = grid.grains
    cells = grain_index(keys, ends, n_keys=n_keys, grid=grid) if cells is None else cells
    present = (cells >= 0) & ~np.isnan(values)
    idx = cells[present]
    size = n_keys * n
    sums = np.bincount(idx, weights=values[present], minlength=size)[:size].reshape(n_keys, n)
    counts = np.bincount(idx, minlength=size)[:size].reshape(n_keys, n)
    return GrainSums(sums, counts)


def combine(parts: GrainSums, groups: list[list[int]]) -> GrainSums:
    """Rows of `parts` added per group (a key may sit in several groups, e.g. a class and the mix)."""
    n = parts.sums.shape[1]
    sums = np.zeros((len(groups), n))
    counts = np.zeros((len(groups), n), dtype=np.int64)
    for i, g in enumerate(groups):
        if g:
            sums[i] = parts.sums[g].sum(axis=0)
            counts[i] = parts.counts[g].sum(axis=0)
    return GrainSums(sums, counts)


def _windows(x: np.ndarray, grid: TimeGrid) -> np.ndarray:
    if grid.count <= 0:
        return np.zeros((x.shape[0], 0), dtype=x.dtype)
    width, stride, p = grid.span // grid.grain, grid.step // grid.grain, grid.count
    if width == stride:
        return x[:, : p * width].reshape(x.shape[0], p, width).sum(axis=2)
    if x.shape[0] * p * width <= EXACT_LIMIT:
        view = np.lib.stride_tricks.sliding_window_view(x, width, axis=1)
        return view[:, ::stride][:, :p].sum(axis=2)
    run = np.zeros((x.shape[0], x.shape[1] + 1), dtype=np.longdouble)
    np.cumsum(x, axis=1, dtype=np.longdouble, out=run[:, 1:])
    at = np.arange(p) * stride
    return (run[:, at + width] - run[:, at]).astype(x.dtype)


def point_sums(parts: GrainSums, grid: TimeGrid) -> np.ndarray:
    """(keys, count) sums per grid point; NaN where nothing was reported in the point's interval."""
    sums = _windows(parts.sums, grid)
    counts = _windows(parts.counts, grid)
    return np.where(counts > 0, sums, np.nan)


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
