"""K advisor: which draft length K maximises the decode speedup, per traffic class and for the mix.

Pure math, no I/O (docs/k-advisor.md has the formulas and a worked example). Positions are numbered
1..K here (spec-math §3 numbers them 0..K-1): p_j = P(token j accepted | tokens 1..j-1 accepted).

  * u_j = p_1 ... p_j (unconditional acceptance at position j), tau(K') = 1 + u_1 + ... + u_K' for K' <= K:
    the bonus/corrected token plus the expected accepted draft tokens (spec-math §2: tau = 1 + A/N,
    §3: sum u_i = tau - 1). Truncating a chain draft at K' < K keeps exactly its first K' positions.
  * K' > K has no measurement: p_j for j > K is a labelled extrapolation of a fitted decay
    log p_j = c + b (j - 1) (ordinary least squares over the usable positions: p_j > 0, and at least
    ``min_trials`` trials when the trials are known). One usable position: flat (geometric, p_j = p_1).
    None: no extrapolation (null). A rising fit (mixing biases pooled p_j upward, spec-math §3) is not
    extrapolated upward: positions beyond K repeat the last usable p. Extrapolated p are capped at 1.
  * overhead eps(K') = eps0 + K' eps_tok. One measurement eps_m at K_m: eps0 = share eps_m,
    eps_tok = (1 - share) eps_m / K_m (share: the fixed part of the overhead, an assumption; default 0 =
    all overhead scales with K, Leviathan's eps = v + K c with v ~ 0 at memory-bound batches).
    Measurements at two or more distinct K (same model, drafter and concurrency band): the least-squares
    line through the (K, eps) points, an exact linear solve for two.
  * S(K') = tau(K') / (1 + eps(K')) (spec-math §4). Mix with output-token shares s_c (spec-math §6):
    the steps class c needs at K' are T_c / tau_c(K'), so tau_mix(K') = 1 / sum_c s_c / tau_c(K') (pooled
    token and step counts; at the measured K this is 1 + sum A / sum N). Each class keeps its own
    eps_c(K'); the mix pools step time: 1 + eps_mix = sum_c (s_c / tau_c)(1 + eps_c) / sum_c s_c / tau_c,
    S_mix = tau_mix / (1 + eps_mix) = 1 / sum_c s_c / S_c.

``None`` = undefined. Bad parameters raise ``ValueError`` (the API maps it to 422).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

FIT_LOG_LINEAR = "log-linear least squares"
FIT_FLAT = "flat (one usable position)"
FIT_NONE = "none (no usable position)"

SOURCE_SPLIT = "one measurement, assumed split"
SOURCE_FIT = "measurements at several K, linear fit"
SOURCE_GIVEN = "given"


def _finite(x: float, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        raise ValueError(f"{name} must be a finite number, got {x!r}")
    return float(x)


def _k(k: int, name: str = "K") -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {k!r}")
    return k


def check_conditional(p: Sequence[float | None], k: int) -> tuple[float | None, ...]:
    """The K conditional acceptances, each in [0, 1] or ``None`` (not reached); else ``ValueError``."""
    k = _k(k)
    if len(p) != k:
        raise ValueError(f"need one conditional acceptance per position 1..{k}, got {len(p)}")
    out: list[float | None] = []
    for j, x in enumerate(p, start=1):
        if x is not None and not 0.0 <= _finite(x, f"p_{j}") <= 1.0:
            raise ValueError(f"p_{j} must be in [0, 1], got {x!r}")
        out.append(None if x is None else float(x))
    return tuple(out)


def unconditional(p: Sequence[float | None]) -> list[float | None]:
    """u_j = p_1 ... p_j. A ``None`` p_j after a zero u stays 0 (nothing reaches it anyway); a ``None``
    with drafts still alive makes u_j and every later u undefined."""
    out: list[float | None] = []
    u: float | None = 1.0
    for x in p:
        if u is not None and u != 0.0:
            u = None if x is None else u * x
        out.append(u)
    return out


def tokens_per_step(u: Sequence[float | None], k_prime: int) -> float | None:
    """tau(K') = 1 + u_1 + ... + u_K' (the bonus token plus the expected accepted drafts); ``None`` if any
    needed u is undefined or K' exceeds the curve."""
    k_prime = _k(k_prime, "K'")
    if k_prime > len(u) or any(x is None for x in u[:k_prime]):
        return None
    return 1.0 + math.fsum(u[:k_prime])  # type: ignore[arg-type]


@dataclass(frozen=True)
class DecayFit:
    """log p_j = intercept + slope (j - 1) over ``positions`` (1-based); ``method`` says which fit."""

    method: str
    positions: tuple[int, ...]
    intercept: float | None = None
    slope: float | None = None
    rising: bool = False  # fitted slope > 0: extrapolated flat at the last usable p instead
    last_p: float | None = None

    def p_at(self, j: int) -> float | None:
        """The extrapolated p_j (capped at 1); ``None`` without a fit."""
        if self.method == FIT_NONE or self.intercept is None:
            return None
        if self.method == FIT_FLAT or self.rising:
            return self.last_p
        return min(1.0, math.exp(self.intercept + self.slope * (j - 1)))  # type: ignore[operator]


def fit_decay(p: Sequence[float | None], trials: Sequence[float | None] | None = None,
              min_trials: float = 0.0) -> DecayFit:
    """Fit the decay of p_j with depth (see the module doc). ``trials[j-1]`` = drafts that reached
    position j (P_{j-1}); positions with fewer than ``min_trials`` are left out when trials are known."""
    pts = [(j, x) for j, x in enumerate(p, start=1)
           if x is not None and x > 0 and (trials is None or (trials[j - 1] or 0) >= min_trials)]
    if not pts:
        return DecayFit(FIT_NONE, ())
    last = pts[-1][1]
    if len(pts) == 1:
        return DecayFit(FIT_FLAT, (pts[0][0],), intercept=math.log(last), slope=0.0, last_p=last)
    xs = [float(j - 1) for j, _ in pts]
    ys = [math.log(x) for _, x in pts]
    mx, my = math.fsum(xs) / len(xs), math.fsum(ys) / len(ys)
    slope = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys)) / math.fsum((x - mx) ** 2 for x in xs)
    return DecayFit(FIT_LOG_LINEAR, tuple(j for j, _ in pts), intercept=my - slope * mx, slope=slope,
                    rising=slope > 0, last_p=last)


