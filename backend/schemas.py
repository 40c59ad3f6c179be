"""Wire models: the API <-> dashboard contract. Undefined values are `null`, never 0.

Stable names: fields may be added, never renamed. Time series are columnar (one list per field, aligned
with `t`), which is what plotly wants and keeps the JSON small.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from backend.domain import calc as dcalc

MIXED = "mixed"

EpsSource = Literal["measured", "default-for-band"]
VerdictName = Literal["better", "worse", "no-significant-change", "unresolved", "inconclusive"]
TailShift = Literal["heavier", "lighter", "none"]
FleetState = Literal["firing", "pending", "healthy", "below-threshold", "negative-margin", "stale", "no-data",
                     "low-volume", "estimated"]
# the states most urgent first: /fleet's sort=state order, and the order the overview's phone cards follow. A
# row with a firing or pending alert says so above anything its window's numbers say.
FLEET_STATE_ORDER: tuple[FleetState, ...] = ("firing", "pending", "negative-margin", "below-threshold", "stale",
                                             "low-volume", "no-data", "estimated", "healthy")
BaselineMatch = Literal["same-class", "other-class"]
DeltaKind = Literal["exact", "lower_bound", "upper_bound", "unknown"]


# --- input forms: one declaration for the OpenAPI document and the validation ------------------------
# Text the database can hold: no NUL character (Postgres refuses it). Every string input of the API carries
# this pattern in the OpenAPI document (backend.api.openapi) and is refused with it (backend.api.limits.RefuseNul).
NO_NUL_PATTERN = r"^[^\x00]*$"
# An instant: RFC 3339 (`T`, seconds and fraction optional, `Z` or an offset; without one it is UTC), or unix
# seconds. The time must also exist and lie between 1970 and 2200 (backend.services.windows.parse_instant).
INSTANT_PATTERN = (r"^(?:[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])[Tt]"
                   r"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,9})?)?"
                   r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?|[0-9]{1,12}(?:\.[0-9]{1,9})?)?$")
# A duration: whole seconds, or a number of s, m, h, d or w (`90s`, `5m`, `1h`, `7d`, `2w`); positive
# (backend.services.windows.parse_duration).
DURATION_PATTERN = r"^(?:[0-9]{1,12}[smhdw]?)?$"
# Both patterns match the empty string too: an empty parameter is an absent one (the default).
INSTANT_FORM = ("An RFC 3339 time such as 2026-11-30T12:00:00Z (seconds, fraction and offset optional; "
                "without an offset it is UTC), or unix seconds; between 1970 and 2200. Empty: the default.")
DURATION_FORM = "A duration: whole seconds or a number of s, m, h, d, w (e.g. 5m, 1h, 24h, 7d). Empty: the default."
# Declared here for the document; read by the parsers named above, which refuse any other form with a sentence
# saying what was expected (a pattern mismatch from the validation layer would only repeat the expression).
Instant = Annotated[str, WithJsonSchema({"type": "string", "pattern": INSTANT_PATTERN})]
Duration = Annotated[str, WithJsonSchema({"type": "string", "pattern": DURATION_PATTERN})]


class _Wire(BaseModel):
    model_config = ConfigDict(from_attributes=True)


# --- health -------------------------------------------------------------------------------------------


class HealthRead(_Wire):
    status: Literal["ok"] = "ok"


class StandbyRead(_Wire):
    """The read replica (SPECWATCH_DATABASE_READ_URL) as /ready found it."""

    reachable: bool = Field(description="The standby answered now.")
    reads_from: Literal["standby", "primary"] = Field(description="Where the API's reads go now.")
    fallback: str | None = Field(default=None, description="Why reads are on the primary, when they are.")
    in_recovery: bool | None = Field(default=None, description="The standby is a replica (pg_is_in_recovery).")
    lag_seconds: float | None = Field(default=None, description=(
        "0 when the standby replayed all it received, else seconds since the last transaction it replayed "
        "committed on the primary; null when unknown."))
    lag_bytes: float | None = Field(default=None, description="WAL bytes the standby's replay is behind the primary.")
    replay_paused: bool | None = None
    detail: str | None = None


class ReadyRead(_Wire):
    status: Literal["ready", "not-ready"]
    database: bool = Field(description="The database answered a query.")
    schema_state: Literal["up to date", "needs migrate", "newer than this specwatch"] | None = Field(
        default=None, description="The database schema against this version of specwatch (null when the "
                                  "database did not answer).")
    migrations_pending: int | None = Field(default=None, description="Migrations `specwatch migrate` would "
                                                                     "apply (0 when up to date).")
    detail: str | None = None
    replica: StandbyRead | None = Field(default=None, description="The read replica, when one is configured.")


class ErrorRead(_Wire):
    detail: str
    code: str | None = Field(default=None, description="What was refused, stable for clients: e.g. unknown_model, "
                                                        "unknown_traffic_class, unknown_spec_mode, spec_mode_required, "
                                                        "invalid_parameter.")
    known_models: list[str] | None = Field(default=None, description="Set on 404 for an unknown model.")
    known: list[str] | None = Field(default=None, description="Set on 404 for another unknown name, and on 422 "
                                                              "spec_mode_required: the model's spec modes.")


class RulesCheckRead(_Wire):
    valid: bool
    errors: list[str] = Field(default_factory=list)


class RulesErrorRead(_Wire):
    """422 of the alert-rules endpoints: `detail` names each invalid field."""

    detail: RulesCheckRead


# --- pools --------------------------------------------------------------------------------------------


class PoolRefRead(_Wire):
    """Where a number was measured (provenance)."""

    id: int
    model_name: str
    traffic_class: str
    spec_mode: str
    num_spec_tokens: int | None = None


class FigureBasisRead(_Wire):
    """How a pool's engine gives one spec-decode figure: exactly (counters) or as an estimate (gauges)."""

    figure: str = Field(description="acceptance_rate, accept_length, drafts, draft_tokens, accepted_tokens or "
                                    "accepted_per_pos.")
    exposed: bool = Field(description="false: the engine does not expose it; the figure stays empty (never 0).")
    exact: bool | None = Field(None, description="true: exact increases of the engine's counters; false: an "
                                                 "estimate (see estimate_basis); null: not exposed.")
    estimate_basis: str | None = Field(None, description="For an estimate: what it rests on and its weighting.")
    note: str | None = Field(None, description="E.g. the engine builds that do not expose it (the figure is "
                                               "then empty for their pools, never 0).")


