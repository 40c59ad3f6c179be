"""Latency quantiles, spec vs baseline verdicts (in /summary and /latency) and the per-pool table."""

from typing import Literal

from pydantic import Field

from backend.schemas.common import PoolRefRead, WindowRead, Wire

VerdictName = Literal["better", "worse", "no-significant-change", "unresolved", "inconclusive"]
TailShift = Literal["heavier", "lighter", "none"]
BaselineMatch = Literal["same-class", "other-class"]
DeltaKind = Literal["exact", "lower_bound", "upper_bound", "unknown"]


class QuantileValueRead(Wire):
    value: float | None = Field(description="Seconds; null when undefined (empty histogram).")
    lower_bound: bool = Field(False, description="Quantile fell in +Inf: the true value is above `value`.")
    fixed_monotonicity: bool = False
    bucket_low: float | None = Field(None, description="Bounds of the bucket holding the quantile.")
    bucket_high: float | None = None


class VerdictRead(Wire):
    """Spec vs baseline at one quantile, resting on bucket edges (spec-math 7.2). Seconds throughout.

    better / worse: the quantiles lie in different buckets and the shared edge's exceedances say so beyond
    sampling noise; no-significant-change: different buckets, within noise; unresolved: both in one bucket
    (the order is below the histogram's resolution: neither better nor no change); inconclusive: too little
    data, both in +Inf, or an undefined quantile."""

    verdict: VerdictName
    reason: str = Field("", description="One line for people: the buckets, the interval, the exceedances.")
    statistic: float | None = Field(None, description="Interpolated spec - baseline: a display value only.")
    delta_low: float | None = Field(None, description="spec - baseline lies in [delta_low, delta_high] = "
                                    "[l_s - u_b, u_s - l_b]; null where a side is in +Inf (unbounded).")
    delta_high: float | None = None
    ci_low: float | None = Field(None, description="Same as delta_low (kept for older clients).")
    ci_high: float | None = Field(None, description="Same as delta_high (kept for older clients).")
    n_spec: int = 0
    n_base: int = 0
    spec_value: float | None = None
    base_value: float | None = None
    spec_bucket_low: float | None = Field(None, description="The spec quantile's bucket (low, high]; high "
                                          "null for +Inf.")
    spec_bucket_high: float | None = None
    base_bucket_low: float | None = Field(None, description="The baseline quantile's bucket (low, high].")
    base_bucket_high: float | None = None
    resolution: float | None = Field(None, description="Width of the wider holding bucket.")
    resolved: bool = Field(False, description="The buckets resolve the order (the quantiles lie in different "
                                              "buckets).")
    edge: float | None = Field(None, description="The bucket edge whose exceedances were tested.")
    spec_exceedance: float | None = Field(None, description="Fraction of spec observations above `edge`.")
    spec_exceedance_low: float | None = Field(None, description="Bootstrap percentile bounds (over time "
                                              "buckets) of spec_exceedance at `confidence`.")
    spec_exceedance_high: float | None = None
    base_exceedance: float | None = Field(None, description="Fraction of baseline observations above `edge`.")
    base_exceedance_low: float | None = None
    base_exceedance_high: float | None = None
    tail_shift: TailShift | None = Field(None, description="unresolved only: whether the share above the "
                                         "bucket's edge moved (heavier / lighter on spec) beyond noise.")
    q: float | None = None
    confidence: float | None = None
    spec_lower_bound: bool = False
    base_lower_bound: bool = False


class QuantileCompareRead(Wire):
    q: float
    spec: QuantileValueRead
    baseline: QuantileValueRead | None = None
    delta: float | None = Field(None, description="spec - baseline, seconds.")
    delta_rel: float | None = Field(None, description="delta / baseline.")
    delta_kind: DeltaKind | None = None
    resolved: bool | None = Field(None, description="The verdict's `resolved`: the quantiles lie in different "
                                                    "buckets, so the buckets resolve their order.")
    verdict: VerdictRead | None = None


class BaselineRefRead(Wire):
    pool: PoolRefRead
    pools: list[PoolRefRead] = Field(default_factory=list, description="All baseline pools summed (mixed).")
    match: BaselineMatch = Field(description="same-class, or another class of the model (less comparable).")


class LatencyMetricRead(Wire):
    metric: Literal["itl", "tpot", "ttft"]
    label: str = Field(description="'per engine step (chunk)' for ITL, 'per token' for TPOT, 'time to first "
                                   "token' for TTFT.")
    description: str = ""
    spec_mean: float | None = None
    baseline_mean: float | None = None
    spec_count: float | None = None
    baseline_count: float | None = None
    baseline: BaselineRefRead | None = None
    layout_mismatch: bool = False
    bucket_bounds: list[float] = Field(default_factory=list, description="Finite `le` bounds of the histogram "
                                       "layout the quantiles were read from (+Inf implied).")
    quantiles: list[QuantileCompareRead] = Field(default_factory=list)


class PoolQuantileRead(QuantileValueRead):
    q: float
    verdict: VerdictRead | None = Field(None, description="Spec pools: the verdict vs the baseline at this "
                                        "quantile, the very one /summary gives for the pool's class and window.")


class PoolLatencyRead(Wire):
    """One pool's histogram over the window (all its buckets summed), and its quantiles."""

    pool: PoolRefRead
    samples: float | None = Field(None, description="Observations in the window (the histogram's _count).")
    mean: float | None = Field(None, description="_sum / _count, seconds.")
    quantiles: list[PoolQuantileRead] = Field(default_factory=list)
    layout_changed: bool = Field(False, description="The bucket layout changed in the window: the quantiles use "
                                                    "the layout with the most observations.")


class LatencyTableRead(Wire):
    window: WindowRead
    family: Literal["itl", "tpot", "ttft"]
    label: str
    rows: list[PoolLatencyRead]
