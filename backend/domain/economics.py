"""Speedup, break-even, margins and target speedup (spec-math §4-5).

Two equivalent models (spec-math §4):
  * measured / simple: S = tau / (1 + eps) = (1 + K alpha_s) / (1 + eps), alpha_s = A/(N K);
  * Leviathan et al. (arXiv 2211.17192, Thm 3.8) with per-token a, draft cost c and verify cost v:
    S = (1 - a^(K+1)) / ((1 - a)(1 + v + K c)).
They agree once eps = v + K c and alpha_s = r(a); they differ only when the wrong alpha goes in.

Conventions: ``None`` = undefined (missing input, zero denominator, infeasible target). Parameters that make
no sense raise ``ValueError``: K not an integer >= 1, eps <= -1, c or v < 0, alpha/a outside [0, 1],
target speedup <= 0. Measured inputs (tau, measured speedup) are not range-checked beyond finiteness.
"""

from __future__ import annotations

import math

from backend.domain.acceptance import _bisect_increasing, _check_prob, _num, check_k, tau_from_per_token


def _eps(eps: float) -> float:
    eps = float(eps)
    if not math.isfinite(eps) or eps <= -1.0:
        raise ValueError(f"overhead eps must be a finite number > -1, got {eps!r}")
    return eps


def _nonneg(x: float, name: str) -> float:
    x = float(x)
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
    return x


def _target(s: float) -> float:
    s = float(s)
    if not math.isfinite(s) or s <= 0:
        raise ValueError(f"target speedup must be a finite number > 0, got {s!r}")
    return s


def speedup(tau: float | None, eps: float | None) -> float | None:
    """S = tau / (1 + eps): decode speedup per sequence from measured tau and a measured overhead.

    Edge cases: tau or eps ``None``/NaN -> ``None``; eps <= -1 -> ``ValueError``.
    """
    tau, e = _num(tau), _num(eps)
    if tau is None or e is None:
        return None
    return tau / (1.0 + _eps(e))


def seed_speedup(k: int, alpha: float | None, eps: float | None) -> float | None:
    """S = (1 + K alpha_s) / (1 + eps). Valid only with alpha_s = A/(N K) (SS-01: 4.5/1.1 = 4.0909).

    Reading a per-token a here is the classic mistake (spec-math §8.3). Edge cases: alpha or eps
    ``None`` -> ``None``; alpha outside [0, 1] or eps <= -1 or K < 1 -> ``ValueError``.
    """
    k = check_k(k)
    a, e = _num(alpha), _num(eps)
    if a is None or e is None:
        return None
    return (1.0 + k * _check_prob(a, "alpha")) / (1.0 + _eps(e))


def break_even_alpha(k: int, eps: float | None) -> float | None:
    """alpha_s at which S = 1: eps / K (equivalently tau_be = 1 + eps; SB-01: 0.15/5 = 0.03).

    Edge cases: eps ``None`` -> ``None``; eps < 0 gives a negative value (speculation never loses);
    a value > 1 means no alpha breaks even at this K; eps <= -1 -> ``ValueError``.
    """
    k = check_k(k)
    e = _num(eps)
    return None if e is None else _eps(e) / k


def tau_breakeven(eps: float | None) -> float | None:
    """tau at which S = 1: 1 + eps. Edge cases: ``None`` -> ``None``; eps <= -1 -> ``ValueError``."""
    e = _num(eps)
    return None if e is None else 1.0 + _eps(e)


def margin_alpha(alpha_s: float | None, k: int, eps: float | None) -> float | None:
    """m_alpha = alpha_s - eps/K = (tau - 1 - eps)/K, in acceptance points; negative = net loss.

    Edge cases: any input ``None`` -> ``None``.
    """
    be = break_even_alpha(k, eps)
    a = _num(alpha_s)
    return None if a is None or be is None else a - be


def speedup_margin(s: float | None) -> float | None:
    """m_S = S - 1 (the business number). ``None`` in, ``None`` out."""
    s = _num(s)
    return None if s is None else s - 1.0


def effective_overhead(tau: float | None, measured_speedup: float | None) -> float | None:
    """eps_eff = tau / S_meas - 1 from measured tau and measured speedup at matched load (EO-01: 0.75).

    Edge cases: either ``None`` -> ``None``; S_meas <= 0 -> ``None`` (no meaningful overhead).
    """
    tau, s = _num(tau), _num(measured_speedup)
    if tau is None or s is None or s <= 0:
        return None
    return tau / s - 1.0