class PoolRead(PoolRefRead):
    drafter: str | None = None
    vllm_version: str | None = None
    is_baseline: bool = Field(description="spec_mode equals the configured baseline mode (no drafter).")
    first_seen: datetime
    last_seen: datetime
    age_seconds: float = Field(description="now - last_seen.")
    stale: bool = Field(description="last_seen older than stale_after_seconds.")
    rejected: int = Field(0, description="Rejected (impossible) data rows recorded for this pool.")
    rejected_by_rule: dict[str, int] = Field(default_factory=dict)
    origin: str = Field("engine", description="engine: vLLM counters; requests: sums of per-request records "
                                              "(POST /requests)")
    engine: str = Field("vllm", description="The inference engine whose metrics the pool's counts come from: "
                                            "vllm, llamacpp or sglang.")
    figures: list[FigureBasisRead] = Field(default_factory=list, description="Per spec-decode figure, whether "
                                           "the pool's engine gives it exactly, as an estimate, or not at all.")
    collected_by: str | None = Field(None, description="How the pool's newest bucket was collected: scrape (raw "
                                     "samples of its targets), prometheus (raw samples through Prometheus), "
                                     "prom-increase (Prometheus' increase()), requests (per-request records).")
    counts: str | None = Field(None, description="exact: increases between raw samples (or sums of records), "
                               "the counter's own change; extrapolated: Prometheus' increase(), stretched to each "
                               "bucket's edges (off by up to a scrape interval's counts per bucket).")


