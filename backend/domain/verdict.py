"""Latency verdict on bucketed data: is speculative decoding better, worse or unchanged at quantile q?

Method (deterministic for a seed):
  1. Inputs are per-time-bucket histogram increases (cumulative per ``le``, last column = +Inf) for the
     spec and the baseline pool, on the same bucket layout. Rows are time buckets (e.g. 1-minute windows).
  2. Point estimate: Prometheus' histogram_quantile of the summed rows of each side; statistic = spec - base.
  3. Uncertainty: a bootstrap over time buckets (observations inside one time bucket are correlated, time
     buckets are the resampling unit). Each resample draws T rows with replacement (multinomial weights),
     sums them and takes the same histogram_quantile; the percentile CI of (spec - base) over resamples.
  4. Resolution floor: interpolation inside a bucket cannot resolve a change narrower than the bucket
     holding the quantile; |statistic| below the larger finite width of the two holding buckets is never
     significant (verdict "no-significant-change", ``resolved=False``).
  5. Minimum-sample rule: each side needs >= ``min_samples`` observations, >= ``min_tail`` expected
     observations beyond the quantile (n (1 - q)) and >= ``min_buckets`` non-empty time buckets, else
     "inconclusive".
  6. +Inf bucket: a quantile there is only a lower bound. Spec in +Inf allows "worse" but never "better";
     baseline in +Inf the reverse; both -> "inconclusive".
Verdict: "worse" if the CI lies above 0, "better" if below 0 (lower latency is better), else
"no-significant-change" - always subject to the floor and the rules above.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from backend.domain.histogram import QuantileResult, histogram_quantile

VerdictLabel = Literal["better", "worse", "no-significant-change", "inconclusive"]


@dataclass(frozen=True)
class Verdict:
    """Result of :func:`latency_verdict`. Values in seconds; ``None`` where undefined."""

    verdict: VerdictLabel
    statistic: float | None  # point delta spec - base at quantile q
    ci_low: float | None
    ci_high: float | None
    n_spec: int  # total observations
    n_base: int
    reason: str
    spec_value: float | None = None
    base_value: float | None = None
    resolution: float | None = None  # width of the wider holding bucket
    q: float = 0.99
    t_spec: int = 0  # non-empty time buckets
    t_base: int = 0
    resolved: bool = False
    confidence: float = 0.95
    n_boot: int = 0
    seed: int = 0
    spec_lower_bound: bool = False
    base_lower_bound: bool = False
    fixed_monotonicity: bool = False


def _prepare(rows: Sequence[Sequence[float]], n_le: int, name: str) -> np.ndarray:
    arr = np.asarray(rows, dtype=float)
    if arr.size == 0:
        return np.zeros((0, n_le))
    if arr.ndim != 2 or arr.shape[1] != n_le:
        raise ValueError(f"{name}: every time bucket needs {n_le} cumulative counts (one per le)")
    arr = arr[~np.isnan(arr).any(axis=1)]  # a missing time bucket is skipped, never read as 0
    if (arr < 0).any():
        raise ValueError(f"{name}: bucket increases must be >= 0")
    return arr


def quantiles_matrix(counts: np.ndarray, bounds: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised Prometheus bucketQuantile over rows of cumulative counts sharing sorted unique ``bounds``
    (last = +Inf). Returns (values with NaN where PromQL gives NaN, mask of rows in the +Inf bucket)."""
    c = np.maximum.accumulate(counts, axis=1)
    n_rows, n_le = c.shape
    total = c[:, -1]
    rank = q * total
    ge = c[:, :-1] >= rank[:, None]
    b = np.where(ge.any(axis=1), ge.argmax(axis=1), n_le - 1)
    rows = np.arange(n_rows)
    inner = np.minimum(b, n_le - 2)
    prev_idx = np.maximum(inner - 1, 0)
    start = np.where(inner > 0, bounds[prev_idx], 0.0)
    prev = np.where(inner > 0, c[rows, prev_idx], 0.0)
    end = bounds[inner]
    cnt = c[rows, inner] - prev
    with np.errstate(invalid="ignore", divide="ignore"):
        vals = start + (end - start) * ((rank - prev) / cnt)
    in_inf = b == n_le - 1
    vals = np.where(in_inf, bounds[n_le - 2], vals)
    vals = np.where((b == 0) & (bounds[0] <= 0), bounds[0], vals)
    vals = np.where(total == 0, np.nan, vals)
    return vals, in_inf & (total > 0)


def _resample_weights(rng: np.random.Generator, n_rows: int, n_boot: int) -> np.ndarray:
    """(n_boot, n_rows) counts of how often each time bucket is drawn in each with-replacement resample."""
    idx = rng.integers(0, n_rows, size=(n_boot, n_rows)) + n_rows * np.arange(n_boot)[:, None]
    return np.bincount(idx.ravel(), minlength=n_boot * n_rows).reshape(n_boot, n_rows).astype(float)


