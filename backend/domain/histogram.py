"""``histogram_quantile`` exactly as Prometheus 2.42 computes it, and the P99 delta (spec-math §7).

Source: prometheus/prometheus ``promql/quantile.go`` (``bucketQuantile``, ``coalesceBuckets``,
``ensureMonotonic``) as of v2.42.0 - the fixtures were verified with promtool 2.42.0. Newer versions also
snap relative count differences <= 1e-12 ("float noise", ``correctPrecisionErrors``); 2.42 does not, and
neither does this module.

Where Prometheus returns NaN or +-Inf we return ``value=None`` (NaN/Inf never leave the domain layer) and
set ``reason`` to one of the codes below, so a caller can still tell the cases apart:

  =====================  =====================  ==============================================
  reason                 Prometheus returns     when
  =====================  =====================  ==============================================
  ``q_nan``              NaN                    q is NaN
  ``q_below_0``          -Inf                   q < 0
  ``q_above_1``          +Inf                   q > 1
  ``no_buckets``         (never called)         empty input
  ``nan_count``          NaN-contaminated       a bucket count is NaN/None
  ``no_inf_bucket``      NaN                    the highest ``le`` is not +Inf
  ``fewer_than_2``       NaN                    fewer than 2 buckets after merging equal ``le``
  ``no_observations``    NaN                    the +Inf count is 0 (empty window; HQ-04)
  ``zero_first_bucket``  NaN (0/0)              q = 0 and the first bucket (le > 0) is empty
  =====================  =====================  ==============================================
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class QuantileResult:
    """One histogram_quantile result.

    value: the PromQL value, ``None`` where PromQL gives NaN/+-Inf (see ``reason``).
    lower_bound: the rank fell in the +Inf bucket; ``value`` is the largest finite ``le`` and the true
        quantile is only known to be above it (show it as "> value").
    fixed_monotonicity: cumulative counts decreased somewhere and were lifted by a running maximum
        (Prometheus' annotation "input to histogram_quantile needed to be fixed for monotonicity").
    bucket_low, bucket_high: bounds of the bucket holding the quantile, i.e. its resolution; ``None`` for
        an infinite side (+Inf bucket, or a first bucket with le <= 0).
    merged_duplicates: buckets with equal ``le`` were summed (coalesceBuckets).
    """

    value: float | None
    lower_bound: bool = False
    fixed_monotonicity: bool = False
    bucket_low: float | None = None
    bucket_high: float | None = None
    reason: str | None = None
    merged_duplicates: bool = False

    @property
    def width(self) -> float | None:
        """Width of the holding bucket (the interpolation error bound); ``None`` if a side is infinite."""
        if self.bucket_low is None or self.bucket_high is None:
            return None
        return self.bucket_high - self.bucket_low


def parse_le(le: float | str) -> float:
    """``le`` label value -> float: accepts floats, "+Inf", "Inf", "-Inf" and numeric strings."""
    v = float(le)
    if math.isnan(v):
        raise ValueError(f"bucket bound le must not be NaN: {le!r}")
    return v


def sum_histograms(histograms: Iterable[Sequence[tuple[float | str, float]]]) -> list[tuple[float, float]]:
    """``sum by (le)`` across series (instances, engines): add counts with equal ``le``, sorted by ``le``.

    The fleet quantile is the quantile of the summed buckets (HQ-13: 0.198), never a mean of per-instance
    quantiles. Edge cases: no histograms -> ``[]``; ``None`` counts -> ``ValueError``.
    """
    acc: dict[float, float] = {}
    for buckets in histograms:
        for le, count in buckets:
            if count is None:
                raise ValueError("bucket count must not be None")
            key = parse_le(le)
            acc[key] = acc.get(key, 0.0) + float(count)
    return sorted(acc.items())


def histogram_quantile(q: float, buckets: Sequence[tuple[float | str, float]]) -> QuantileResult:
    """The q-quantile of classic histogram buckets, exactly as Prometheus 2.42's ``bucketQuantile``.

    ``buckets`` are ``(le, cumulative count)`` pairs in any order, ``le`` possibly ``math.inf``/"+Inf";
    counts may be rates or increases (same result). Steps and edge cases (``None`` cases: module table):
      1. q NaN -> None; q < 0 -> None (PromQL -Inf); q > 1 -> None (PromQL +Inf).
      2. sort by ``le``; highest not +Inf -> None. Merge equal ``le`` by summing (``merged_duplicates``).
         Running maximum over counts (``fixed_monotonicity``; HQ-07: 45 lifted to 50 -> 0.494).
      3. fewer than 2 buckets -> None; +Inf count 0 -> None (HQ-04).
      4. rank = q * total; b = first finite bucket with count >= rank.
      5. no finite bucket reaches rank -> largest finite ``le`` with ``lower_bound=True`` (PD-02).
      6. b is the first bucket and its ``le`` <= 0 -> that ``le``.
      7. otherwise linear interpolation in (previous le or 0, le_b] (HQ-01: 0.13333); a rank equal to a
         cumulative count gives that ``le``; q = 1 gives the first bucket reaching the total (HQ-10).
    """
    q = float(q)
    if math.isnan(q):
        return QuantileResult(None, reason="q_nan")
    if q < 0:
        return QuantileResult(None, reason="q_below_0")
    if q > 1:
        return QuantileResult(None, reason="q_above_1")
    if not buckets:
        return QuantileResult(None, reason="no_buckets")
    pairs: list[tuple[float, float]] = []
    for le, count in buckets:
        if count is None or math.isnan(float(count)):
            return QuantileResult(None, reason="nan_count")
        pairs.append((parse_le(le), float(count)))
    pairs.sort(key=lambda p: p[0])
    if pairs[-1][0] != math.inf:
        return QuantileResult(None, reason="no_inf_bucket")
    # coalesceBuckets
    merged: list[list[float]] = []
    for le, count in pairs:
        if merged and merged[-1][0] == le:
            merged[-1][1] += count
        else:
            merged.append([le, count])
    dup = len(merged) < len(pairs)
    # ensureMonotonic
    forced = False
    running = merged[0][1]
    for b in merged[1:]:
        if b[1] > running:
            running = b[1]
        elif b[1] < running:
            b[1] = running
            forced = True
    if len(merged) < 2:
        return QuantileResult(None, fixed_monotonicity=forced, reason="fewer_than_2", merged_duplicates=dup)
    total = merged[-1][1]
    if total == 0:
        return QuantileResult(None, fixed_monotonicity=forced, reason="no_observations", merged_duplicates=dup)
    rank = q * total
    n = len(merged)
    b = next((i for i in range(n - 1) if merged[i][1] >= rank), n - 1)
    if b == n - 1:
        return QuantileResult(merged[n - 2][0], lower_bound=True, fixed_monotonicity=forced,
                              bucket_low=merged[n - 2][0], bucket_high=None, merged_duplicates=dup)
    if b == 0 and merged[0][0] <= 0:
        return QuantileResult(merged[0][0], fixed_monotonicity=forced, bucket_low=None,
                              bucket_high=merged[0][0], merged_duplicates=dup)
    start, end, count = 0.0, merged[b][0], merged[b][1]
    if b > 0:
        start = merged[b - 1][0]
        count -= merged[b - 1][1]
        rank -= merged[b - 1][1]
    if count == 0:  # only reachable with q = 0 and an empty first bucket: 0/0 in Prometheus
        return QuantileResult(None, fixed_monotonicity=forced, bucket_low=start, bucket_high=end,
                              reason="zero_first_bucket", merged_duplicates=dup)
    return QuantileResult(start + (end - start) * (rank / count), fixed_monotonicity=forced,
                          bucket_low=start, bucket_high=end, merged_duplicates=dup)


DeltaKind = Literal["exact", "lower_bound", "upper_bound", "unknown"]


@dataclass(frozen=True)
class P99Delta:
    """Quantile delta spec - base (seconds) with its honesty flags (spec-math §7.2).

    kind: "exact" (both interpolated), "lower_bound" (spec in +Inf: delta >= value), "upper_bound"
        (baseline in +Inf: delta <= value), "unknown" (both in +Inf, or a quantile undefined: delta None).
    resolved: the delta is wider than the histogram resolution (the larger finite width of the two holding
        buckets); a narrower delta is "not resolved" by the bucket layout.
    """

    delta: float | None
    delta_rel: float | None
    kind: DeltaKind
    resolved: bool
    spec_value: float | None = None
    base_value: float | None = None
    resolution: float | None = None
    spec_bucket: tuple[float | None, float | None] | None = None
    base_bucket: tuple[float | None, float | None] | None = None


def quantile_delta(spec: QuantileResult, base: QuantileResult) -> P99Delta:
    """Delta = spec - base and delta_rel = delta / base from two :class:`QuantileResult` (PD-01, PD-02).

    Compare equal windows at comparable load on the same bucket layout. Edge cases: either value ``None``
    -> delta ``None``, kind "unknown"; both in +Inf -> "unknown"; baseline value <= 0 -> delta_rel ``None``;
    a delta no wider than the resolution (or no finite resolution) -> ``resolved=False``.
    """
    widths = [w for w in (spec.width, base.width) if w is not None]
    resolution = max(widths) if widths else None
    common = {"spec_value": spec.value, "base_value": base.value, "resolution": resolution,
                  "spec_bucket": (spec.bucket_low, spec.bucket_high), "base_bucket": (base.bucket_low, base.bucket_high)}
    if spec.value is None or base.value is None or (spec.lower_bound and base.lower_bound):
        return P99Delta(None, None, "unknown", False, **common)
    delta = spec.value - base.value
    rel = delta / base.value if base.value > 0 else None
    kind: DeltaKind = "lower_bound" if spec.lower_bound else "upper_bound" if base.lower_bound else "exact"
    if resolution is None:
        resolved = False
    elif kind == "lower_bound":
        resolved = delta > resolution
    elif kind == "upper_bound":
        resolved = delta < -resolution
    else:
        resolved = abs(delta) > resolution
    return P99Delta(delta, rel, kind, resolved, **common)
