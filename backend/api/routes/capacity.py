"""Capacity and money: output-token throughput, cost per 1 M output tokens and the saving of speculation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from backend.api import cached, render
from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, ReaderDep, ReadSessionDep, SessionDep, SettingsDep
from backend.api.routes.shared import End, Start, errors, window_range
from backend.schemas.capacity import CapacityRead, FleetCapacityRead
from backend.schemas.common import Duration
from backend.services import capacity

router = APIRouter(tags=["capacity"], dependencies=[Depends(read_aggregate)])

WINDOW_DOC = "Duration ending at `end` (default now): 5m, 1h, 24h, 7d, 30d. Default 1h."


@router.get("/capacity", response_model=CapacityRead, summary="Throughput, cost and saving of one model",
            responses=errors())
def get_capacity(
    session: SessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name as served by vLLM", max_length=300)],
    window: Annotated[Duration | None, Query(description=WINDOW_DOC)] = None,
    start: Start = None,
    end: End = None,
) -> CapacityRead:
    """Per spec pool (class x spec mode) against the class's baseline: output tokens/s of the pool, per replica
    and per running request, per concurrency band and summed; cost per 1 M output tokens both ways from the
    configured GPU-hour price (`SPECWATCH_GPU_HOUR_PRICE`, `SPECWATCH_GPUS_PER_REPLICA`) in `currency`
    (`SPECWATCH_CURRENCY`); `saved_in_window` (negative: a loss) and `per_week_at_window_rate` with a bootstrap
    interval over time bins; the lowest band where
    speculation loses throughput. Replicas come from `SPECWATCH_POOL_REPLICAS` until they are collected; unknown
    replicas or no price give null costs. docs/capacity.md."""
    rng = window_range(settings, now, window, start, end)
    return capacity.capacity(session, model_name=model, rng=rng, now=now, settings=settings)


@router.get("/capacity/fleet", response_model=FleetCapacityRead, summary="Saving per model and for the fleet",
            responses=errors(None))
async def get_fleet_capacity(
    request: Request, session: ReadSessionDep, reader: ReaderDep, settings: SettingsDep, now: NowDep,
    window: Annotated[Duration | None, Query(description=WINDOW_DOC)] = None,
    start: Start = None,
    end: End = None,
) -> Response:
    """One row per model x class x spec mode (cost per 1 M tokens both ways, `saved_in_window` and
    `per_week_at_window_rate` with their intervals, in `currency`,
    the band where speculation stops paying), each model's total and the fleet's.

    Answers are kept per API process until new data lands (SPECWATCH_API_CACHE_*; docs/api-cache.md)."""
    rng = window_range(settings, now, window, start, end)
    return render.json_response(await cached.capacity_fleet_body(request.app.state.cache, reader, session, rng=rng,
                                                                 now=now, settings=settings))
