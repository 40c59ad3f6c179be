"""Fleet overview: one row per model x traffic class."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from backend.api.deps import NowDep, SessionDep, SettingsDep
from backend.schemas import ErrorRead, FleetRead
from backend.services import fleet
from backend.services.windows import resolve_range

router = APIRouter(tags=["fleet"])


@router.get("/fleet", response_model=FleetRead, summary="Fleet overview",
            responses={422: {"model": ErrorRead, "description": "Invalid window"}})
def get_fleet(
    session: SessionDep, settings: SettingsDep, now: NowDep,
    window: Annotated[str | None, Query(description="Duration ending now: 5m, 1h, 24h, 7d. Default 1h.")] = None,
    start: Annotated[str | None, Query(description="ISO-8601 start (instead of window)")] = None,
    end: Annotated[str | None, Query(description="ISO-8601 end (default now)")] = None,
) -> FleetRead:
    """One row per model x traffic class (plus `mixed` for models with several classes): acceptance rate,
    tau, K, margin, P99 ITL/TPOT deltas and verdicts, band, freshness, a state (stale / no-data /
    low-volume / negative-margin / below-threshold / healthy) and a 24 h acceptance sparkline."""
    rng = resolve_range(now=now, window=window, start=start, end=end,
                        default_seconds=settings.default_window_seconds, max_seconds=settings.max_range_seconds)
    return fleet.fleet(session, rng=rng, now=now, settings=settings)