@dataclass(frozen=True)
class Overhead:
    """eps(K) = eps0 + K eps_tok, with where the split came from."""

    eps0: float
    eps_tok: float
    source: str
    points: tuple[tuple[int, float], ...] = ()
    note: str | None = None

    def at(self, k: int) -> float:
        return self.eps0 + k * self.eps_tok


def split_overhead(eps: float, k: int, eps0_share: float = 0.0) -> Overhead:
    """One measured eps at K: eps0 = share eps, eps_tok = (1 - share) eps / K. eps >= 0, share in [0, 1]."""
    k = _k(k)
    eps, share = _finite(eps, "eps"), _finite(eps0_share, "eps0 share")
    if eps < 0:
        raise ValueError(f"measured eps must be >= 0 to split it into eps0 + K eps_tok, got {eps!r}")
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"eps0 share must be in [0, 1], got {eps0_share!r}")
    return Overhead(share * eps, (1.0 - share) * eps / k, SOURCE_SPLIT, ((k, eps),),
                    note=f"assumed: {share:g} of the measured eps is fixed, the rest grows with K")


def fit_overhead(points: Sequence[tuple[int, float]]) -> Overhead:
    """Least-squares line eps = eps0 + K eps_tok through measurements at >= 2 distinct K (exact for two).

    ``ValueError`` with fewer than two distinct K, or when the line is not physical (eps_tok < 0: more
    draft tokens cheaper; eps0 < 0): the caller falls back to :func:`split_overhead`.
    """
    pts = [(_k(k), _finite(e, "eps")) for k, e in points]
    if len({k for k, _ in pts}) < 2:
        raise ValueError("calibrating eps(K) needs measurements at two different K")
    mk = math.fsum(k for k, _ in pts) / len(pts)
    me = math.fsum(e for _, e in pts) / len(pts)
    slope = math.fsum((k - mk) * (e - me) for k, e in pts) / math.fsum((k - mk) ** 2 for k, _ in pts)
    eps0 = me - slope * mk
    if slope < 0 or eps0 < -1e-12:
        raise ValueError(f"the measurements give eps0 = {eps0:.4g}, eps_tok = {slope:.4g} (not physical: "
                         "overhead must not fall as K grows, nor be negative at K = 0)")
    return Overhead(max(eps0, 0.0), slope, SOURCE_FIT, tuple(pts))


def calibrate(eps: float, k: int, *, eps0_share: float = 0.0,
              points: Sequence[tuple[int, float]] = ()) -> Overhead:
    """The fit through ``points`` plus (k, eps) when they span two K and are physical, else the split."""
    k, eps = _k(k), _finite(eps, "eps")
    allpts = [(k, eps), *[(kk, e) for kk, e in points if (kk, e) != (k, eps)]]
    if len({kk for kk, _ in allpts}) >= 2:
        try:
            return fit_overhead(allpts)
        except ValueError as exc:
            split = split_overhead(eps, k, eps0_share)
            return Overhead(split.eps0, split.eps_tok, split.source, split.points,
                            note=f"{split.note}; two-K fit refused: {exc}")
    return split_overhead(eps, k, eps0_share)


@dataclass(frozen=True)
class KRow:
    k: int
    tau: float | None
    eps: float | None  # eps(K'): the class's modelled overhead; the mix's pooled one (None where tau is)
    speedup: float | None
    extrapolated: bool


