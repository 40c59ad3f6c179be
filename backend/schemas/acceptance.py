"""Acceptance time series (GET /acceptance and its bulk form)."""

from datetime import datetime

from pydantic import Field

from backend.schemas.common import PoolRefRead, WindowRead, Wire


class AcceptanceSeriesRead(Wire):
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


class AcceptanceColumnsRead(Wire):
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


class AcceptanceSetRead(Wire):
    """Many series on one time grid: `t` is shared, each series holds one value per point."""

    window: WindowRead
    step_seconds: int
    rolling_window_seconds: int | None = None
    bucket_seconds: int
    t: list[datetime]
    series: list[AcceptanceColumnsRead]
