"""Capacity and money (GET /capacity, GET /capacity/fleet)."""

from datetime import datetime
from typing import Literal

from pydantic import Field

from backend.schemas.common import PoolRefRead, WindowRead, Wire

ReplicaSource = Literal["observed", "configured", "mixed", "unknown"]


class SideRead(Wire):
    """One pool's output-token throughput (every band summed, or one band)."""

    tokens: float | None = Field(description="Output tokens (vllm:generation_tokens_total increases).")
    seconds: float | None = Field(description="Bucket-seconds that reported generation tokens.")
    throughput: float | None = Field(description="Tokens/s of the whole pool.")
    per_replica: float | None = Field(description="Tokens/s per replica (null: replicas unknown).")
    per_request: float | None = Field(description="Tokens/s per running request.")
    replicas: float | None
    cost_per_mtok: float | None = Field(description="Cost of 1 M output tokens (null: no price or replicas).")


class BandRead(Wire):
    band: str
    spec: SideRead
    baseline: SideRead | None
    ratio_per_replica: float | None = Field(description="Spec / baseline tokens/s per replica (> 1: pays).")
    ratio_low: float | None
    ratio_high: float | None
    ratio_per_request: float | None
    saved_in_window: float | None = Field(description="Over the window, this band's spec tokens; negative: a loss.")
    saved_in_window_low: float | None
    saved_in_window_high: float | None
    pays: Literal["yes", "no", "uncertain"] | None


CURRENCY_DOC = "Currency of every money figure here (SPECWATCH_CURRENCY): an ISO 4217 code or a symbol."


class MoneyRead(Wire):
    """Money of one comparison. `saved_in_window`: money saved over the selected window ("saved in this
    window"); `per_week_at_window_rate`: that window's rate extrapolated to 7 days ("per week at this window's
    rate"); both with a 95 % bootstrap interval (`_low`, `_high`); negative: a loss."""

    currency: str = Field(description=CURRENCY_DOC)
    cost_per_mtok_spec: float | None = None
    cost_per_mtok_baseline: float | None = Field(
        default=None, description="The baseline's cost per 1 M tokens in the same bands, weighted by spec tokens.")
    saved_in_window: float | None = Field(default=None, description="Saved in this window (negative: a loss).")
    saved_in_window_low: float | None = None
    saved_in_window_high: float | None = None
    per_week_at_window_rate: float | None = Field(
        default=None, description="Per week at this window's rate: saved_in_window x 604800 / window seconds.")
    per_week_at_window_rate_low: float | None = None
    per_week_at_window_rate_high: float | None = None
    compared_fraction: float | None = Field(
        default=None, description="Share of the spec tokens in bands the baseline also served.")
    fixed_bands: list[str] = Field(
        default_factory=list, description="Bands with too few time bins to resample: their saving enters the "
                                          "interval as a constant (the interval leaves their noise out).")


class ClassCapacityRead(Wire):
    traffic_class: str
    spec_mode: str
    spec_pool: PoolRefRead
    baseline_pool: PoolRefRead | None
    replicas_spec: float | None
    replicas_baseline: float | None
    replicas_source: ReplicaSource
    currency: str = Field(description=CURRENCY_DOC)
    gpu_hour_price: float | None
    gpus_per_replica: int
    spec: SideRead
    baseline: SideRead | None
    bands: list[BandRead]
    money: MoneyRead
    stops_paying_band: str | None = Field(description="Lowest concurrency band where speculation loses throughput.")
    stops_paying_significant: bool | None
    note: str
    operating_band: str | None = Field(None, description=(
        "The concurrency band the spec pool mostly runs in: the band with the most bucket-seconds of output "
        "in the window (the economics above are of that load)."))
    replicas_note: str | None = Field(None, description=(
        "Why the replica count is not one number over the window: the pool's first per-replica row falls "
        "inside it (configured count before, observed after, source 'mixed'), or the window lacks replica rows "
        "the pool had before. Also appended to `note`."))


class CapacityRead(Wire):
    model_name: str
    window: WindowRead
    generated_at: datetime
    currency: str = Field(description=CURRENCY_DOC)
    method: str = Field(description="How the interval is computed.")
    classes: list[ClassCapacityRead]
    total: MoneyRead = Field(description="Every class of the model.")


class FleetCapacityRowRead(Wire):
    model_name: str
    traffic_class: str
    spec_mode: str
    currency: str = Field(description=CURRENCY_DOC)
    cost_per_mtok_spec: float | None
    cost_per_mtok_baseline: float | None
    saved_in_window: float | None
    saved_in_window_low: float | None
    saved_in_window_high: float | None
    per_week_at_window_rate: float | None
    per_week_at_window_rate_low: float | None
    per_week_at_window_rate_high: float | None
    stops_paying_band: str | None


class FleetCapacityRead(Wire):
    window: WindowRead
    generated_at: datetime
    currency: str = Field(description=CURRENCY_DOC)
    method: str
    rows: list[FleetCapacityRowRead]
    models: dict[str, MoneyRead]
    total: MoneyRead = Field(description="The fleet: every model summed (managers' figure).")