class PoolsRead(_Wire):
    generated_at: datetime
    stale_after_seconds: int
    pools: list[PoolRead]


# --- windows ------------------------------------------------------------------------------------------


class WindowRead(_Wire):
    start: datetime
    end: datetime
    seconds: float


class SpecFigureRead(FigureBasisRead):
    value: float | None = Field(None, description="Over the window; null when not exposed or no data.")


class PoolFigureRowRead(_Wire):
    pool: PoolRefRead
    engine: str = Field(description="vllm, llamacpp or sglang.")
    figures: list[SpecFigureRead]


class PoolFiguresRead(_Wire):
    """Each pool's spec-decode figures over the window, each exact (counters) or an estimate (gauges)."""

    window: WindowRead
    pools: list[PoolFigureRowRead]


# --- acceptance time series ----------------------------------------------------------------------------


class AcceptanceSeriesRead(_Wire):
    """One series per (model, traffic_class|mixed, spec_mode). `t[i]` is the END of step i; the step
    covers (t[i] - step_seconds, t[i]], or (t[i] - window_seconds, t[i]] with a rolling window."""

    model_name: str
    traffic_class: str
    spec_mode: str
    num_spec_tokens: int | None = None
    window: WindowRead
    step_seconds: int
    rolling_window_seconds: int | None = None
    bucket_seconds: int
    pools: list[PoolRefRead]
    t: list[datetime]
    acceptance_rate: list[float | None]
    mean_acceptance_length: list[float | None]
    seed_alpha: list[float | None]
    drafts: list[float | None]
    draft_tokens: list[float | None]
    accepted_tokens: list[float | None]
    incomplete: bool = Field(False, description="Some class of the mix reported nothing in the range.")
    flags: list[str] = Field(default_factory=list)


class AcceptanceColumnsRead(_Wire):
    """One series of an AcceptanceSetRead; only the fields asked for are present."""

    model_name: str
    traffic_class: str = Field(description="The pool's class (by=pool) or `mixed` (by=model).")
    spec_mode: str
    num_spec_tokens: int | None = None
    pools: list[PoolRefRead]
    incomplete: bool = False
    flags: list[str] = Field(default_factory=list)
    acceptance_rate: list[float | None] | None = None
    mean_acceptance_length: list[float | None] | None = None
    seed_alpha: list[float | None] | None = None
    drafts: list[float | None] | None = None
    draft_tokens: list[float | None] | None = None
    accepted_tokens: list[float | None] | None = None


class AcceptanceSetRead(_Wire):
    """Many series on one time grid: `t` is shared, each series holds one value per point."""

    window: WindowRead
    step_seconds: int
    rolling_window_seconds: int | None = None
    bucket_seconds: int
    t: list[datetime]
    series: list[AcceptanceColumnsRead]


# --- latency ------------------------------------------------------------------------------------------


class QuantileValueRead(_Wire):
    value: float | None = Field(description="Seconds; null when undefined (empty histogram).")
    lower_bound: bool = Field(False, description="Quantile fell in +Inf: the true value is above `value`.")
    fixed_monotonicity: bool = False
    bucket_low: float | None = Field(None, description="Bounds of the bucket holding the quantile.")
    bucket_high: float | None = None


class VerdictRead(_Wire):
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


class QuantileCompareRead(_Wire):
    q: float
    spec: QuantileValueRead
    baseline: QuantileValueRead | None = None
    delta: float | None = Field(None, description="spec - baseline, seconds.")
    delta_rel: float | None = Field(None, description="delta / baseline.")
    delta_kind: DeltaKind | None = None
    resolved: bool | None = Field(None, description="The verdict's `resolved`: the quantiles lie in different "
                                                    "buckets, so the buckets resolve their order.")
    verdict: VerdictRead | None = None


