"""Latency verdict on bucketed data: is speculative decoding better, worse or unchanged at quantile q?

The verdict rests on bucket edges, never on an interpolated delta (spec-math section 7.2):

  1. Inputs are per-time-bucket histogram increases (cumulative per ``le``, last column = +Inf) for the
     spec and the baseline pool, on the same bucket layout. Rows are time buckets (e.g. 1-minute windows).
  2. Each side's quantile lies in a bucket (l, u] of the summed rows (Prometheus' histogram_quantile; the
     interpolated value and spec - base are display values only).
  3. Different buckets (spec in (l_s, u_s], baseline in (l_b, u_b], u_b <= l_s or the mirror): the order
     is certain, the size only known as the interval [l_s - u_b, u_s - l_b]. Significance: at a shared
     edge e between the two buckets, the higher side's exceedance P(X > e) must lie above 1 - q and the
     lower side's at or below 1 - q, both beyond sampling noise: percentile intervals of a bootstrap over
     time buckets (observations inside one time bucket are correlated; time buckets are the resampling
     unit). Then "worse" (spec higher) or "better"; otherwise "no-significant-change" (the shift is within
     sampling noise; the interval then spans both orders, +-(u_high - l_low)).
  4. The same bucket (l, u]: the order is below the histogram's resolution, "unresolved" - neither
     "better" nor "no change". The exceedances of the bucket's edges are reported, with whether the tail
     shifted (``tail_shift``: the bootstrap interval of the difference of exceedances excludes 0).
  5. Minimum-sample rule: each side needs >= ``min_samples`` observations, >= ``min_tail`` expected
     observations beyond the quantile (n (1 - q)) and >= ``min_buckets`` non-empty time buckets, else
     "inconclusive".
  6. +Inf bucket: a quantile there is only a lower bound, its bucket (l, +Inf). Spec in +Inf against a
     finite baseline can only be "worse" (the interval has no upper end), the mirror only "better"; both
     in +Inf -> "inconclusive".
Deterministic for a seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from backend.domain.histogram import QuantileResult, histogram_quantile
from backend.domain.resample import Resampled, linear_quantiles

VerdictLabel = Literal["better", "worse", "no-significant-change", "unresolved", "inconclusive"]
TailShift = Literal["heavier", "lighter", "none"]


@dataclass(frozen=True)
class Verdict:
    """Result of :func:`latency_verdict`. Values in seconds; ``None`` where undefined or unbounded.

    ``delta_low``/``delta_high``: where spec - base lies, from bucket edges ([l_s - u_b, u_s - l_b]); an
    end is ``None`` where a side is in +Inf. ``spec_bucket_*``/``base_bucket_*``: each side's holding
    bucket (l, u] (``*_high`` ``None`` for +Inf). ``edge``: the bucket edge whose exceedances were tested
    (the shared edge for different buckets, an edge of the common bucket otherwise); ``*_exceedance``: the
    fraction of that side's observations above it, with bootstrap percentile bounds ``*_exceedance_low``/
    ``*_exceedance_high``. ``reason``: one line for people.
    """

    verdict: VerdictLabel
    statistic: float | None  # interpolated spec - base at quantile q: a display value only
    delta_low: float | None
    delta_high: float | None
    n_spec: int  # total observations
    n_base: int
    reason: str
    spec_value: float | None = None
    base_value: float | None = None
    resolution: float | None = None  # width of the wider holding bucket
    q: float = 0.99
    t_spec: int = 0  # non-empty time buckets
    t_base: int = 0
    resolved: bool = False  # the buckets resolve the order (different buckets)
    confidence: float = 0.95
    n_boot: int = 0
    seed: int = 0
    spec_lower_bound: bool = False
    base_lower_bound: bool = False
    fixed_monotonicity: bool = False
    spec_bucket_low: float | None = None
    spec_bucket_high: float | None = None
    base_bucket_low: float | None = None
    base_bucket_high: float | None = None
    edge: float | None = None
    spec_exceedance: float | None = None
    spec_exceedance_low: float | None = None
    spec_exceedance_high: float | None = None
    base_exceedance: float | None = None
    base_exceedance_low: float | None = None
    base_exceedance_high: float | None = None
    tail_shift: TailShift | None = None  # same bucket only


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


def _point(arr: np.ndarray, bounds: np.ndarray, q: float) -> QuantileResult:
    return histogram_quantile(q, list(zip(bounds.tolist(), arr.sum(axis=0).tolist())))


def _ms(x: float) -> str:
    """Seconds as plain milliseconds without a sign: 0.025 -> "25", 0.0075 -> "7.5", never "-0"."""
    return f"{abs(x) * 1000 + 0.0:.6g}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100 + 0.0:.3g} %"


def _bucket(low: float | None, high: float | None) -> str:
    lo = "-Inf" if low is None else _ms(low)
    return f"({lo}, +Inf)" if high is None else f"({lo}, {_ms(high)}] ms"


def latency_verdict(spec: Sequence[Sequence[float]], base: Sequence[Sequence[float]], bounds: Sequence[float],
                    q: float = 0.99, *, seed: int = 0, n_boot: int = 1000, min_samples: int = 100,
                    min_tail: float = 5.0, min_buckets: int = 10, confidence: float = 0.95) -> Verdict:
    """Compare quantile q of the spec pool against the baseline pool (see module docstring).

    ``spec``/``base``: rows = time buckets, columns = cumulative count increases per ``le`` of ``bounds``;
    ``bounds`` strictly increasing, last +Inf (a layout without +Inf gets one appended if the rows have one
    more column). Edge cases: q outside (0, 1), bad shapes, negative counts, n_boot < 100 or
    confidence outside (0, 1) -> ``ValueError``; NaN rows (missing time buckets) are dropped; sparse data
    (minimum-sample rule), an undefined quantile, both quantiles in +Inf, or > 5 % of undefined resamples
    -> "inconclusive"; both quantiles in one bucket -> "unresolved".
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
    shared = Resampled(s_arr, b_arr, seed=seed, n_boot=n_boot)
    return [_verdict_at(shared, bnd, float(q), min_samples=min_samples, min_tail=min_tail, min_buckets=min_buckets,
                        confidence=confidence) for q in qs]


