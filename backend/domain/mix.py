"""Mixed traffic: pool counters, never average ratios (spec-math §1.3, §6).

  r_mix   = sum_c A_c / sum_c D_c = sum_c w_c r_c with draft-token shares w_c
  tau_mix = 1 + sum_c A_c / sum_c N_c = 1 / sum_c (s_c / tau_c) with output-token shares s_c
  S_mix   = 1 / sum_c (s_c / S_c)   (total baseline time / total spec time)

A mean of class rates is right only when every class verified the same number of draft tokens (MIX-04).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from backend.domain.acceptance import (
    _check_prob,
    _num,
    acceptance_rate,
    check_k,
    mean_acceptance_length,
    seed_alpha,
)

BASES = ("draft-tokens", "requests", "output-tokens")


@dataclass(frozen=True)
class ClassTotals:
    """Window increases of one traffic class (or of the pool). ``None`` = no series for that counter.

    ``missing`` (pooled results only): names of classes that had no series at all and were excluded,
    so the pooled result is incomplete.
    """

    name: str
    drafts: float | None
    draft_tokens: float | None
    accepted: float | None
    per_pos: tuple[float | None, ...] | None = None
    missing: tuple[str, ...] = ()

    @property
    def incomplete(self) -> bool:
        return bool(self.missing)


def _sum(vals: Sequence[float | None]) -> float | None:
    present = [v for v in (_num(x) for x in vals) if v is not None]
    return math.fsum(present) if present else None


def pooled(classes: Sequence[ClassTotals], name: str = "pooled") -> ClassTotals:
    """Sum counters over classes (the only correct way to mix; MIX-04: 43000/70000 = 0.6143).

    Edge cases:
      * a class with no series at all (all counters ``None``) is excluded and listed in ``missing``
        (the result is incomplete) - never counted as 0.
      * a counter that is ``None`` in every remaining class stays ``None``; otherwise ``None``s are skipped.
      * per_pos is summed position-wise only if every remaining class has it with the same length
        (same K); otherwise ``None`` (per-position values "not evaluable").
      * no classes -> every counter ``None``.
    """
    def has_data(c: ClassTotals) -> bool:
        return any(_num(v) is not None for v in (c.drafts, c.draft_tokens, c.accepted))

    present = [c for c in classes if has_data(c)]
    missing = tuple(c.name for c in classes if not has_data(c))
    per_pos: tuple[float | None, ...] | None = None
    lens = {len(c.per_pos) if c.per_pos is not None else None for c in present}
    if present and None not in lens and len(lens) == 1:
        n_pos = lens.pop()
        per_pos = tuple(_sum([c.per_pos[i] for c in present]) for i in range(n_pos))  # type: ignore[index]
    return ClassTotals(
        name=name,
        drafts=_sum([c.drafts for c in present]),
        draft_tokens=_sum([c.draft_tokens for c in present]),
        accepted=_sum([c.accepted for c in present]),
        per_pos=per_pos,
        missing=missing,
    )


@dataclass(frozen=True)
class MixedRates:
    """Pooled acceptance of a set of classes; ``incomplete`` when a class had no series."""

    acceptance_rate: float | None
    mean_acceptance_length: float | None
    seed_alpha: float | None
    incomplete: bool
    missing: tuple[str, ...]


def mixed_rates(classes: Sequence[ClassTotals], k: int | None = None) -> MixedRates:
    """r, tau (and alpha_s when K is given) of the pooled classes. Edge cases: as :func:`pooled`;
    pooled N = 0 -> tau and alpha_s ``None``; pooled D = 0 -> r ``None``."""
    p = pooled(classes)
    return MixedRates(
        acceptance_rate=acceptance_rate(p.accepted, p.draft_tokens),
        mean_acceptance_length=mean_acceptance_length(p.accepted, p.drafts),
        seed_alpha=None if k is None else seed_alpha(p.accepted, p.drafts, k),
        incomplete=p.incomplete,
        missing=p.missing,
    )


def normalize_basis(basis: str) -> str:
    """Accept 'draft-tokens' / 'draft tokens' / 'draft_tokens' (etc.); ``ValueError`` for anything else."""
    b = basis.strip().lower().replace("_", "-").replace(" ", "-")
    if b not in BASES:
        raise ValueError(f"share basis must be one of {', '.join(BASES)}; got {basis!r}")
    return b


def _shares(raw: Sequence[float]) -> list[float]:
    vals = [float(s) for s in raw]
    if any(not math.isfinite(s) or s < 0 for s in vals):
        raise ValueError("shares must be finite numbers >= 0")
    total = math.fsum(vals)
    if total <= 0:
        raise ValueError("shares must not all be 0")
    return [s / total for s in vals]


def mixed_alpha_from_shares(items: Sequence[tuple[float, float]], k: int, basis: str = "draft-tokens",
                            lengths: Sequence[float] | None = None) -> float | None:
    """Mixed alpha from per-class (alpha, share) pairs; shares are normalised to sum to 1.

    ``alpha`` is each class's alpha_s (= vLLM rate r for full-length drafts, D = N K).
      * basis "draft-tokens": shares of draft tokens -> r_mix = sum w_c alpha_c (MIX-01: 0.61).
      * basis "output-tokens": shares of output tokens -> tau_mix = 1/sum(s_c/tau_c), tau_c = 1 + K alpha_c,
        alpha_mix = (tau_mix - 1)/K.
      * basis "requests": request shares; output-token shares are share_c * L_c with ``lengths`` L_c
        (relative mean output lengths, default all equal): 70 % chat at 0.7 / 30 % code at 0.4, K = 5
        -> 0.583 at equal length, 0.502 with code answers 3x longer.
    Edge cases: empty ``items`` -> ``None``; alpha outside [0, 1], negative/all-zero shares or lengths,
    ``lengths`` with a basis other than "requests" or of the wrong size, unknown basis -> ``ValueError``.
    """
    k = check_k(k)
    b = normalize_basis(basis)
    if not items:
        return None
    alphas = [_check_prob(a, "class alpha") for a, _ in items]
    if lengths is not None and b != "requests":
        raise ValueError("lengths only apply to the 'requests' share basis")
    if b == "draft-tokens":
        return math.fsum(w * a for w, a in zip(_shares([s for _, s in items]), alphas))
    raw = [float(s) for _, s in items]
    if b == "requests" and lengths is not None:
        if len(lengths) != len(items):
            raise ValueError("lengths must give one length per class")
        if any(not math.isfinite(float(length)) or float(length) <= 0 for length in lengths):
            raise ValueError("lengths must be finite numbers > 0")
        raw = [s * float(length) for s, length in zip(raw, lengths)]
    shares = _shares(raw)
    tau_mix = 1.0 / math.fsum(s / (1.0 + k * a) for s, a in zip(shares, alphas))
    return (tau_mix - 1.0) / k


def draft_token_weights(items: Sequence[tuple[float, float]], k: int) -> list[float]:
    """Draft-token weights w_c of classes given (alpha_s, output-token share): w_c ∝ s_c / tau_c.

    A low-acceptance class needs more steps (and draft tokens) per output token, so it weighs more than
    its output share. Edge cases: as :func:`mixed_alpha_from_shares`.
    """
    k = check_k(k)
    shares = _shares([s for _, s in items])
    raw = [s / (1.0 + k * _check_prob(a, "class alpha")) for (a, _), s in zip(items, shares)]
    total = math.fsum(raw)
    return [r / total for r in raw]


def mixed_speedup(items: Sequence[tuple[float | None, float]]) -> float | None:
    """Overall speedup from per-class (speedup, output-token share): 1 / sum_c (s_c / S_c).

    Shares are normalised. The arithmetic mean (or S at the naive mixed alpha) overstates it
    (MIX-06: 3.5573 vs 3.6818). Edge cases: empty ``items`` or any class speedup ``None`` -> ``None``
    (a class with no data makes the total undefined; drop it explicitly and flag "incomplete" if wanted);
    a speedup <= 0 or invalid shares -> ``ValueError``.
    """
    if not items:
        return None
    speeds = [_num(s) for s, _ in items]
    if any(s is None for s in speeds):
        return None
    if any(s <= 0 for s in speeds):  # type: ignore[operator]
        raise ValueError("class speedups must be > 0")
    shares = _shares([sh for _, sh in items])
    return 1.0 / math.fsum(sh / s for sh, s in zip(shares, speeds))  # type: ignore[operator]