def alpha_for_target_speedup(k: int, eps: float | None, target: float) -> float | None:
    """alpha_s needed for a target speedup: (S (1 + eps) - 1) / K (TS-01: 0.24). d alpha/d eps = S/K.

    Edge cases: S > (K + 1)/(1 + eps) is infeasible -> ``None``; a value <= 0 is returned as is and means
    any alpha reaches the target; eps ``None`` -> ``None``; target <= 0 or eps <= -1 -> ``ValueError``.
    """
    k = check_k(k)
    s = _target(target)
    e = _num(eps)
    if e is None:
        return None
    e = _eps(e)
    if s * (1.0 + e) > k + 1:
        return None
    return (s * (1.0 + e) - 1.0) / k


def leviathan_expected_tokens(a: float | None, k: int) -> float | None:
    """E[tokens per step] = (1 - a^(K+1)) / (1 - a) (Leviathan Eq. 1); K + 1 at a = 1, 1 at a = 0.

    Edge cases: ``None`` -> ``None``; a outside [0, 1] -> ``ValueError``.
    """
    return tau_from_per_token(a, k)


def leviathan_speedup(a: float | None, k: int, c: float, v: float = 0.0) -> float | None:
    """S_L,v = (1 - a^(K+1)) / ((1 - a)(1 + v + K c)) (Thm 3.8 with a verification term v).

    Labelled "assumes position-independent acceptance". LV-06: 2.401143; LV-07: 2.450975.
    Edge cases: a ``None`` -> ``None``; c or v < 0, a outside [0, 1] -> ``ValueError``.
    """
    tokens = leviathan_expected_tokens(a, k)
    if tokens is None:
        return None
    return tokens / (1.0 + _nonneg(v, "v") + k * _nonneg(c, "c"))


def leviathan_alpha_for_target(k: int, c: float, v: float, target: float) -> float | None:
    """Per-token a for a target speedup: solve (1 - a^(K+1))/(1 - a) = S (1 + v + K c) by bisection.

    Edge cases: S (1 + v + K c) > K + 1 -> ``None`` (infeasible); <= 1 -> 0.0 (any a reaches it);
    invalid c, v, target or K -> ``ValueError``. TS-06: S = 2, K = 5, v = 0.1 -> a = 0.55938.
    """
    k = check_k(k)
    need = _target(target) * (1.0 + _nonneg(v, "v") + k * _nonneg(c, "c"))
    if need > k + 1:
        return None
    if need <= 1.0:
        return 0.0
    if need == k + 1:
        return 1.0
    return _bisect_increasing(lambda a: tau_from_per_token(a, k), need)


def leviathan_breakeven(k: int, c: float, v: float = 0.0) -> float | None:
    """Per-token a at which S_L,v = 1: solve tau(a) = 1 + v + K c. K = 1 gives a = v + c (Cor. 3.9, LB-01).

    Edge cases: 1 + v + K c > K + 1 -> ``None`` (never breaks even); v = c = 0 -> 0.0.
    """
    return leviathan_alpha_for_target(k, c, v, 1.0)


def required_k(a: float, target: float, *, c: float = 0.0, v: float = 0.0, k_max: int = 16) -> int | None:
    """Smallest K in 1..k_max whose Leviathan speedup S_L,v(a, K, c, v) reaches ``target``.

    Uses the per-token a (not alpha_s, which itself depends on K) and the overhead model
    eps(K) = v + K c (c = draft cost per token / target step cost, v = extra verification cost).
    Edge cases: no K <= k_max reaches the target -> ``None``; a outside [0, 1], c or v < 0,
    target <= 0, k_max < 1 -> ``ValueError``. With c = 0 the speedup grows with K, so only the
    smallest sufficient K is of interest; with c > 0 it peaks (see :func:`optimal_k`).
    """
    _check_prob(a, "per-token acceptance a")
    s = _target(target)
    for k in range(1, check_k(k_max) + 1):
        val = leviathan_speedup(a, k, c, v)
        if val is not None and val >= s:
            return k
    return None


def optimal_k(a: float, *, c: float = 0.0, v: float = 0.0, k_max: int = 16) -> tuple[int, float]:
    """K in 1..k_max maximising S_L,v(a, K, c, v), with that speedup (ties -> the smaller K).

    Edge cases: invalid a, c, v or k_max -> ``ValueError``; never returns ``None``.
    """
    _check_prob(a, "per-token acceptance a")
    best = (1, float(leviathan_speedup(a, 1, c, v)))
    for k in range(2, check_k(k_max) + 1):
        val = float(leviathan_speedup(a, k, c, v))
        if val > best[1]:
            best = (k, val)
    return best