@dataclass(frozen=True)
class Advice:
    """Rows for each candidate K', the best one (ties: the smaller K) and the gain over the current K."""

    name: str
    current_k: int
    rows: tuple[KRow, ...]
    best_k: int | None
    best_speedup: float | None
    current_speedup: float | None
    gain: float | None  # best / current - 1 (0 when the current K is best)
    best_is_extrapolated: bool
    fit: DecayFit | None = None
    conditional: tuple[float | None, ...] = ()
    flags: tuple[str, ...] = field(default_factory=tuple)


def candidates(k: int) -> list[int]:
    """K - 1 (when >= 1), K, K + 1, K + 2."""
    return [x for x in (k - 1, k, k + 1, k + 2) if x >= 1]


def extended_unconditional(p: Sequence[float | None], upto: int, fit: DecayFit) -> list[float | None]:
    """u_1..u_upto: measured up to K = len(p), then u_j = u_{j-1} * fitted p_j."""
    u = unconditional(p)
    for j in range(len(p) + 1, upto + 1):
        prev = u[-1] if u else 1.0
        if prev == 0.0:
            u.append(0.0)
        else:
            pj = fit.p_at(j)
            u.append(None if prev is None or pj is None else prev * pj)
    return u


def _best(name: str, k: int, rows: list[KRow], **extra) -> Advice:
    defined = [r for r in rows if r.speedup is not None]
    best = max(defined, key=lambda r: (r.speedup, -r.k)) if defined else None
    cur = next((r.speedup for r in rows if r.k == k), None)
    gain = None if best is None or cur is None or cur == 0 else best.speedup / cur - 1.0  # type: ignore[operator]
    return Advice(name=name, current_k=k, rows=tuple(rows), best_k=best.k if best else None,
                  best_speedup=best.speedup if best else None, current_speedup=cur, gain=gain,
                  best_is_extrapolated=bool(best and best.extrapolated), **extra)


def advise_class(name: str, p: Sequence[float | None], k: int, overhead: Overhead, *,
                 trials: Sequence[float | None] | None = None, min_trials: float = 0.0) -> Advice:
    """tau, eps and S for each candidate K' of one class from its measured p_1..p_K."""
    p = check_conditional(p, k)
    fit = fit_decay(p, trials, min_trials)
    ks = candidates(k)
    u = extended_unconditional(p, max(ks), fit)
    rows = []
    for kp in ks:
        tau = tokens_per_step(u, kp)
        eps = overhead.at(kp)
        rows.append(KRow(kp, tau, eps, None if tau is None else tau / (1.0 + eps), kp > k))
    flags = ("rising_fit_extrapolated_flat",) if fit.rising else ()
    return _best(name, k, rows, fit=fit, conditional=p, flags=flags)


def advise_mix(classes: Sequence[tuple[Advice, float]], name: str = "mix") -> Advice:
    """The traffic mix from per-class advice (each with its own tau and overhead) and output-token shares
    (weights; normalised here). Counts are pooled, never borrowed: class c needs s_c / tau_c(K') steps at
    K', each costing 1 + eps_c(K') plain steps, so

        tau_mix(K') = sum s / sum (s_c / tau_c(K'))          (pooled tokens over pooled steps)
        1 + eps_mix(K') = sum (s_c (1 + eps_c) / tau_c) / sum (s_c / tau_c)   (pooled step time)
        S_mix(K') = tau_mix / (1 + eps_mix) = sum s / sum (s_c / S_c(K'))

    With one overhead for every class, eps_mix = eps. Undefined when any class with a share > 0 is undefined
    at K'. All classes must share the current K. ``ValueError`` on no classes, different K or bad shares.
    """
    if not classes:
        raise ValueError("the mix needs at least one class")
    ks = {a.current_k for a, _ in classes}
    if len(ks) != 1:
        raise ValueError(f"classes have different K ({sorted(ks)}): no common candidates")
    k = ks.pop()
    shares = [_finite(s, f"share of {a.name}") for a, s in classes]
    if any(s < 0 for s in shares) or math.fsum(shares) <= 0:
        raise ValueError("shares must be >= 0 and not all 0")
    total = math.fsum(shares)
    rows = []
    for idx, kp in enumerate(candidates(k)):
        used = [(a.rows[idx], s) for a, s in classes if s > 0]
        steps = None if any(r.tau is None for r, _ in used) else math.fsum(s / r.tau for r, s in used)  # type: ignore[operator]
        if steps is None:
            tau, eps = None, None
        else:
            tau = total / steps
            eps = math.fsum(s * (1.0 + r.eps) / r.tau for r, s in used) / steps - 1.0  # type: ignore[operator]
        rows.append(KRow(kp, tau, eps, None if tau is None or eps is None else tau / (1.0 + eps), kp > k))
    return _best(name, k, rows)
