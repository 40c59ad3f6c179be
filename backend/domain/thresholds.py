"""Exact comparison of a ratio of counts with a configured threshold.

A threshold is configured as decimal text (``0.55``); a ratio of counts (accepted / draft tokens) that
equals it exactly must compare as equal. In floating point it does not: ``11 < 0.55 * 20`` is true
(0.55 * 20 = 11.000000000000002), so a request with alpha exactly 0.55 would count as below a 0.55
threshold. Here the threshold is read as the decimal it was written as (0.55 -> 11/20, via the shortest
decimal that round-trips the float) and the comparison is a cross-multiplication in exact rational
arithmetic: ``accepted * 20 < 11 * draft_tokens``. Counts may be floats (a Prometheus ``increase()``);
a float converts to a Fraction exactly, so only the threshold's binary rounding is undone.

One rule for the whole product: alert evaluation, rollout gates, the fleet row state and the per-request
"share below" (whose SQL uses the same numerator / denominator pair, `as_pair`) all call these.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from numbers import Rational

Number = int | float | Fraction | Decimal | str


def exact(threshold: Number) -> Fraction:
    """The threshold as the decimal it was configured as: 0.55 -> 11/20, "0.42" -> 21/50, 1 -> 1.

    A float is read through its shortest round-tripping decimal text (``repr``), never its binary
    value (0.55 is 0.55000000000000004441 in binary). NaN and infinities are rejected."""
    if isinstance(threshold, bool):
        raise TypeError("a threshold is a number, not a bool")
    if isinstance(threshold, Rational):
        return Fraction(threshold)
    if isinstance(threshold, float):
        if not math.isfinite(threshold):
            raise ValueError(f"threshold must be finite, got {threshold!r}")
        return Fraction(Decimal(repr(threshold)))
    d = Decimal(str(threshold).strip()) if isinstance(threshold, str) else threshold
    if not d.is_finite():
        raise ValueError(f"threshold must be finite, got {threshold!r}")
    return Fraction(d)


def as_pair(threshold: Number) -> tuple[int, int]:
    """(p, q) with threshold == p / q, q > 0, in lowest terms: for SQL's ``accepted * q < p * draft_tokens``."""
    f = exact(threshold)
    return f.numerator, f.denominator


def _count(x: float | Fraction) -> Fraction:
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f"count must be finite, got {x!r}")
    return Fraction(x)


def compare_ratio(num: float | Fraction | None, den: float | Fraction | None,
                  threshold: Number) -> int | None:
    """Sign of num/den - threshold, exactly: -1 below, 0 equal, 1 above. None when the ratio is undefined
    (a missing count or den <= 0 — undefined is never read as below or above)."""
    if num is None or den is None:
        return None
    n, d = _count(num), _count(den)
    if d <= 0:
        return None
    t = exact(threshold)
    lhs, rhs = n * t.denominator, t.numerator * d
    return (lhs > rhs) - (lhs < rhs)


def ratio_below(num, den, threshold: Number) -> bool | None:
    """num/den < threshold, exactly (None when undefined)."""
    c = compare_ratio(num, den, threshold)
    return None if c is None else c < 0


def ratio_at_least(num, den, threshold: Number) -> bool | None:
    """num/den >= threshold, exactly (None when undefined)."""
    c = compare_ratio(num, den, threshold)
    return None if c is None else c >= 0


def value_below(value: float | None, threshold: Number) -> bool | None:
    """A ratio known only as a float (no counts behind it) against the threshold: the float's decimal text
    is compared exactly with the threshold's, so 0.55 (the correctly rounded 11/20) is not below 0.55."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return exact(value) < exact(threshold)


def value_at_least(value: float | None, threshold: Number) -> bool | None:
    b = value_below(value, threshold)
    return None if b is None else not b


def plus(threshold: Number, margin: Number) -> Fraction:
    """threshold + margin in decimal (0.55 + 0.05 = 0.6 exactly, not 0.6000000000000001)."""
    return exact(threshold) + exact(margin)


def rate_below(rate: float | None, threshold: Number, *, num=None, den=None) -> bool | None:
    """A rate (e.g. alpha = A/D) below the threshold: from its counts num/den exactly when both are known
    and den > 0, else from the rate's decimal value. None when undefined (no rate)."""
    if num is not None and den:
        return ratio_below(num, den, threshold)
    return value_below(rate, threshold)