class BaselineRefRead(_Wire):
    pool: PoolRefRead
    pools: list[PoolRefRead] = Field(default_factory=list, description="All baseline pools summed (mixed).")
    match: BaselineMatch = Field(description="same-class, or another class of the model (less comparable).")


class LatencyMetricRead(_Wire):
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


class PoolLatencyRead(_Wire):
    """One pool's histogram over the window (all its buckets summed), and its quantiles."""

    pool: PoolRefRead
    samples: float | None = Field(None, description="Observations in the window (the histogram's _count).")
    mean: float | None = Field(None, description="_sum / _count, seconds.")
    quantiles: list[PoolQuantileRead] = Field(default_factory=list)
    layout_changed: bool = Field(False, description="The bucket layout changed in the window: the quantiles use "
                                                    "the layout with the most observations.")


class LatencyTableRead(_Wire):
    window: WindowRead
    family: Literal["itl", "tpot", "ttft"]
    label: str
    rows: list[PoolLatencyRead]


# --- summary ------------------------------------------------------------------------------------------


class VolumeRead(_Wire):
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    generation_tokens: float | None = None
    finished_requests: float | None = None
    buckets: int = 0
    min_drafts: int
    sufficient: bool = Field(description="drafts >= min_drafts: enough volume to colour alerts.")


class FreshnessRead(_Wire):
    last_seen: datetime | None = None
    age_seconds: float | None = None
    stale: bool = True


class DriftRead(_Wire):
    last_to_first_ratio: float | None = None
    slope: float | None = None
    min_trials: float | None = None


class SpeedupCheckRead(_Wire):
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


class ClassSummaryRead(_Wire):
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


class ResolutionAdviceRead(_Wire):
    """Latency verdicts left unresolved by coarse buckets, and the vLLM setting that resolves them."""

    family_key: str = Field(description="vLLM's histogram bucket family (inter_token_latency covers ITL and TPOT).")
    metrics: list[str] = Field(description="ITL / TPOT / TTFT: the metrics with unresolved verdicts.")
    buckets: list[tuple[float, float]] = Field(description="The shared buckets (low, high], seconds.")
    default_layout: bool = Field(description="The pools use vLLM's default bounds for this family.")
    bounds: list[float] = Field(description="Suggested bounds: the current ones plus splits of those buckets.")
    flag: str = Field(description="The vLLM server argument (0.33.0 or later) that sets them.")
    text: str


class SummaryRead(_Wire):
    model_name: str
    window: WindowRead
    generated_at: datetime
    alpha_threshold: float
    classes: list[ClassSummaryRead] = Field(description="One per spec traffic class, then 'mixed'.")
    baselines: list[PoolRefRead] = Field(default_factory=list)
    resolution_advice: list[ResolutionAdviceRead] = Field(
        default_factory=list, description="Once per model: unresolved latency verdicts and how to resolve them.")


# --- fleet --------------------------------------------------------------------------------------------


class SparklineRead(_Wire):
    """Acceptance rate r = A/D per step, the last point ending at the window's end: `step_seconds` apart, and
    `fine_step_seconds` apart from `fine_since` on (the recent end in finer steps). Each point covers the
    step that ends at its `t`."""

    step_seconds: int
    t: list[datetime]
    acceptance_rate: list[float | None]
    fine_step_seconds: int | None = None
    fine_since: datetime | None = Field(None, description="Points after this time are fine_step_seconds apart.")


class FleetAlertRead(_Wire):
    """A pending or firing alert of a fleet row's pool (its model, class and spec mode; `mixed`: the model's
    mixed traffic), as the alert evaluation left it (GET /alerts has the full state)."""

    id: int
    rule: str
    kind: str
    severity: str
    state: Literal["pending", "firing"]
    value: float | None = Field(None, description="The number the rule compared (alpha_low: the long window's r).")
    threshold: float | None = None
    since: datetime | None = Field(None, description="Firing since, or pending since.")
    alpha_short: float | None = Field(None, description="alpha_low: r over the rule's short window now.")
    short_window_seconds: float | None = None
    window: str | None = Field(None, description="The rule's windows, as its messages say them.")
    evaluated_at: datetime | None = None


