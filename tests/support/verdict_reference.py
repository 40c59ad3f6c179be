"""The latency verdict's last step before its percentile shortcut, kept as a reference to check the current
one against, verdict for verdict (tests/domain/test_verdict_reference.py).

Only what changed is kept: `linear_quantiles` with a whole sort (the current one places the order statistics
with np.partition) and `_verdict_at` as it was (it copied a side's exceedances whether or not a resample was
empty), both copied unchanged. Everything else (checks, resampling, points, the Verdict) is the current
module's, so `latency_verdicts` here is the current one with this `_verdict_at` in its place."""

from __future__ import annotations

import math
from collections.abc import Sequence
from unittest import mock

import numpy as np

from backend.domain import verdict
from backend.domain.verdict import (
    TailShift,
    Verdict,
    VerdictLabel,
    _bucket,
    _bucket_index,
    _Exceed,
    _exceedance,
    _ms,
    _pct,
    _point,
    _Resampled,
)


def latency_verdicts(spec: Sequence[Sequence[float]], base: Sequence[Sequence[float]], bounds: Sequence[float],
                     qs: Sequence[float], **kw) -> list[Verdict]:
    """backend.domain.verdict.latency_verdicts, each quantile's verdict made by the former `_verdict_at`."""
    with mock.patch.object(verdict, "_verdict_at", _verdict_at):
        return verdict.latency_verdicts(spec, base, bounds, qs, **kw)


def linear_quantiles(x: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """np.quantile(x, probs) (method "linear") of a 1-D array without NaN, the same floats (numpy's virtual
    index (n - 1) p, its floor and neighbour, and its two-sided lerp), at half the cost: numpy's general
    machinery costs more than sorting a thousand resamples. x must not be empty."""
    s = np.sort(x)
    n = s.size
    virtual = (n - 1) * probs
    prev = np.floor(virtual)
    top = virtual >= n - 1  # numpy takes the last value there
    a = s[np.where(top, n - 1, prev).astype(np.intp)]
    b = s[np.where(top, n - 1, prev + 1).astype(np.intp)]
    t = virtual - prev
    d = b - a
    out = a + d * t
    np.subtract(b, d * (1 - t), out=out, where=t >= 0.5)
    return out


def _verdict_at(shared: _Resampled, bnd: np.ndarray, q: float, *, min_samples: int, min_tail: float,
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
        ex, margin = _exceedance(shared.column(which, j), shared.column(which, -1), q)
        ok = ~np.isnan(ex)
        if ok.sum() < 0.95 * n_boot:
            return None
        x_lo, x_hi, m_lo, m_hi = (*linear_quantiles(ex[ok], probs), *linear_quantiles(margin[ok], probs))
        whole = shared.whole(which)
        point = float(_exceedance(whole[j], whole[-1], q)[0])
        return _Exceed(point, float(x_lo), float(x_hi), above=bool(m_hi < 0), below=bool(m_lo >= 0)), ex

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
        d_lo, d_hi = linear_quantiles(diff[~np.isnan(diff)], probs)
        shift: TailShift = "heavier" if d_lo > 0 else "lighter" if d_hi < 0 else "none"
        found.append((j, xs, xb, shift))
    j, xs, xb, shift = next((f for f in found if f[3] != "none"), found[0])
    words = {"heavier": "tail heavier on spec", "lighter": "tail lighter on spec", "none": "no tail shift"}[shift]
    return out("unresolved", f"change below the histogram's resolution: both {name}s in "
               f"{_bucket(ps.bucket_low, ps.bucket_high)}; above {_ms(bnd[j])} ms: spec {_pct(xs.point)}, "
               f"baseline {_pct(xb.point)} ({words})", edge=j, xs=xs, xb=xb, tail=shift)
