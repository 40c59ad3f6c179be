"""The fleet table (GET /fleet): one row per model, class and spec mode, whole or a page."""

from datetime import datetime
from typing import Literal

from pydantic import Field

from backend.schemas.common import ReadsRead, WindowRead, Wire
from backend.schemas.latency import VerdictName
from backend.schemas.summary import EpsSource, FreshnessRead

FleetState = Literal["firing", "pending", "healthy", "below-threshold", "negative-margin", "stale", "no-data",
                     "low-volume", "estimated"]
# the states most urgent first: /fleet's sort=state order, and the order the overview's phone cards follow. A
# row with a firing or pending alert says so above anything its window's numbers say.
FLEET_STATE_ORDER: tuple[FleetState, ...] = ("firing", "pending", "negative-margin", "below-threshold", "stale",
                                             "low-volume", "no-data", "estimated", "healthy")


class SparklineRead(Wire):
    """Acceptance rate r = A/D per step, the last point ending at the window's end: `step_seconds` apart, and
    `fine_step_seconds` apart from `fine_since` on (the recent end in finer steps). Each point covers the
    step that ends at its `t`."""

    step_seconds: int
    t: list[datetime]
    acceptance_rate: list[float | None]
    fine_step_seconds: int | None = None
    fine_since: datetime | None = Field(None, description="Points after this time are fine_step_seconds apart.")


class FleetAlertRead(Wire):
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


class FleetRowRead(Wire):
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


class FleetRead(Wire):
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
