"""Drafter and configuration A/B: side A (the reference) against side B (the candidate) on the same model.

Two ways to get two sides: side by side in time (two spec pools serving the same class over the same
window) or before/after a change (one pool, the window before an instant against the window after it).
Pure math over additive sums; no I/O.

Inputs are *strata* (a concurrency band, or a traffic class x band for the mix), each holding the side's
time bins; every bin holds additive increases only (counters, _sum/_count of histograms, replica-seconds).

Load matching. Acceptance and step cost move with the batch size, so a quieter week must not look like a
better drafter: only strata both sides ran in (for at least `min_bins` time bins each) are compared, and each side's figure is *standardised* to the
B side's traffic: M_side = sum_s w_s m_side,s with w_s = B's output tokens in stratum s / B's output tokens
in the compared strata (B's drafts where output tokens are missing). A side's figure is therefore "what it
did at B's load mix"; `compared_fraction` says how much of B's traffic the common strata hold.

Figures (one name each, the product's definitions):
  * alpha = A / D (vLLM's draft acceptance rate), tau = 1 + A / N, conditional per-position acceptance
    p_i = P_i / P_{i-1} (P_{-1} := N; positions both sides draft), all ratios of sums;
  * measured speedup = mean TPOT_baseline / mean TPOT_spec (step_overhead.tpot_speedup), each side against
    the baseline pool of its own time bins (before/after: a quieter week's baseline moves as well);
  * cost per 1 M output tokens = replica-hour price x replica-seconds / 3600 / output tokens x 1e6
    (domain.capacity.cost_per_mtok), and the saving per week of B's traffic at B's cost instead of A's.

Intervals (closed form, no bootstrap). Every per-stratum figure is a ratio of sums R = sum y / sum x over
the stratum's time bins; time bins are the sampling unit (observations inside one bin are correlated, as
in domain.verdict), and R's variance is the linearisation (delta-method, cluster-robust) estimate

    var(R) = n / (n - 1) * sum_i (y_i - R x_i)^2 / (sum_i x_i)^2          (n = bins with x_i > 0)

The speedup is a ratio of two means; its log has the linearised variance
n/(n-1) sum_i (u_i - v_i)^2 with u_i = (sb_i - Mb cb_i) / (Mb sum cb) and v_i the same for the spec pool
(the covariance of the two pools within a bin enters through the difference). Standardising adds
var(M) = sum_s w_s^2 var(m_s). The change B vs A is Q = M_B / M_A - 1, its interval
exp(ln(M_B/M_A) -+ z sqrt(var_B / M_B^2 + var_A / M_A^2)) - 1 (the sides independent: conservative for
two pools sampled over the same hours).

Verdict (the labels of domain.verdict): "better" when the whole interval lies on the good side of 0 (higher
alpha, tau, p_i, speedup; lower cost), "worse" on the bad side, "no-significant-change" when it holds 0,
"inconclusive" when a side has too little data (fewer than `min_drafts` drafts or `min_requests` TPOT
observations in the compared strata) or no stratum is shared for `min_bins` time bins.

``None`` = undefined. Bad parameters raise ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from backend.domain.capacity import MILLION, cost_per_mtok
from backend.domain.step_overhead import tpot_speedup

BETTER, WORSE, NO_CHANGE, INCONCLUSIVE = "better", "worse", "no-significant-change", "inconclusive"
Z_95 = 1.959963984540054
MIN_DRAFTS = 1000
MIN_REQUESTS = 100
MIN_BINS = 4


@dataclass(frozen=True)
class Bin:
    """One time bin of one side in one stratum: sums over its buckets (and over the side's pools).

    `tpot_*`: the spec pool's; `base_tpot_*`: its baseline pool's over the same time bin and stratum.
    `replica_seconds`: replicas x seconds of the spec pool (``None``: unknown, no cost figures)."""

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: tuple[float, ...] = ()
    tpot_sum: float = 0.0
    tpot_count: float = 0.0
    base_tpot_sum: float = 0.0
    base_tpot_count: float = 0.0
    tokens: float = 0.0
    replica_seconds: float | None = None


@dataclass(frozen=True)
class Estimate:
    """A side's standardised figure and its variance (``None``: undefined)."""

    value: float | None
    variance: float | None


@dataclass(frozen=True)
class MetricComparison:
    metric: str  # alpha | tau | p_<i> | measured_speedup | cost_per_mtok
    a: float | None
    b: float | None
    change: float | None  # b / a - 1
    change_low: float | None
    change_high: float | None
    verdict: str
    reason: str
    higher_is_better: bool = True


@dataclass(frozen=True)
class Comparison:
    strata: tuple[Hashable, ...]  # compared (both sides ran there), in the order given
    a_only: tuple[Hashable, ...]  # strata of one side only (not compared)
    b_only: tuple[Hashable, ...]
    weights: tuple[float, ...]  # per compared stratum, B's traffic share
    compared_fraction: float | None  # B's traffic in the compared strata / all of B's
    metrics: tuple[MetricComparison, ...]
    saving_per_week: float | None = None  # B's traffic per week x (cost A - cost B) / 1e6
    saving_per_week_low: float | None = None
    saving_per_week_high: float | None = None
    drafts: tuple[float, float] = (0.0, 0.0)  # (A, B) in the compared strata
    confidence: float = 0.95
    notes: tuple[str, ...] = field(default=())

    def metric(self, name: str) -> MetricComparison | None:
        return next((m for m in self.metrics if m.metric == name), None)


def ratio_variance(pairs: Sequence[tuple[float, float]]) -> tuple[float | None, float | None, int]:
    """(R = sum y / sum x, var(R) by linearisation over the pairs (y_i, x_i), n = pairs with x_i > 0).

    Edge cases: sum x <= 0 -> (None, None, n); fewer than 2 bins -> (R, None, n)."""
    sx = math.fsum(x for _, x in pairs)
    n = sum(1 for _, x in pairs if x > 0)
    if sx <= 0:
        return None, None, n
    r = math.fsum(y for y, _ in pairs) / sx
    if n < 2:
        return r, None, n
    ss = math.fsum((y - r * x) ** 2 for y, x in pairs if x > 0 or y != 0)
    return r, n / (n - 1) * ss / sx ** 2, n


def speedup_variance(bins: Sequence[Bin]) -> tuple[float | None, float | None, int]:
    """(measured speedup S = mean TPOT_base / mean TPOT_spec, var(ln S) by linearisation, bins with both)."""
    sb, cb = math.fsum(b.base_tpot_sum for b in bins), math.fsum(b.base_tpot_count for b in bins)
    ss, cs = math.fsum(b.tpot_sum for b in bins), math.fsum(b.tpot_count for b in bins)
    if cb <= 0 or cs <= 0 or sb <= 0 or ss <= 0:
        return None, None, 0
    mb, ms = sb / cb, ss / cs
    s = tpot_speedup(ms, mb)
    used = [b for b in bins if b.base_tpot_count > 0 or b.tpot_count > 0]
    n = sum(1 for b in used if b.base_tpot_count > 0 and b.tpot_count > 0)
    if s is None or len(used) < 2:
        return s, None, n
    zs = [(b.base_tpot_sum - mb * b.base_tpot_count) / (mb * cb) - (b.tpot_sum - ms * b.tpot_count) / (ms * cs)
          for b in used]
    return s, len(used) / (len(used) - 1) * math.fsum(z * z for z in zs), n


def _check(confidence: float, min_bins: int, min_drafts: float, min_requests: float) -> float:
    if not (isinstance(confidence, float | int) and 0.0 < float(confidence) < 1.0):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if isinstance(min_bins, bool) or not isinstance(min_bins, int) or min_bins < 2:
        raise ValueError(f"min_bins must be an integer >= 2, got {min_bins!r}")
    for name, v in (("min_drafts", min_drafts), ("min_requests", min_requests)):
        if not math.isfinite(float(v)) or float(v) < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    return _z(float(confidence))


def _z(confidence: float) -> float:
    """Two-sided normal quantile (Acklam-free: the inverse error function by bisection on math.erf)."""
    if abs(confidence - 0.95) < 1e-12:
        return Z_95
    target, lo, hi = confidence, 0.0, 10.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if math.erf(mid / math.sqrt(2)) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _validate(bins: Sequence[Bin]) -> None:
    for b in bins:
        vals = [b.drafts, b.draft_tokens, b.accepted, *b.per_pos, b.tpot_sum, b.tpot_count, b.base_tpot_sum,
                b.base_tpot_count, b.tokens] + ([b.replica_seconds] if b.replica_seconds is not None else [])
        if any(not math.isfinite(float(v)) or float(v) < 0 for v in vals):
            raise ValueError(f"a time bin's sums must be finite and >= 0, got {b!r}")


def _standardise(per_stratum: Sequence[tuple[float | None, float | None]], weights: Sequence[float]) -> Estimate:
    """sum w_s m_s and sum w_s^2 var_s over the strata (weights of strata with an undefined m renormalised);
    variance ``None`` when a stratum with weight has none."""
    items = [(w, m, v) for w, (m, v) in zip(weights, per_stratum, strict=True) if m is not None and w > 0]
    total = math.fsum(w for w, _, _ in items)
    if not items or total <= 0:
        return Estimate(None, None)
    value = math.fsum(w / total * m for w, m, _ in items)
    if any(v is None for _, _, v in items):
        return Estimate(value, None)
    return Estimate(value, math.fsum((w / total) ** 2 * v for w, _, v in items))


def relative_change(a: Estimate, b: Estimate, z: float) -> tuple[float | None, float | None, float | None]:
    """(b / a - 1, low, high): the interval exp(ln(b/a) -+ z sqrt(var_b/b^2 + var_a/a^2)) - 1."""
    if a.value is None or b.value is None or a.value <= 0 or b.value <= 0:
        return None, None, None
    d = math.log(b.value / a.value)
    if a.variance is None or b.variance is None:
        return math.expm1(d), None, None
    se = math.sqrt(b.variance / b.value ** 2 + a.variance / a.value ** 2)
    return math.expm1(d), math.expm1(d - z * se), math.expm1(d + z * se)


def verdict_of(change: float | None, low: float | None, high: float | None, *, higher_is_better: bool,
               short: str | None) -> tuple[str, str]:
    """(label, reason) from the interval of the relative change (see the module docstring)."""
    if short:
        return INCONCLUSIVE, short
    if change is None:
        return INCONCLUSIVE, "undefined on a side"
    if low is None or high is None:
        return INCONCLUSIVE, "too few time bins for an interval"
    span = f"{change * 100:+.1f} % ({low * 100:+.1f} to {high * 100:+.1f} %)"
    if low > 0 or high < 0:
        good = (low > 0) == higher_is_better
        return (BETTER if good else WORSE), f"{span}: the whole interval is {'above' if low > 0 else 'below'} 0"
    return NO_CHANGE, f"{span}: the interval holds 0"


def _side_weights(b: Mapping[Hashable, Sequence[Bin]], strata: Sequence[Hashable]) -> tuple[list[float], float]:
    toks = {s: math.fsum(x.tokens for x in b[s]) for s in b}
    basis = toks if any(v > 0 for v in toks.values()) else {s: math.fsum(x.drafts for x in b[s]) for s in b}
    total = math.fsum(basis.values())
    raw = [basis[s] for s in strata]
    shared = math.fsum(raw)
    if shared <= 0:
        return [0.0 for _ in strata], 0.0
    return [r / shared for r in raw], (shared / total if total > 0 else 0.0)


def compare(a: Mapping[Hashable, Sequence[Bin]], b: Mapping[Hashable, Sequence[Bin]], *,
            replica_hour_price: float | None = None, b_tokens_per_week: float | None = None,
            confidence: float = 0.95, min_bins: int = MIN_BINS, min_drafts: float = MIN_DRAFTS,
            min_requests: float = MIN_REQUESTS) -> Comparison:
    """Side A (reference) against side B (candidate), load-matched over the strata both sides have.

    ``a``/``b`` map a stratum key to the side's time bins there (keys in display order; B's order wins).
    ``replica_hour_price`` (GPU-hour price x GPUs per replica) enables the cost figures where every bin
    knows its replica-seconds; ``b_tokens_per_week`` (B's output tokens scaled to a week, all strata) turns
    the cost difference into a saving per week. Edge cases: no shared stratum -> every metric
    "inconclusive"; bad confidence / minimums or a negative / non-finite sum -> ``ValueError``.
    """
    z = _check(confidence, min_bins, min_drafts, min_requests)
    for bins in [*a.values(), *b.values()]:
        _validate(bins)
    shared = [s for s in b if s in a and (b[s] and a[s])]
    # a band a side visited for fewer than min_bins time bins (a load transition, mostly) has no interval
    # of its own: it is left out, and said so
    thin = [s for s in shared if min(len(a[s]), len(b[s])) < min_bins]
    strata = [s for s in shared if s not in thin]
    a_only = tuple(s for s in a if s not in shared and a[s])
    b_only = tuple(s for s in b if s not in shared and b[s])
    weights, frac = _side_weights(b, strata)
    sides = {"a": a, "b": b}
    drafts = {k: math.fsum(x.drafts for s in strata for x in v[s]) for k, v in sides.items()}
    base_short = None
    if not shared:
        base_short = "no concurrency band both sides ran in: nothing load-matched to compare"
    elif not strata:
        base_short = f"no band both sides ran in for {min_bins} time bins or more: nothing load-matched to compare"

    def short_drafts() -> str | None:
        if base_short:
            return base_short
        low = [f"{k.upper()}: {drafts[k]:.0f} drafts (< {min_drafts:g})" for k in sides if drafts[k] < min_drafts]
        return "too little data: " + "; ".join(low) if low else None

    out: list[MetricComparison] = []

    def add(name: str, ests: dict[str, Estimate], short: str | None, higher: bool = True) -> None:
        ch, lo, hi = relative_change(ests["a"], ests["b"], z)
        label, why = verdict_of(ch, lo, hi, higher_is_better=higher, short=short)
        out.append(MetricComparison(name, ests["a"].value, ests["b"].value, ch, lo, hi, label, why, higher))

    def ratio_metric(y, x) -> dict[str, Estimate]:
        return {k: _standardise([ratio_variance([(y(q), x(q)) for q in v[s]])[:2] for s in strata], weights)
                for k, v in sides.items()}

    sd = short_drafts()
    add("alpha", ratio_metric(lambda q: q.accepted, lambda q: q.draft_tokens), sd)
    tau = ratio_metric(lambda q: q.accepted, lambda q: q.drafts)
    add("tau", {k: Estimate(None if e.value is None else 1.0 + e.value, e.variance) for k, e in tau.items()}, sd)
    n_pos = min((len(x.per_pos) for v in sides.values() for s in strata for x in v[s] if x.per_pos), default=0)
    for i in range(n_pos):
        def y(q: Bin, i: int = i) -> float:
            return q.per_pos[i] if len(q.per_pos) > i else 0.0

        def x(q: Bin, i: int = i) -> float:
            return q.drafts if i == 0 else (q.per_pos[i - 1] if len(q.per_pos) > i - 1 else 0.0)

        add(f"p_{i}", ratio_metric(y, x), sd)
    # measured speedup against each side's own baseline bins
    reqs = {k: min((math.fsum(x.tpot_count for x in v[s]) + 0 for s in strata), default=0.0) for k, v in sides.items()}
    breqs = {k: min((math.fsum(x.base_tpot_count for x in v[s]) for s in strata), default=0.0) for k, v in sides.items()}
    s_short = base_short
    if not s_short:
        low = [f"{k.upper()}: {min(reqs[k], breqs[k]):.0f} TPOT observations in a band, spec or baseline "
               f"(< {min_requests:g})" for k in sides if min(reqs[k], breqs[k]) < min_requests]
        s_short = "too little data: " + "; ".join(low) if low else None
    sp = {}
    for k, v in sides.items():
        per = []
        for s in strata:
            val, var_log, _ = speedup_variance(v[s])
            per.append((val, None if val is None or var_log is None else var_log * val * val))
        sp[k] = _standardise(per, weights)
    if not s_short and any(e.value is None for e in sp.values()):
        s_short = "no baseline TPOT in the compared bands: no measured speedup"
    add("measured_speedup", sp, s_short)
    # cost per 1 M output tokens
    saving = (None, None, None)
    cost_known = replica_hour_price is not None and all(
        x.replica_seconds is not None for v in sides.values() for s in strata for x in v[s])
    if cost_known and strata:
        costs = {}
        for k, v in sides.items():
            per = []
            for s in strata:
                r, var, _ = ratio_variance([(x.replica_seconds or 0.0, x.tokens) for x in v[s]])
                scale = replica_hour_price / 3600.0 * MILLION
                point = cost_per_mtok(replica_hour_price, 1.0 / r) if r else None
                per.append((point, None if var is None else var * scale * scale))
            costs[k] = _standardise(per, weights)
        add("cost_per_mtok", costs, base_short, higher=False)
        ca, cb = costs["a"], costs["b"]
        if b_tokens_per_week is not None and ca.value is not None and cb.value is not None:
            per_week = b_tokens_per_week / MILLION
            pt = per_week * (ca.value - cb.value)
            if ca.variance is not None and cb.variance is not None:
                se = per_week * math.sqrt(ca.variance + cb.variance)
                saving = (pt, pt - z * se, pt + z * se)
            else:
                saving = (pt, None, None)
    notes = [f"band {_key_text(s)} left out: fewer than {min_bins} time bins on a side" for s in thin]
    if frac is not None and strata and frac < 1.0:
        notes.append(f"{frac * 100:.0f} % of B's traffic is in bands A also ran in; the rest is not compared")
    return Comparison(strata=tuple(strata), a_only=a_only, b_only=b_only, weights=tuple(weights),
                      compared_fraction=frac if strata else None, metrics=tuple(out), saving_per_week=saving[0],
                      saving_per_week_low=saving[1], saving_per_week_high=saving[2],
                      drafts=(drafts["a"], drafts["b"]), confidence=float(confidence), notes=tuple(notes))


def _key_text(s: Hashable) -> str:
    return " ".join(map(str, s)) if isinstance(s, tuple) else str(s)


def percent_text(change: float | None, low: float | None, high: float | None) -> str:
    """"+23 % (18–28 %)", the sentence's form of a relative change and its interval."""
    if change is None:
        return "n/a"
    if low is None or high is None:
        return f"{_signed(change, plus=True)} % (no interval)"
    return f"{_signed(change, plus=True)} % ({_signed(low)}–{_signed(high)} %)"


def _signed(x: float, *, plus: bool = False) -> str:
    """A percentage rounded to a whole number with a typographic minus ("−2"), "+" only when asked; never "-0"."""
    v = round(x * 100) + 0
    return f"−{-v}" if v < 0 else (f"+{v}" if plus else f"{v}")


def standardised_histograms(a: Mapping[Hashable, Mapping[int, Sequence[float]]],
                            b: Mapping[Hashable, Mapping[int, Sequence[float]]],
                            strata: Sequence[Hashable]) -> tuple[list[list[float]], list[list[float]]]:
    """Per-time-bin cumulative histogram rows (A's, B's) for a P99 verdict at B's load mix.

    a[s][t], b[s][t]: a side's cumulative bucket counts of stratum s in time bin t (+Inf count last). Only
    strata of `strata` that both sides observed count. B's rows are its counts summed over those strata;
    A's are its counts with stratum s scaled by w_s = (n_B,s / n_B) / (n_A,s / n_A) (n: the observations,
    the +Inf counts), so A's distribution is the mixture of its per-stratum distributions in B's proportions
    ("what A did at B's load"), with A's own number of observations (n_A). Scaling a cumulative row keeps it
    cumulative, so the latency verdict's bootstrap over time bins applies as it is."""
    def total(side, s) -> float:
        return float(sum(row[-1] for row in side.get(s, {}).values() if len(row)))

    shared = [s for s in strata if total(a, s) > 0 and total(b, s) > 0]
    n_a, n_b = sum(total(a, s) for s in shared), sum(total(b, s) for s in shared)

    def rows(side, scale) -> list[list[float]]:
        per_t: dict[int, list[float]] = {}
        for s in shared:
            w = scale(s)
            for t, row in side.get(s, {}).items():
                cur = per_t.get(t)
                per_t[t] = [w * float(x) for x in row] if cur is None else [c + w * float(x) for c, x in zip(cur, row,
                                                                                                         strict=True)]
        return [per_t[t] for t in sorted(per_t)]

    return (rows(a, lambda s: (total(b, s) / n_b) / (total(a, s) / n_a)), rows(b, lambda s: 1.0))
