"""Data-quality rules: impossible increases are refused, never stored or repaired.

validate(record) removes every family that breaks a rule from the record and returns one Violation per
broken rule. Tolerances absorb float noise from PromQL extrapolation (relative 1e-9), nothing more.
Rules:
- not_finite: NaN or +-Inf anywhere.
- negative_increase: an increase below zero (a counter cannot go down once resets are handled).
- accepted_gt_drafted: accepted_tokens > draft_tokens.
- draft_tokens_lt_drafts: draft_tokens < drafts (every draft carries at least one token).
- per_position_increasing: accepted_per_pos[i] > accepted_per_pos[i-1] (acceptance is a prefix).
- per_position_gt_drafts: accepted_per_pos[0] > drafts.
- per_position_sum_mismatch: sum(accepted_per_pos) != accepted_tokens. A FLAG, not a refusal: the data
  is kept (spec-math §3, §9: "compute, and raise a data-quality flag"). Through Prometheus, increase()
  extrapolates each series on its own, and after a restart its zero clamp differs per series, so the
  per-position sum of a bucket next to a restart legitimately misses accepted_tokens by a little. The
  direct scrape splits an interval straddling a bucket boundary and rounds each series' part to
  SPLIT_QUANTUM on its own (domain.buckets): the sum may then miss by up to half a quantum per series,
  which is not flagged (K + 1 quanta of slack).
- histogram_not_monotone: cumulative bucket counts decreasing with le, or _count != +Inf bucket.
The spec-decode families (drafts, draft_tokens, accepted_tokens, accepted_per_pos) are refused together:
one broken member makes the others unusable for ratios.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from backend.domain.buckets import SPLIT_QUANTUM
from backend.domain.records import HISTOGRAM_FIELDS, SCALAR_FIELDS, BucketRecord, PoolKey

REL_TOL = 1e-9
SPEC_FIELDS = ("drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos")
DIPS_REFUSED = "dips_refused"  # record flag: its dips made the spec-decode increases unusable (refused)


@dataclass(frozen=True)
class Violation:
    rule: str
    detail: str
    fields: tuple[str, ...]  # the families refused; empty for a flag (the data is kept)

    @property
    def kept(self) -> bool:
        return not self.fields


def _tol(a: float, b: float = 0.0) -> float:
    return REL_TOL * max(1.0, abs(a), abs(b))


def _sum_mismatch(pp: list[float], accepted: float) -> bool:
    """Σ per position differs from accepted_tokens by more than float noise and the direct scrape's split
    rounding (half a quantum for each of the K + 1 series)."""
    return abs(sum(pp) - accepted) > max(_tol(accepted), 1e-6 * max(1.0, accepted)) + (len(pp) + 1) * SPLIT_QUANTUM


def _negative(values: list[float]) -> bool:
    low = min(values)
    return low < -REL_TOL * max(1.0, -low)


def _finite(v: float | None) -> bool:
    return v is None or math.isfinite(v)


def _check_values(rec: BucketRecord) -> list[Violation]:
    out: list[Violation] = []
    for name in SCALAR_FIELDS:
        v = getattr(rec, name)
        if not _finite(v):
            out.append(Violation("not_finite", f"{name} = {v}", (name,)))
        elif v is not None and v < -_tol(v):
            out.append(Violation("negative_increase", f"{name} = {v}", (name,)))
    if rec.accepted_per_pos is not None:
        pp = rec.accepted_per_pos
        if not all(_finite(v) for v in pp):
            out.append(Violation("not_finite", f"accepted_per_pos = {pp}", ("accepted_per_pos",)))
        elif _negative(pp):
            out.append(Violation("negative_increase", f"accepted_per_pos = {pp}", ("accepted_per_pos",)))
    for name in HISTOGRAM_FIELDS:
        h = getattr(rec, name)
        if h is None:
            continue
        values = [*h.counts, *(x for x in (h.sum, h.count) if x is not None)]
        if not values:
            continue
        if not math.isfinite(sum(values)):
            out.append(Violation("not_finite", f"{name} histogram has NaN/Inf", (name,)))
        elif _negative(values):
            out.append(Violation("negative_increase", f"{name} histogram has a negative increase", (name,)))
    return out


def _check_spec(rec: BucketRecord) -> list[Violation]:
    out: list[Violation] = []
    n, d, a, pp = rec.drafts, rec.draft_tokens, rec.accepted_tokens, rec.accepted_per_pos
    if a is not None and d is not None and a > d + _tol(a, d):
        out.append(Violation("accepted_gt_drafted", f"accepted_tokens {a} > draft_tokens {d}", SPEC_FIELDS))
    if n is not None and d is not None and d < n - _tol(n, d):
        out.append(Violation("draft_tokens_lt_drafts", f"draft_tokens {d} < drafts {n}", SPEC_FIELDS))
    if pp:
        for i in range(1, len(pp)):
            if pp[i] > pp[i - 1] + _tol(pp[i], pp[i - 1]):
                out.append(Violation("per_position_increasing",
                                     f"accepted_per_pos[{i}] {pp[i]} > accepted_per_pos[{i - 1}] {pp[i - 1]}",
                                     SPEC_FIELDS))
                break
        if n is not None and pp[0] > n + _tol(pp[0], n):
            out.append(Violation("per_position_gt_drafts", f"accepted_per_pos[0] {pp[0]} > drafts {n}",
                                 SPEC_FIELDS))
        if a is not None and _sum_mismatch(pp, a):
            out.append(Violation("per_position_sum_mismatch", f"flagged, kept: sum(accepted_per_pos) {sum(pp)} "
                                 f"!= accepted_tokens {a}", ()))
    return out


def _check_histograms(rec: BucketRecord) -> list[Violation]:
    out: list[Violation] = []
    for name in HISTOGRAM_FIELDS:
        h = getattr(rec, name)
        if h is None:
            continue
        if len(h.counts) != len(h.bounds) + 1:
            out.append(Violation("histogram_not_monotone", f"{name}: {len(h.counts)} counts for "
                                 f"{len(h.bounds)} bounds + Inf", (name,)))
            continue
        c = h.counts
        for i in range(1, len(c)):
            if c[i] < c[i - 1] and c[i] < c[i - 1] - _tol(c[i], c[i - 1]):
                le = h.bounds[i] if i < len(h.bounds) else "+Inf"
                out.append(Violation("histogram_not_monotone", f"{name}: bucket le={le} count {h.counts[i]} "
                                     f"< previous {h.counts[i - 1]}", (name,)))
                break
        else:
            if h.count is not None and abs(h.count - h.counts[-1]) > _tol(h.count, h.counts[-1]) + 1e-6:
                out.append(Violation("histogram_not_monotone", f"{name}: _count {h.count} != +Inf bucket "
                                     f"{h.counts[-1]}", (name,)))
    return out


def _clean(rec: BucketRecord) -> bool:
    """A fast, strictly stronger test (no tolerances at all): True only if no rule can fire, so the full
    checks below may be skipped. Anything it is unsure about (a tolerance case, NaN, a bad shape) is
    False and goes through the full checks, which decide."""
    vals = [v for v in (rec.drafts, rec.draft_tokens, rec.accepted_tokens, rec.generation_tokens, rec.prompt_tokens,
                        rec.finished_requests, rec.preemptions, rec.running_mean) if v is not None]
    if vals and not (math.isfinite(sum(vals)) and min(vals) >= 0):
        return False
    n, d, a, pp = rec.drafts, rec.draft_tokens, rec.accepted_tokens, rec.accepted_per_pos
    if a is not None and d is not None and not a <= d:
        return False
    if n is not None and d is not None and not d >= n:
        return False
    if pp is not None:
        if not pp:
            return False
        if not (math.isfinite(sum(pp)) and min(pp) >= 0 and pp == sorted(pp, reverse=True)):
            return False
        if n is not None and not pp[0] <= n:
            return False
        if a is not None and _sum_mismatch(pp, a):  # the rule's own test
            return False
    return _clean_histograms(rec)


def _clean_histograms(rec: BucketRecord) -> bool:
    for h in (rec.itl, rec.tpot, rec.ttft):
        if h is None:
            continue
        c = h.counts
        if len(c) != len(h.bounds) + 1 or not c:
            return False
        if not (math.isfinite(sum(c)) and c[0] >= 0 and c == sorted(c)):
            return False
        for x in (h.sum, h.count):
            if x is not None and not (math.isfinite(x) and x >= 0):
                return False
        if h.count is not None and abs(h.count - c[-1]) > _tol(h.count, c[-1]) + 1e-6:  # the rule's own test
            return False
    return True


def validate(rec: BucketRecord) -> list[Violation]:
    """Check every rule; drop the offending families from `rec` (in place); return the violations."""
    if _clean(rec):
        return []
    violations = _check_values(rec)
    bad = {f for v in violations for f in v.fields}
    _drop(rec, bad)
    more = _check_spec(rec) + _check_histograms(rec)
    _drop(rec, {f for v in more for f in v.fields})
    return violations + more


def _drop(rec: BucketRecord, fields: set[str]) -> None:
    if fields & set(SPEC_FIELDS):
        fields |= set(SPEC_FIELDS)
    for name in fields:
        setattr(rec, name, None)


# The longest pool labels the schema stores (pools / rejections columns). A label over its limit, or one
# holding a character Postgres text cannot hold (NUL), is refused for its pool: one bad target never fails
# the chunk every other pool is written in.
LABEL_LIMITS = {"model_name": 300, "traffic_class": 120, "spec_mode": 120}


def label_violation(pool: PoolKey) -> Violation | None:
    """The reason a pool's labels cannot be stored, or None when they can."""
    for name, limit in LABEL_LIMITS.items():
        value = getattr(pool, name)
        if len(value) > limit:
            return Violation("label_too_long", f"{name} is {len(value)} characters (at most {limit}): "
                             f"{value[:80]!r}...", SPEC_FIELDS)
        if "\x00" in value:
            return Violation("label_invalid", f"{name} holds a NUL character: {value[:80]!r}", SPEC_FIELDS)
    return None


def storable_label(value: str, limit: int) -> str:
    """A label cut to fit its column (for the rejection row that names a refused pool)."""
    value = value.replace("\x00", "\\x00")
    if len(value) <= limit:
        return value
    suffix = f"...[{len(value)} chars]"
    return value[:limit - len(suffix)] + suffix
