"""Acceptance: the three alphas, tau and the per-position curves (spec-math §2-3).

Inputs are window increases (Δ counters, see ``counters.py``):
N = drafts, D = draft tokens, A = accepted tokens (bonus excluded), P_i = accepted per position i.

Conventions: ``None`` means undefined / no data, never 0. Functions fed by measured counters never raise
on odd data (A > D, increasing P_i ...): they compute and leave the flagging to :func:`check_invariants`.
Model parameters that make no sense (``k`` < 1 or not an integer) raise ``ValueError``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# data-quality flags returned by check_invariants
FLAG_NEGATIVE = "negative_count"
FLAG_ACCEPTED_GT_DRAFT_TOKENS = "accepted_gt_draft_tokens"
FLAG_DRAFT_TOKENS_GT_K_DRAFTS = "draft_tokens_gt_k_times_drafts"
FLAG_PER_POS_LEN = "per_pos_length_ne_k"
FLAG_PER_POS_GT_DRAFTS = "per_pos_0_gt_drafts"
FLAG_PER_POS_INCREASING = "per_pos_increasing"
FLAG_SUM_NE_ACCEPTED = "sum_per_pos_ne_accepted"
FLAG_PER_POS_NOT_EVALUABLE = "per_position_not_evaluable"

_REL_TOL = 1e-9  # increases computed by extrapolation are floats; compare with a relative tolerance


def _num(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def check_k(k: float) -> int:
    """Validate ``num_speculative_tokens``: an integer >= 1 (int, numpy int or integral float), else ``ValueError``."""
    try:
        ok = not isinstance(k, (bool, str, bytes)) and float(k).is_integer() and int(k) >= 1
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise ValueError(f"K must be an integer >= 1, got {k!r}")
    return int(k)


def _ratio(num: float | None, den: float | None) -> float | None:
    num, den = _num(num), _num(den)
    if num is None or den is None or den == 0:
        return None
    return num / den


def acceptance_rate(accepted: float | None, draft_tokens: float | None) -> float | None:
    """vLLM's draft acceptance rate r = A / D.

    Edge cases: D = 0, ``None`` or NaN -> ``None``; A = 0 with D > 0 -> a real 0.0. r depends on K, so
    always show K next to it. A > D (scrape skew) gives r > 1 unchanged; flag it via check_invariants.
    """
    return _ratio(accepted, draft_tokens)


def seed_alpha(accepted: float | None, drafts: float | None, k: int) -> float | None:
    """alpha_s = A / (N*K) = (tau - 1)/K, the alpha of the simple model S = (1 + K alpha)/(1 + eps).

    Edge cases: N = 0/``None`` -> ``None``; equals r only when no draft was trimmed (D = N*K).
    ``k`` < 1 -> ``ValueError``.
    """
    k = check_k(k)
    d = _num(drafts)
    return _ratio(accepted, None if d is None else d * k)


def mean_acceptance_length(accepted: float | None, drafts: float | None) -> float | None:
    """tau = 1 + A / N: tokens emitted per verify step, bonus/corrected token included.

    Edge cases: N = 0/``None`` -> ``None`` (vLLM's compute_acceptance_len returns 1 there, we do not;
    MAL-03); A = 0 with N > 0 -> a real 1.0.
    """
    r = _ratio(accepted, drafts)
    return None if r is None else 1.0 + r


def _clean_pos(per_pos: Sequence[float | None] | None) -> list[float | None] | None:
    return None if per_pos is None else [_num(p) for p in per_pos]


def per_position_unconditional(per_pos: Sequence[float | None] | None,
                               drafts: float | None) -> list[float | None] | None:
    """u_i = P_i / N (vLLM's "per-position acceptance rate").

    Edge cases: ``per_pos`` ``None`` (series missing) -> ``None``; N = 0/``None`` -> a list of ``None``
    (PP-05); a missing position (``None`` entry) -> ``None`` at that position.
    """
    pos = _clean_pos(per_pos)
    if pos is None:
        return None
    return [_ratio(p, drafts) for p in pos]


def per_position_conditional(per_pos: Sequence[float | None] | None,
                             drafts: float | None) -> list[float | None] | None:
    """p_i = P_i / P_{i-1} with P_{-1} := N: P(token i accepted | tokens 0..i-1 accepted).

    Edge cases: ``per_pos`` ``None`` -> ``None``; N = 0 -> all ``None``; P_{i-1} = 0 -> p_i ``None`` (no
    draft reached position i) while P_{i-1} > 0 with P_i = 0 -> a real 0.0; a ``None`` entry makes that
    position and the next ``None``. p_i > 1 is returned as is (data-quality issue, see check_invariants).
    """
    pos = _clean_pos(per_pos)
    if pos is None:
        return None
    prev = _num(drafts)
    out: list[float | None] = []
    for p in pos:
        out.append(_ratio(p, prev))
        prev = p
    return out


def _bisect_increasing(f: Callable[[float], float], target: float, lo: float = 0.0, hi: float = 1.0) -> float:
    """Root of f(x) = target for f strictly increasing on [lo, hi] with f(lo) <= target <= f(hi)."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _power_sum(a: float, k: int) -> float:
    """a + a^2 + ... + a^k (monotone in a, exact at a = 0 and a = 1)."""
    s, term = 0.0, 1.0
    for _ in range(k):
        term *= a
        s += term
    return s


def _check_prob(x: float, name: str) -> float:
    x = float(x)
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {x!r}")
    return x


def per_token_from_rate(rate: float | None, k: int) -> float | None:
    """Per-token acceptance a (Leviathan et al., i.i.d.) from vLLM's rate r: solve a + ... + a^K = K r.

    Bisection on [0, 1] (the left side is strictly increasing, the root unique; no closed form for K >= 5).
    Assumes full-length chain drafts and position-independent acceptance.

    Edge cases: ``None``/NaN -> ``None``; r outside [0, 1] (e.g. skewed data) -> ``None`` (no solution);
    r = 0 -> 0.0, r = 1 -> 1.0; K = 1 -> a = r; ``k`` < 1 -> ``ValueError``.
    """
    k = check_k(k)
    r = _num(rate)
    if r is None or not 0.0 <= r <= 1.0:
        return None
    if r in (0.0, 1.0) or k == 1:
        return r
    return _bisect_increasing(lambda a: _power_sum(a, k), k * r)


def rate_from_per_token(a: float | None, k: int) -> float | None:
    """r(a) = alpha_s(a) = (a - a^(K+1)) / ((1 - a) K) for full-length chain drafts (i.i.d. model).

    Edge cases: ``None``/NaN -> ``None``; a = 1 -> 1.0 (the limit); a outside [0, 1] -> ``ValueError``.
    """
    k = check_k(k)
    a = _num(a)
    if a is None:
        return None
    return _power_sum(_check_prob(a, "per-token acceptance a"), k) / k


def tau_from_per_token(a: float | None, k: int) -> float | None:
    """tau(a) = 1 + a + ... + a^K = (1 - a^(K+1)) / (1 - a) (Leviathan Eq. 1); K + 1 at a = 1, 1 at a = 0.

    Edge cases: ``None``/NaN -> ``None``; a outside [0, 1] -> ``ValueError``.
    """
    k = check_k(k)
    a = _num(a)
    if a is None:
        return None
    return 1.0 + _power_sum(_check_prob(a, "per-token acceptance a"), k)


def mle_per_token(per_pos: Sequence[float | None] | None, drafts: float | None) -> float | None:
    """Maximum-likelihood per-token a: sum_i P_i / sum_i P_{i-1} (P_{-1} := N) = A / (A + N - P_{K-1}).

    The pooled conditional acceptance over tokens actually tested; equals the generating a on geometric
    data (PP-02). Assumes full-length drafts. Edge cases: per-position series missing (``None`` or any
    ``None`` entry) -> ``None``; N = 0 or nothing tested -> ``None``; empty ``per_pos`` -> ``None``.
    """
    pos = _clean_pos(per_pos)
    n = _num(drafts)
    if not pos or n is None or any(p is None for p in pos):
        return None
    return _ratio(math.fsum(pos), n + math.fsum(pos[:-1]))


@dataclass(frozen=True)
class DriftIndicators:
    """Depth-drift indicators (spec-math §3). Every field is ``None`` when not evaluable.

    last_to_first_ratio: p_{K-1} / p_0 (below 1 = decaying acceptance with depth); slope: least-squares
    slope of p_i against i; min_trials: fewest trials P_{i-1} behind any p_i (grey out below ~200);
    mle_minus_moment: MLE a minus the moment estimate from r = A/(N K) (a gap = position-dependent
    acceptance); conditional: the p_i themselves.
    """

    last_to_first_ratio: float | None
    slope: float | None
    min_trials: float | None
    mle_minus_moment: float | None = None
    conditional: tuple[float | None, ...] | None = None


def drift_indicators(per_pos: Sequence[float | None] | None, drafts: float | None) -> DriftIndicators:
    """Compute :class:`DriftIndicators` from per-position increases and N.

    Edge cases: per-position series missing or N = 0 -> all fields ``None``; p_0 = 0 -> ratio ``None``;
    fewer than 2 defined p_i -> slope ``None``. K is ``len(per_pos)``. Note mixing classes biases pooled
    p_i upward, so a flat pooled curve does not rule drift out (spec-math §3).
    """
    pos = _clean_pos(per_pos)
    n = _num(drafts)
    if not pos or n is None or n == 0:
        return DriftIndicators(None, None, None, None, None)
    cond = per_position_conditional(pos, n) or []
    ratio = _ratio(cond[-1], cond[0]) if cond[0] is not None and cond[-1] is not None else None
    pts = [(float(i), p) for i, p in enumerate(cond) if p is not None]
    slope = None
    if len(pts) >= 2:
        mx = math.fsum(x for x, _ in pts) / len(pts)
        my = math.fsum(y for _, y in pts) / len(pts)
        sxx = math.fsum((x - mx) ** 2 for x, _ in pts)
        slope = math.fsum((x - mx) * (y - my) for x, y in pts) / sxx
    trials = [n] + pos[:-1]
    min_trials = None if any(t is None for t in trials) else min(trials)
    gap = None
    mle = mle_per_token(pos, n)
    if mle is not None:
        moment = per_token_from_rate(math.fsum(pos) / (n * len(pos)), len(pos))
        gap = None if moment is None else mle - moment
    return DriftIndicators(ratio, slope, min_trials, gap, tuple(cond))


def _gt(a: float, b: float) -> bool:
    return a > b + _REL_TOL * max(abs(a), abs(b), 1.0)


def check_invariants(drafts: float | None, draft_tokens: float | None, accepted: float | None,
                     per_pos: Sequence[float | None] | None, k: int | None) -> list[str]:
    """Data-quality flags for one window and engine (spec-math §0 invariants); ``[]`` if clean.

    Checks (each only when its inputs are present; relative tolerance 1e-9 for extrapolated floats):
    negative counts; A <= D <= K*N; len(P) = K; N >= P_0 >= ... >= P_{K-1}; sum P_i = A.
    A missing per-position series gives FLAG_PER_POS_NOT_EVALUABLE ("not evaluable", never "pass").
    Trimmed drafts (D < K*N) are NOT a data-quality issue and are not flagged here (see :func:`is_trimmed`).
    """
    flags: list[str] = []
    n, d, a = _num(drafts), _num(draft_tokens), _num(accepted)
    pos = _clean_pos(per_pos)
    values = [v for v in (n, d, a) if v is not None] + [p for p in (pos or []) if p is not None]
    if any(v < 0 for v in values):
        flags.append(FLAG_NEGATIVE)
    if a is not None and d is not None and _gt(a, d):
        flags.append(FLAG_ACCEPTED_GT_DRAFT_TOKENS)
    if k is not None and d is not None and n is not None and _gt(d, k * n):
        flags.append(FLAG_DRAFT_TOKENS_GT_K_DRAFTS)
    if pos is None or any(p is None for p in pos):
        flags.append(FLAG_PER_POS_NOT_EVALUABLE)
        return flags
    if k is not None and len(pos) != k:
        flags.append(FLAG_PER_POS_LEN)
    if pos and n is not None and _gt(pos[0], n):
        flags.append(FLAG_PER_POS_GT_DRAFTS)
    if any(_gt(cur, prev) for prev, cur in itertools.pairwise(pos)):
        flags.append(FLAG_PER_POS_INCREASING)
    if a is not None:
        s = math.fsum(pos)
        if _gt(s, a) or _gt(a, s):
            flags.append(FLAG_SUM_NE_ACCEPTED)
    return flags


def is_trimmed(drafts: float | None, draft_tokens: float | None, k: int) -> bool | None:
    """True when drafts were trimmed (D < K*N), so r != alpha_s; ``None`` when N or D is missing or N = 0."""
    k = check_k(k)
    n, d = _num(drafts), _num(draft_tokens)
    if n is None or d is None or n == 0:
        return None
    return _gt(k * n, d)