class FleetRowRead(_Wire):
    model_name: str
    traffic_class: str
    spec_mode: str
    num_spec_tokens: int | None = None
    state: FleetState = Field(description=(
        "firing / pending when an alert of the row's pool is (read when the answer is served, also from a "
        "snapshot), else `data_state`."))
    data_state: FleetState | None = Field(None, description=(
        "What the window's numbers alone say: stale / no-data / low-volume / negative-margin / below-threshold "
        "/ healthy."))
    alerts: list[FleetAlertRead] = Field(default_factory=list, description=(
        "The pool's pending and firing alerts now, firing first, then by severity and age."))
    alpha_threshold: float | None = Field(None, description=(
        "The row's acceptance-rate threshold: the first alpha_low rule's threshold after its per-model / class "
        "overrides, as the alert evaluation uses it (SPECWATCH_ALPHA_THRESHOLD without such a rule)."))
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    seed_alpha: float | None = None
    break_even_alpha: float | None = None
    margin: float | None = None
    eps_step_source: EpsSource | None = None
    measured_speedup: float | None = None
    estimated_speedup: float | None = None
    p99_itl_delta: float | None = None
    p99_itl_delta_rel: float | None = None
    p99_itl_verdict: VerdictName | None = None
    p99_itl_reason: str | None = Field(None, description="The P99 ITL verdict's one-line reason (as /summary).")
    p99_itl_delta_low: float | None = Field(None, description="The P99 ITL verdict's interval from bucket edges.")
    p99_itl_delta_high: float | None = None
    p99_tpot_delta: float | None = None
    p99_tpot_delta_rel: float | None = None
    p99_tpot_verdict: VerdictName | None = None
    p99_tpot_reason: str | None = None
    p99_tpot_delta_low: float | None = None
    p99_tpot_delta_high: float | None = None
    concurrency_band: str | None = None
    drafts: float | None = None
    freshness: FreshnessRead
    data_quality: list[str] = Field(default_factory=list)
    sparkline: SparklineRead
    saved_in_window: float | None = Field(
        None, description="Saved in this window: what speculation saved over the window (GET /capacity/fleet's "
                          "point figure; on `mixed`, the model's total when it runs one spec mode); null without a "
                          "GPU-hour price, a baseline or replica counts.")
    per_week_at_window_rate: float | None = Field(
        None, description="Per week at this window's rate: saved_in_window x 604800 / window seconds (the same "
                          "source and nulls).")
    currency: str | None = Field(None, description="Currency of the money figures (SPECWATCH_CURRENCY).")
    engines: list[str] = Field(default_factory=lambda: ["vllm"], description=(
        "The engines of the row's spec pools (vllm, llamacpp, sglang). The row's acceptance_rate, "
        "mean_acceptance_length and drafts are exact counts only: pools whose engine gives them only as an "
        "estimate (SGLang) are not summed into them (`estimated_excluded`)."))
    acceptance_rate_estimate: float | None = Field(None, description=(
        "Where every pool of the row gives the acceptance rate only as an estimate (SGLang): the estimate over "
        "the window (GET /pools/figures' value; basis in `estimate_basis`); acceptance_rate stays null."))
    mean_acceptance_length_estimate: float | None = Field(None, description="As acceptance_rate_estimate, τ.")
    estimate_basis: str | None = Field(None, description="What the estimates rest on and their weighting.")
    estimated_excluded: list[str] = Field(default_factory=list, description=(
        "Engines whose pools of this row are left out of its exact figures because they only give estimates."))


