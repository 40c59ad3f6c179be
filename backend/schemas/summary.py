"""A model's summary over a window (GET /summary): one row per traffic class, then the mix."""

from datetime import datetime
from typing import Literal

from pydantic import Field

from backend.schemas.common import PoolRefRead, WindowRead, Wire
from backend.schemas.latency import LatencyMetricRead

MIXED = "mixed"  # the traffic class of the row that pools every class
EpsSource = Literal["measured", "default-for-band"]


class VolumeRead(Wire):
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    generation_tokens: float | None = None
    finished_requests: float | None = None
    buckets: int = 0
    min_drafts: int
    sufficient: bool = Field(description="drafts >= min_drafts: enough volume to colour alerts.")


class FreshnessRead(Wire):
    last_seen: datetime | None = None
    age_seconds: float | None = None
    stale: bool = True


class DriftRead(Wire):
    last_to_first_ratio: float | None = None
    slope: float | None = None
    min_trials: float | None = None


class SpeedupCheckRead(Wire):
    """tau / (1 + eps_step) from step times against the TPOT speedup: their ratio, its interval (2 SE,
    delete-one jackknife over time bins of the band) and the verdict."""

    estimated: float | None = None
    measured: float | None = None
    ratio: float | None = Field(None, description="estimated / measured.")
    ratio_low: float | None = None
    ratio_high: float | None = None
    bins: int = 0
    verdict: Literal["agree", "disagree", "undetermined"]
    reason: str


class ClassSummaryRead(Wire):
    traffic_class: str = Field(description="A traffic class, or 'mixed' (counters pooled across classes).")
    spec_mode: str
    num_spec_tokens: int | None = None
    pools: list[PoolRefRead] = Field(description="Pools whose buckets were summed (provenance).")
    acceptance_rate: float | None = None
    seed_alpha: float | None = None
    mean_acceptance_length: float | None = None
    per_position_conditional: list[float | None] | None = None
    per_position_unconditional: list[float | None] | None = None
    per_token_acceptance: float | None = Field(None, description="i.i.d. fit from r and K (model value).")
    per_token_acceptance_mle: float | None = None
    drift: DriftRead | None = None
    eps_step: float | None = Field(None, description="Step overhead: mean ITL spec / baseline - 1 in the same "
                                   "concurrency band (eps_step_source 'measured'), else the band default.")
    eps_step_source: EpsSource | None = None
    eps_effective: float | None = Field(None, description="tau / measured_speedup - 1: the overhead that makes "
                                        "tau / (1 + eps) equal the measured speedup (null without a baseline).")
    break_even_alpha: float | None = Field(None, description="eps_step / K.")
    margin: float | None = Field(None, description="seed_alpha - eps_step/K.")
    speedup_margin: float | None = Field(None, description="speedup - 1 (measured if available): the business "
                                         "margin.")
    estimated_speedup: float | None = Field(None, description="tau / (1 + eps_step).")
    measured_speedup: float | None = Field(None, description="TPOT mean baseline / spec, same band.")
    speedup_check: SpeedupCheckRead | None = Field(
        None, description="estimated vs measured speedup with their uncertainty (only when eps_step is measured).")
    running_mean: float | None = None
    concurrency_band: str | None = None
    itl: LatencyMetricRead | None = None
    tpot: LatencyMetricRead | None = None
    ttft: LatencyMetricRead | None = Field(None, description="Only where asked for (/latency?family=ttft).")
    volume: VolumeRead
    freshness: FreshnessRead
    data_quality: list[str] = Field(default_factory=list)
    incomplete: bool = False
    incomplete_reasons: list[str] = Field(default_factory=list)
    source: str = Field("engine", description="Where the row's counts come from: engine (vLLM's counters) or "
                        "records (sums of per-request records, for a class the engine does not label).")
    records_coverage: float | None = Field(
        None, description="Draft tokens seen in per-request records ÷ the engine's draft tokens over the row's "
        "scope (the class where the engine labels it, else the spec mode); null without both sources.")


class ResolutionAdviceRead(Wire):
    """Latency verdicts left unresolved by coarse buckets, and the vLLM setting that resolves them."""

    family_key: str = Field(description="vLLM's histogram bucket family (inter_token_latency covers ITL and TPOT).")
    metrics: list[str] = Field(description="ITL / TPOT / TTFT: the metrics with unresolved verdicts.")
    buckets: list[tuple[float, float]] = Field(description="The shared buckets (low, high], seconds.")
    default_layout: bool = Field(description="The pools use vLLM's default bounds for this family.")
    bounds: list[float] = Field(description="Suggested bounds: the current ones plus splits of those buckets.")
    flag: str = Field(description="The vLLM server argument (0.33.0 or later) that sets them.")
    text: str


class SummaryRead(Wire):
    model_name: str
    window: WindowRead
    generated_at: datetime
    alpha_threshold: float
    classes: list[ClassSummaryRead] = Field(description="One per spec traffic class, then 'mixed'.")
    baselines: list[PoolRefRead] = Field(default_factory=list)
    resolution_advice: list[ResolutionAdviceRead] = Field(
        default_factory=list, description="Once per model: unresolved latency verdicts and how to resolve them.")
