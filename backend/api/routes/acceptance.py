"""Acceptance time series."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from backend.api import render
from backend.api.deps import NowDep, ReaderDep, SettingsDep
from backend.config import Settings
from backend.schemas import MIXED, AcceptanceSeriesRead, AcceptanceSetRead, ErrorRead
from backend.services import series
from backend.services.errors import InvalidParameter
from backend.services.windows import Range, parse_duration, resolve_range

router = APIRouter(tags=["acceptance"])


def _grid(rng: Range, step: str | None, window: str | None, settings: Settings) -> tuple[int | None, int | None, int]:
    """The step and rolling window asked for (seconds, None: default), and the time grains the read sums
    (validated: a bad step or window is a 422 before any read)."""
    step_s = parse_duration(step, name="step") if step else None
    rolling = parse_duration(window, name="window") if window else None
    return step_s, rolling, series.make_time_grid(rng, step=step_s, rolling=rolling, settings=settings).grains


@router.get("/acceptance", response_model=AcceptanceSeriesRead, summary="Acceptance over time",
            responses={404: {"model": ErrorRead, "description": "Unknown model, class or spec mode"},
                       422: {"model": ErrorRead, "description": "Invalid range, step or window"}})
async def get_acceptance(
    read: ReaderDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name")],
    traffic_class: Annotated[str, Query(description="A traffic class, or `mixed` (pooled)")] = MIXED,
    spec_mode: Annotated[str | None, Query(description="Needed only when the model runs several")] = None,
    range_: Annotated[str | None, Query(alias="range", description="Duration ending at `end`; default 24h")] = None,
    start: Annotated[str | None, Query(description="ISO-8601 start (instead of range)")] = None,
    end: Annotated[str | None, Query(description="ISO-8601 end (default now)")] = None,
    step: Annotated[str | None, Query(description="Point spacing, a multiple of the bucket width; "
                                                  "default: about 1,500 points")] = None,
    window: Annotated[str | None, Query(description="Rolling window: each point sums the trailing window "
                                                    "(default: the step)")] = None,
) -> Response:
    """acceptance_rate (A/D), mean_acceptance_length (1 + A/N), seed_alpha, and the summed drafts,
    draft_tokens and accepted_tokens per point. Point `t[i]` covers (t - step, t] (or (t - window, t]);
    counters are summed inside it, then divided; `null` where undefined."""
    rng = resolve_range(now=now, window=range_, start=start, end=end, default_seconds=24 * 3600,
                        max_seconds=settings.max_range_seconds)
    step_s, rolling, grains = _grid(rng, step, window, settings)
    body = await read.run(lambda session: render.series_body(series.acceptance_columns(
        session, model_name=model, traffic_class=traffic_class, spec_mode=spec_mode, rng=rng, step=step_s,
        rolling=rolling, now=now, settings=settings)), grains=grains)
    return render.json_response(body)


@router.get("/acceptance/bulk", response_model=AcceptanceSetRead, summary="Many acceptance series at once",
            responses={404: {"model": ErrorRead, "description": "Unknown model or spec mode"},
                       422: {"model": ErrorRead, "description": "Invalid range, step, window or field"}})
async def get_acceptance_bulk(
    read: ReaderDep, settings: SettingsDep, now: NowDep,
    by: Annotated[series.By, Query(description="`pool`: one series per speculative pool; `model`: each "
                                               "model's mix, per spec mode")] = "pool",
    model: Annotated[list[str] | None, Query(description="Only these models (repeatable); default all")] = None,
    spec_mode: Annotated[str | None, Query(description="Only this spec mode")] = None,
    fields: Annotated[str | None, Query(description="Comma-separated columns; default all of "
                                                    + ", ".join(series.COLUMNS))] = None,
    range_: Annotated[str | None, Query(alias="range", description="Duration ending at `end`; default 24h")] = None,
    start: Annotated[str | None, Query(description="ISO-8601 start (instead of range)")] = None,
    end: Annotated[str | None, Query(description="ISO-8601 end (default now)")] = None,
    step: Annotated[str | None, Query(description="Point spacing, a multiple of the bucket width; "
                                                  "default: about 1,500 points")] = None,
    window: Annotated[str | None, Query(description="Rolling window (default: the step)")] = None,
) -> Response:
    """The same series as `/acceptance`, for every pool or model at once, on one shared time grid `t`
    (one database read): what a fleet chart needs in one request. Points are capped like `/acceptance`
    (50,000 per series by default, and 2,000,000 pools × time steps per request)."""
    rng = resolve_range(now=now, window=range_, start=start, end=end, default_seconds=24 * 3600,
                        max_seconds=settings.max_range_seconds)
    columns = tuple(f.strip() for f in fields.split(",") if f.strip()) if fields else series.COLUMNS
    if not columns:
        raise InvalidParameter("fields is empty")
    step_s, rolling, grains = _grid(rng, step, window, settings)
    body = await read.run(lambda session: render.set_body(series.acceptance_set(
        session, by=by, models=model, spec_mode=spec_mode, rng=rng, step=step_s, rolling=rolling, now=now,
        settings=settings, columns=columns), columns=columns), grains=grains)
    return render.json_response(body)