class ReadsRead(_Wire):
    """Where this answer's data was read, when a read replica is configured: its age beyond the rows'
    freshness is the replica's lag."""

    reads_from: Literal["standby", "primary"]
    lag_seconds: float | None = Field(default=None, description="The standby's replication lag (see /ready).")
    fallback: str | None = Field(default=None, description="Why the primary was read instead of the standby.")


class FleetRead(_Wire):
    window: WindowRead
    generated_at: datetime
    alpha_threshold: float = Field(description=(
        "SPECWATCH_ALPHA_THRESHOLD, the default; each row carries its own (per-class rules)."))
    rows: list[FleetRowRead]
    reads: ReadsRead | None = Field(default=None, description="Set when a read replica is configured.")


class FleetPageRead(FleetRead):
    """/fleet with any of q, model, state, sort, offset, limit: `rows` is one page of the matching rows."""

    total_rows: int = Field(description="Rows of the window before any filter.")
    matched_rows: int = Field(description="Rows matching the filters (the pages cover these).")
    offset: int
    limit: int
    sort: str | None = Field(None, description="The order asked for; null: the unpaged answer's order.")
    state_counts: dict[FleetState, int] = Field(description="Rows per state over the whole window (unfiltered).")


# --- calculator ---------------------------------------------------------------------------------------