def _exceedance(cj: np.ndarray, cn: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    """Per resample, from its cumulative count at bounds[j] and its total (after the running maximum
    histogram_quantile applies): the fraction of observations above bounds[j], and (C_j - q N) / N, which
    is >= 0 exactly when the row's q-quantile is <= bounds[j] (Prometheus' own test: the first bucket whose
    count reaches the rank q N). NaN for an empty resample."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1.0 - cj / cn, (cj - q * cn) / cn


@dataclass(frozen=True)
class _Exceed:
    point: float  # fraction above the edge, and its bootstrap percentile bounds
    low: float
    high: float
    above: bool  # the quantile lies above the edge in (1 + confidence) / 2 of the resamples
    below: bool  # ... at or below it


def _bucket_index(bnd: np.ndarray, r: QuantileResult) -> int:
    return bnd.size - 1 if r.lower_bound or r.bucket_high is None else int(np.searchsorted(bnd, r.bucket_high))


def _verdict_at(shared: Resampled, bnd: np.ndarray, q: float, *, min_samples: int, min_tail: float,
                min_buckets: int, confidence: float) -> Verdict:
    s_arr, b_arr, seed, n_boot = shared.s_arr, shared.b_arr, shared.seed, shared.n_boot
    n_s, n_b = round(float(s_arr[:, -1].sum())), round(float(b_arr[:, -1].sum()))
    t_s, t_b = int((s_arr[:, -1] > 0).sum()), int((b_arr[:, -1] > 0).sum())
    ps, pb = _point(s_arr, bnd, q), _point(b_arr, bnd, q)
    stat = None if ps.value is None or pb.value is None else ps.value - pb.value
    widths = [w for w in (ps.width, pb.width) if w is not None]
    res = max(widths) if widths else None
    lo = hi = None
    if ps.value is not None and pb.value is not None:
        lo = None if ps.bucket_low is None or pb.bucket_high is None else ps.bucket_low - pb.bucket_high
        hi = None if ps.bucket_high is None or pb.bucket_low is None else ps.bucket_high - pb.bucket_low
    common = {"n_spec": n_s, "n_base": n_b, "spec_value": ps.value, "base_value": pb.value, "resolution": res,
              "q": float(q), "t_spec": t_s, "t_base": t_b, "confidence": confidence, "n_boot": n_boot, "seed": seed,
              "spec_lower_bound": ps.lower_bound, "base_lower_bound": pb.lower_bound,
              "fixed_monotonicity": ps.fixed_monotonicity or pb.fixed_monotonicity,
              "spec_bucket_low": ps.bucket_low, "spec_bucket_high": ps.bucket_high,
              "base_bucket_low": pb.bucket_low, "base_bucket_high": pb.bucket_high}
    name = f"P{q * 100:g}"

    def out(label: VerdictLabel, reason: str, *, resolved: bool = False, edge: int | None = None,
            xs: _Exceed | None = None, xb: _Exceed | None = None, tail: TailShift | None = None) -> Verdict:
        ex = {}
        if edge is not None and xs is not None and xb is not None:
            ex = {"edge": float(bnd[edge]), "spec_exceedance": xs.point, "spec_exceedance_low": xs.low,
                  "spec_exceedance_high": xs.high, "base_exceedance": xb.point, "base_exceedance_low": xb.low,
                  "base_exceedance_high": xb.high}
        return Verdict(label, stat, lo, hi, reason=reason, resolved=resolved, tail_shift=tail, **common, **ex)

    need = max(min_samples, math.ceil(min_tail / (1.0 - q)))
    short = [f"{side}: {n} observations (< {need})" for side, n in (("spec", n_s), ("baseline", n_b)) if n < need]
    short += [f"{side}: {t} time buckets (< {min_buckets})"
              for side, t in (("spec", t_s), ("baseline", t_b)) if t < min_buckets]
    if short:
        return out("inconclusive", "too little data for a verdict at q={:g}: {}".format(q, "; ".join(short)))
    if stat is None:
        return out("inconclusive", "quantile undefined on one side")
    if ps.lower_bound and pb.lower_bound:
        return out("inconclusive", f"both {name}s fall in the +Inf bucket (above {_ms(ps.bucket_low)} ms); "
                   "only lower bounds are known")

    tail = (1.0 - confidence) / 2.0
    probs = np.array([tail, 1.0 - tail])

    def side(which: int, j: int) -> tuple[_Exceed, np.ndarray] | None:
        every, margin = _exceedance(shared.column(which, j), shared.column(which, -1), q)
        empty = np.isnan(every)
        n_empty = int(np.count_nonzero(empty))
        if every.size - n_empty < 0.95 * n_boot:
            return None
        ex = every
        if n_empty:  # (none, mostly: then no copies)
            ex, margin = every[~empty], margin[~empty]
        x_lo, x_hi, m_lo, m_hi = (*linear_quantiles(ex, probs), *linear_quantiles(margin, probs))
        whole = shared.whole(which)
        point = float(_exceedance(whole[j], whole[-1], q)[0])
        # every resample's exceedance (NaN: empty), aligned with the other side's for their difference
        return _Exceed(point, float(x_lo), float(x_hi), above=bool(m_hi < 0), below=bool(m_lo >= 0)), every

    def exceed(j: int) -> tuple[_Exceed, _Exceed, np.ndarray] | None:
        gs, gb = side(0, j), side(1, j)
        if gs is None or gb is None:
            return None
        return gs[0], gb[0], gs[1] - gb[1]  # NaN where either resample is empty

    i_s, i_b = _bucket_index(bnd, ps), _bucket_index(bnd, pb)
    limit = 1.0 - q
    where = f"{name} {_bucket(ps.bucket_low, ps.bucket_high)} vs {_bucket(pb.bucket_low, pb.bucket_high)}"
    if i_s != i_b:  # the buckets resolve the order; is it beyond sampling noise at a shared edge?
        worse = i_s > i_b
        first = None
        for j in range(min(i_s, i_b), max(i_s, i_b)):
            got = exceed(j)
            if got is None:
                return out("inconclusive", "too many bootstrap resamples with an empty histogram")
            xs, xb, _ = got
            up, down = (xs, xb) if worse else (xb, xs)
            first = first or (j, xs, xb)
            if up.above and down.below:
                size = (f"at least {_ms(lo if worse else hi)} ms" if (hi if worse else lo) is None
                        else f"{_ms(lo if worse else hi)} to {_ms(hi if worse else lo)} ms")
                reason = (f"{where}: spec {'slower' if worse else 'faster'} by {size}; above {_ms(bnd[j])} ms: "
                          f"spec {_pct(xs.point)}, baseline {_pct(xb.point)} (limit {_pct(limit)})")
                return out("worse" if worse else "better", reason, resolved=True, edge=j, xs=xs, xb=xb)
        j, xs, xb = first
        # either order is possible: both quantiles lie somewhere in the span of the two buckets (unbounded
        # when one of them is +Inf)
        lo, hi = (None, None) if lo is None or hi is None else (-max(abs(lo), abs(hi)), max(abs(lo), abs(hi)))
        return out("no-significant-change", f"{where}, but above {_ms(bnd[j])} ms spec {_pct(xs.point)} vs "
                   f"baseline {_pct(xb.point)} is within sampling noise of {_pct(limit)}: no significant shift",
                   resolved=True, edge=j, xs=xs, xb=xb)
    # one bucket (l, u]: the order is below the resolution; report the tail at its edges
    found = []
    for j in (i_s, i_s - 1):
        if j < 0 or (j == i_s - 1 and bnd[j] <= 0):
            continue
        got = exceed(j)
        if got is None:
            return out("inconclusive", "too many bootstrap resamples with an empty histogram")
        xs, xb, diff = got
        d_ok = ~np.isnan(diff)
        d_lo, d_hi = linear_quantiles(diff if d_ok.all() else diff[d_ok], probs)
        shift: TailShift = "heavier" if d_lo > 0 else "lighter" if d_hi < 0 else "none"
        found.append((j, xs, xb, shift))
    j, xs, xb, shift = next((f for f in found if f[3] != "none"), found[0])
    words = {"heavier": "tail heavier on spec", "lighter": "tail lighter on spec", "none": "no tail shift"}[shift]
    return out("unresolved", f"change below the histogram's resolution: both {name}s in "
               f"{_bucket(ps.bucket_low, ps.bucket_high)}; above {_ms(bnd[j])} ms: spec {_pct(xs.point)}, "
               f"baseline {_pct(xb.point)} ({words})", edge=j, xs=xs, xb=xb, tail=shift)