CACHED_WEIGHTS = 4  # weight pairs kept (a fleet's verdicts over one window share one or two shapes)
CACHED_CELLS = 400_000  # largest n_boot x rows of a side kept (1,000 x 400: 3.2 MB); longer ones are drawn anew


def resample_weights(seed: int, n_spec: int, n_base: int, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    """The bootstrap's weights for both sides: a generator seeded with `seed` draws spec's, then the
    baseline's. They depend on nothing but these four numbers, so a fleet's verdicts over one window (every
    pair has the same number of time bins) draw them once: a few pairs are kept, read-only."""
    if max(n_spec, n_base) * n_boot > CACHED_CELLS:
        return _draw_weights(seed, n_spec, n_base, n_boot)
    return _cached_weights(seed, n_spec, n_base, n_boot)


def _draw_weights(seed: int, n_spec: int, n_base: int, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return _resample_weights(rng, n_spec, n_boot), _resample_weights(rng, n_base, n_boot)


@functools.lru_cache(maxsize=CACHED_WEIGHTS)
def _cached_weights(seed: int, n_spec: int, n_base: int, n_boot: int) -> tuple[np.ndarray, np.ndarray]:
    pair = _draw_weights(seed, n_spec, n_base, n_boot)
    for w in pair:
        w.flags.writeable = False
    return pair


def _point(arr: np.ndarray, bounds: np.ndarray, q: float) -> QuantileResult:
    return histogram_quantile(q, list(zip(bounds.tolist(), arr.sum(axis=0).tolist())))


def _fmt(x: float | None) -> str:
    return "undefined" if x is None else f"{x * 1000:+.2f} ms"


def latency_verdict(spec: Sequence[Sequence[float]], base: Sequence[Sequence[float]], bounds: Sequence[float],
                    q: float = 0.99, *, seed: int = 0, n_boot: int = 1000, min_samples: int = 100,
                    min_tail: float = 5.0, min_buckets: int = 10, confidence: float = 0.95) -> Verdict:
    """Compare quantile q of the spec pool against the baseline pool (see module docstring).

    ``spec``/``base``: rows = time buckets, columns = cumulative count increases per ``le`` of ``bounds``;
    ``bounds`` strictly increasing, last +Inf (a layout without +Inf gets one appended if the rows have one
    more column). Edge cases: q outside (0, 1), bad shapes, negative counts, n_boot < 100 or
    confidence outside (0, 1) -> ``ValueError``; NaN rows (missing time buckets) are dropped; sparse data
    (minimum-sample rule), an undefined quantile, both quantiles in +Inf, or > 5 % of undefined resamples
    -> "inconclusive". The floor: |statistic| < resolution -> "no-significant-change" (not resolved).
    """
    return latency_verdicts(spec, base, bounds, (q,), seed=seed, n_boot=n_boot, min_samples=min_samples,
                            min_tail=min_tail, min_buckets=min_buckets, confidence=confidence)[0]


def latency_verdicts(spec: Sequence[Sequence[float]], base: Sequence[Sequence[float]], bounds: Sequence[float],
                     qs: Sequence[float], *, seed: int = 0, n_boot: int = 1000, min_samples: int = 100,
                     min_tail: float = 5.0, min_buckets: int = 10, confidence: float = 0.95) -> list[Verdict]:
    """latency_verdict at each quantile of `qs`, the same verdicts: the inputs are checked once and the
    bootstrap's resamples (the same seeded draws latency_verdict makes) are drawn once for all of them."""
    for q in qs:
        if not 0.0 < float(q) < 1.0:
            raise ValueError(f"q must be in (0, 1), got {q!r}")
    if n_boot < 100 or not 0.0 < confidence < 1.0:
        raise ValueError("n_boot must be >= 100 and confidence in (0, 1)")
    bnd = np.asarray([float(b) for b in bounds], dtype=float)
    width = np.asarray(spec[0]).size if len(spec) else np.asarray(base[0]).size if len(base) else bnd.size
    if bnd.size == width - 1 and (bnd.size == 0 or bnd[-1] != math.inf):
        bnd = np.append(bnd, math.inf)
    if bnd.size < 2 or bnd[-1] != math.inf or (np.diff(bnd) <= 0).any():
        raise ValueError("bounds must be strictly increasing, with at least one finite le and +Inf last")
    s_arr, b_arr = _prepare(spec, bnd.size, "spec"), _prepare(base, bnd.size, "base")
    shared = _Resampled(s_arr, b_arr, seed=seed, n_boot=n_boot)
    return [_verdict_at(shared, bnd, float(q), min_samples=min_samples, min_tail=min_tail, min_buckets=min_buckets,
                        confidence=confidence) for q in qs]


class _Resampled:
    """Both sides' bootstrap resamples (summed rows, n_boot x le), drawn on first use from a generator
    seeded with `seed`: spec's weights first, then the baseline's."""

    def __init__(self, s_arr: np.ndarray, b_arr: np.ndarray, *, seed: int, n_boot: int) -> None:
        self.s_arr, self.b_arr, self.seed, self.n_boot = s_arr, b_arr, seed, n_boot
        self._sums: tuple[np.ndarray, np.ndarray] | None = None

    def sums(self) -> tuple[np.ndarray, np.ndarray]:
        if self._sums is None:
            w_s, w_b = resample_weights(self.seed, len(self.s_arr), len(self.b_arr), self.n_boot)
            self._sums = (w_s @ self.s_arr, w_b @ self.b_arr)
        return self._sums


def _verdict_at(shared: _Resampled, bnd: np.ndarray, q: float, *, min_samples: int, min_tail: float,
                min_buckets: int, confidence: float) -> Verdict:
    s_arr, b_arr, seed, n_boot = shared.s_arr, shared.b_arr, shared.seed, shared.n_boot
    n_s, n_b = round(float(s_arr[:, -1].sum())), round(float(b_arr[:, -1].sum()))
    t_s, t_b = int((s_arr[:, -1] > 0).sum()), int((b_arr[:, -1] > 0).sum())
    ps, pb = _point(s_arr, bnd, q), _point(b_arr, bnd, q)
    stat = None if ps.value is None or pb.value is None else ps.value - pb.value
    widths = [w for w in (ps.width, pb.width) if w is not None]
    res = max(widths) if widths else None
    common = {"n_spec": n_s, "n_base": n_b, "spec_value": ps.value, "base_value": pb.value, "resolution": res, "q": float(q),
                  "t_spec": t_s, "t_base": t_b, "confidence": confidence, "n_boot": n_boot, "seed": seed,
                  "spec_lower_bound": ps.lower_bound, "base_lower_bound": pb.lower_bound,
                  "fixed_monotonicity": ps.fixed_monotonicity or pb.fixed_monotonicity}

    def out(label: VerdictLabel, reason: str, lo: float | None = None, hi: float | None = None,
            resolved: bool = False) -> Verdict:
        return Verdict(label, stat, lo, hi, reason=reason, resolved=resolved, **common)

    need = max(min_samples, math.ceil(min_tail / (1.0 - q)))
    short = [f"{side}: {n} observations (< {need})" for side, n in (("spec", n_s), ("baseline", n_b)) if n < need]
    short += [f"{side}: {t} time buckets (< {min_buckets})"
              for side, t in (("spec", t_s), ("baseline", t_b)) if t < min_buckets]
    if short:
        return out("inconclusive", "too little data for a verdict at q={:g}: {}".format(q, "; ".join(short)))
    if stat is None:
        return out("inconclusive", "quantile undefined on one side")
    if ps.lower_bound and pb.lower_bound:
        return out("inconclusive", "both quantiles fall in the +Inf bucket; only lower bounds are known")

    s_sums, b_sums = shared.sums()
    qs, _ = quantiles_matrix(s_sums, bnd, q)
    qb, _ = quantiles_matrix(b_sums, bnd, q)
    deltas = qs - qb
    ok = deltas[~np.isnan(deltas)]
    if ok.size < 0.95 * n_boot:
        return out("inconclusive", "too many bootstrap resamples with an undefined quantile")
    tail = (1.0 - confidence) / 2.0
    lo, hi = (float(x) for x in np.quantile(ok, [tail, 1.0 - tail]))
    resolved = res is not None and abs(stat) >= res
    ci = f"{confidence:.0%} CI [{_fmt(lo)}, {_fmt(hi)}]"
    head = f"P{q * 100:g} spec - baseline = {_fmt(stat)}, {ci}"
    if lo <= 0.0 <= hi:
        return out("no-significant-change", f"{head} contains 0", lo, hi, resolved)
    if not resolved:
        return out("no-significant-change", f"{head}, but the change is narrower than the histogram resolution "
                   f"({_fmt(res)} bucket width); finer buckets are needed to resolve it", lo, hi, False)
    if lo > 0.0:
        if pb.lower_bound:
            return out("inconclusive", f"{head}; the baseline quantile is only a lower bound (+Inf bucket)", lo, hi)
        return out("worse", f"{head} lies above 0: spec is slower at this quantile", lo, hi, True)
    if ps.lower_bound:
        return out("inconclusive", f"{head}; the spec quantile is only a lower bound (+Inf bucket)", lo, hi)
    return out("better", f"{head} lies below 0: spec is faster at this quantile", lo, hi, True)