class _CalcBody(BaseModel):
    """Calculator inputs: bounded (backend.domain.calc's limits), finite (NaN and +-Infinity refused), and
    strict about types (`false` is not 0, "5" is not 5); unknown fields are refused rather than ignored."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="forbid")


def _whole(value: Any) -> Any:
    """A float with no fractional part as the int it is: JSON (and so OpenAPI's `integer`) does not tell 3.0
    from 3, while a strict model refuses 3.0; `true` and "3" stay refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# an integer input of a strict body: JSON's integer, 3.0 included (bounds go before it: Annotated[int,
# Field(...), BeforeValidator(_whole)], or `x: WholeNumber = Field(...)`, so that they reach the document)
WholeNumber = Annotated[int, BeforeValidator(_whole)]
K = Annotated[int, Field(ge=1, le=dcalc.MAX_K, description=f"num_speculative_tokens, 1..{dcalc.MAX_K}."),
              BeforeValidator(_whole)]
Overhead = Annotated[float, Field(ge=0, le=dcalc.MAX_OVERHEAD,
                                  description="eps: spec step time / plain step time - 1.")]
Probability = Annotated[float, Field(ge=0, le=1)]


class SpeedupCalcBody(_CalcBody):
    k: K
    alpha: Probability = Field(description="Seed alpha (accepted per draft / K).")
    overhead: Overhead


class BreakevenCalcBody(_CalcBody):
    k: K
    overhead: Overhead


class RequiredAlphaCalcBody(_CalcBody):
    k: K
    speedup: float = Field(gt=0, le=dcalc.MAX_SPEEDUP)
    overhead: Overhead


class ConvertCalcBody(_CalcBody):
    k: K
    acceptance_rate: Probability | None = None
    per_token: Probability | None = None


class MixClassBody(_CalcBody):
    name: str = Field(min_length=1, max_length=dcalc.MAX_NAME)
    alpha: Probability
    share: float = Field(ge=0, le=dcalc.MAX_SHARE)


class MixCalcBody(_CalcBody):
    k: K
    classes: list[MixClassBody] = Field(min_length=1, max_length=dcalc.MAX_CLASSES)
    share_basis: Literal["draft-tokens", "requests"] = "draft-tokens"
    lengths: dict[Annotated[str, Field(max_length=dcalc.MAX_NAME)],
                  Annotated[float, Field(gt=0, le=dcalc.MAX_LENGTH)]] | None = Field(
        None, max_length=dcalc.MAX_CLASSES, description="Output length per class name (requests basis).")
    overhead: Overhead | None = Field(None, description="eps, to also get the overall speedup.")


class OverheadCalcBody(_CalcBody):
    k: K
    tau: float = Field(ge=1, le=dcalc.MAX_K + 1)
    measured_speedup: float = Field(gt=0, le=dcalc.MAX_SPEEDUP)


class KAdvisorClassBody(_CalcBody):
    name: str = Field(min_length=1, max_length=dcalc.MAX_NAME)
    conditional: list[Probability] = Field(
        min_length=1, max_length=dcalc.MAX_K,
        description="Measured conditional acceptance p_1..p_K (P(token j accepted | tokens before it accepted)).")
    share: float = Field(1.0, ge=0, le=dcalc.MAX_SHARE,
                         description="Output-token share in the mix (request share at equal output length).")


class KAdvisorMeasuredBody(_CalcBody):
    k: K
    overhead: Overhead


class KAdvisorCalcBody(_CalcBody):
    k: K
    classes: list[KAdvisorClassBody] = Field(min_length=1, max_length=dcalc.MAX_CLASSES)
    overhead: Overhead = Field(description="eps measured at K (spec step time / plain step time - 1).")
    eps0_share: Probability = Field(0.0, description="Assumed fixed share of eps (eps0 = share * eps); the "
                                    "rest grows with K. Ignored when `measured` spans another K.")
    measured: list[KAdvisorMeasuredBody] = Field(
        default_factory=list, max_length=dcalc.MAX_CLASSES,
        description="eps measured at other K for the same model and drafter: eps(K) becomes the "
                    "least-squares line through all points (a linear solve for two K).")


class CalcRead(_Wire):
    """Result of one calculator operation. `result` is exactly what `specwatch calc ... --json` prints
    (backend.domain.calc); `values` repeats its top-level numbers (null = undefined/infeasible)."""

    operation: str
    inputs: dict[str, Any]
    values: dict[str, float | None]
    result: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


# --- K advisor (measured) ------------------------------------------------------------------------------


class KRowRead(_Wire):
    k: int = Field(description="Candidate draft length K'.")
    tau: float | None = Field(None, description="Expected tokens per step 1 + u_1 + ... + u_K'.")
    eps: float | None = Field(None, description="Modelled step overhead eps(K') = eps0 + K' eps_tok of the "
                              "class; for the mix, the classes' pooled step time (null where tau is).")
    speedup: float | None = Field(None, description="tau / (1 + eps).")
    extrapolated: bool = Field(description="K' above the measured K: p_j beyond K come from the fitted decay.")


class KFitRead(_Wire):
    method: str
    positions: list[int] = Field(description="Positions (1-based) the fit used.")
    log_intercept: float | None = None
    log_slope: float | None = None
    decay_per_position: float | None = Field(None, description="exp(log_slope): p_{j+1} / p_j of the fit.")
    rising: bool = False


class KOverheadRead(_Wire):
    eps0: float
    eps_tok: float
    source: str
    points: list[dict[str, float]] = Field(default_factory=list, description="(k, eps) measurements used.")
    note: str | None = None


class KAdviceRead(_Wire):
    name: str = Field(description="Traffic class, or 'mixed' for the traffic mix.")
    current_k: int
    rows: list[KRowRead]
    best_k: int | None = None
    best_speedup: float | None = None
    current_speedup: float | None = None
    gain: float | None = Field(None, description="best / current speedup - 1.")
    best_is_extrapolated: bool = False
    flags: list[str] = Field(default_factory=list)
    conditional: list[float | None] | None = Field(None, description="Measured p_1..p_K.")
    fit: KFitRead | None = None
    drafts: float | None = None
    output_tokens: float | None = Field(None, description="N + A: the class's weight in the mix.")
    eps_step: float | None = Field(None, description="The class's step overhead at the current K: mean ITL spec / "
                                   "baseline - 1 in its band, or the band default (see eps_step_source); for "
                                   "the mix, its classes' pooled step time at K.")
    eps_step_source: str | None = Field(None, description="measured | default-for-band; 'pooled from classes' "
                                        "for the mix.")
    overhead: KOverheadRead | None = Field(None, description="eps(K) = eps0 + K eps_tok used for these rows "
                                           "(null for the mix: each class keeps its own).")


class KAdviceModeRead(_Wire):
    spec_mode: str
    drafter: str | None = None
    k: int | None = Field(None, description="The K every class runs (null when they differ).")
    concurrency_band: str | None = None
    classes: list[KAdviceRead] = Field(default_factory=list)
    mix: KAdviceRead | None = None
    unavailable: dict[str, str] = Field(default_factory=dict, description="Class -> why it has no advice.")
    incomplete: bool = Field(False, description="The mix leaves out classes without a per-position curve.")


class KAdviceSetRead(_Wire):
    model_name: str
    window: WindowRead
    generated_at: datetime
    modes: list[KAdviceModeRead]
    note: str


# --- alerts -------------------------------------------------------------------------------------------


class AlertRead(_Wire):
    id: int
    rule: str
    kind: str
    severity: str
    labels: dict[str, str]
    phase: str
    pending_since: datetime | None = None
    firing_since: datetime | None = None
    resolved_at: datetime | None = None
    last_eval_at: datetime | None = None
    last_status: str | None = None
    last_value: float | None = None
    last_values: dict[str, Any] | None = None
    incident_id: int | None = None
    silenced_by: int | None = Field(None, description="Id of the silence that currently matches.")
    acked_by: str | None = None
    acked_at: datetime | None = None


class TransitionRead(_Wire):
    id: int
    alert_id: int
    rule: str
    labels: dict[str, str]
    at: datetime
    from_phase: str
    to_phase: str
    status: str
    value: float | None = None
    threshold: float | None = None
    reason: str
    values: dict[str, Any] | None = None
    notification: str | None = None
    silence_id: int | None = None


class SilenceRead(_Wire):
    id: int
    matchers: dict[str, str]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    reason: str
    created_at: datetime
    expired_by: str | None = None
    active: bool = False


class WhoAmI(_Wire):
    name: str
    role: str


# --- replicas (issue 30) ---------------------------------------------------------------------------------


class ReplicaRead(_Wire):
    instance: str = Field(description="Prometheus `instance` (or pod) label; for the direct scrape, the target.")
    engine: str = Field(description="vLLM's data-parallel `engine` label ('' when not reported).")
    labels: dict[str, str] = Field(default_factory=dict, description="Version labels the replica's target carries.")
    buckets: int = Field(description="Replica buckets in the window.")
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    acceptance_rate: float | None = Field(None, description="alpha = accepted / draft tokens, summed over the window.")
    mean_acceptance_length: float | None = Field(None, description="tau = 1 + accepted / drafts.")
    others_acceptance_rate: float | None = Field(
        None, description="The pool's other replicas pooled (their summed accepted / summed draft tokens).")
    tpot_p99: float | None = Field(None, description="P99 time per output token (s) from the summed buckets.")
    itl_p99: float | None = Field(None, description="P99 inter-token latency (s) from the summed buckets.")
    last_seen: datetime = Field(description="End of the replica's newest bucket.")


class ReplicaPoolRead(_Wire):
    traffic_class: str
    spec_mode: str
    num_spec_tokens: int | None = None
    acceptance_rate: float | None = Field(None, description="The replicas' sums pooled: the pool's alpha.")
    drafts: float | None = None
    replicas: list[ReplicaRead]


class ReplicasRead(_Wire):
    model: str
    window_seconds: float
    window_start: datetime | None = Field(None, description="null when no replica data exists.")
    window_end: datetime | None = Field(None, description="The newest replica bucket's end (at most now).")
    bucket_seconds: int = Field(description="Grain of the replica rows.")
    pools: list[ReplicaPoolRead]
