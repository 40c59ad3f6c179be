"""Acceptance time series."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from fastapi import APIRouter, Depends, Request, Response

from backend.api import query, render
from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, ReaderDep, SettingsDep
from backend.api.query import Param
from backend.api.routes.shared import errors
from backend.config import Settings
from backend.schemas.acceptance import AcceptanceSeriesRead, AcceptanceSetRead
from backend.schemas.common import DURATION_FORM, DURATION_PATTERN, INSTANT_FORM, INSTANT_PATTERN, ErrorRead
from backend.schemas.summary import MIXED
from backend.services import series
from backend.services.windows import Range, parse_duration, resolve_range

router = APIRouter(tags=["acceptance"], dependencies=[Depends(read_aggregate)])


def _grid(rng: Range, step: str | None, window: str | None, settings: Settings) -> tuple[int | None, int | None]:
    """The step and rolling window asked for (seconds, None: default), validated against the time grid they
    make: a bad step or window is a 422 before any read."""
    step_s = parse_duration(step, name="step") if step else None
    rolling = parse_duration(window, name="window") if window else None
    series.make_time_grid(rng, step=step_s, rolling=rolling, settings=settings)
    return step_s, rolling


def _list_of(names: tuple[str, ...]) -> str:
    """A comma-separated list of `names` (or nothing), as a pattern."""
    one = "(?:" + "|".join(names) + ")"
    return f"^(?:{one}(?:,{one})*)?$"


RANGE = (
    Param("range", "Duration ending at `end`; default 24h. " + DURATION_FORM, pattern=DURATION_PATTERN),
    Param("start", "Start (instead of range). " + INSTANT_FORM, pattern=INSTANT_PATTERN),
    Param("end", "End (default now). " + INSTANT_FORM, pattern=INSTANT_PATTERN),
    Param("step", "Point spacing, a multiple of the bucket width; default: about 1,500 points. " + DURATION_FORM,
          pattern=DURATION_PATTERN),
)
SERIES = (
    Param("model", "model_name", required=True),
    Param("traffic_class", "A traffic class, or `mixed` (pooled)", default=MIXED),
    Param("spec_mode", "Needed only when the model runs several"),
    *RANGE,
    Param("window", "Rolling window: each point sums the trailing window (default: the step). " + DURATION_FORM,
          pattern=DURATION_PATTERN),
)
BULK = (
    Param("by", "`pool`: one series per speculative pool; `model`: each model's mix, per spec mode",
          default="pool", choices=("pool", "model")),
    Param("model", "Only these models (repeatable); default all", repeated=True),
    Param("spec_mode", "Only this spec mode"),
    Param("fields", "Comma-separated columns; default (or empty) all of " + ", ".join(series.COLUMNS),
          pattern=_list_of(series.COLUMNS)),
    *RANGE,
    Param("window", "Rolling window (default: the step). " + DURATION_FORM, pattern=DURATION_PATTERN),
)


def _range(q: dict, now: datetime, settings: Settings) -> Range:
    return resolve_range(now=now, window=q["range"], start=q["start"], end=q["end"], default_seconds=24 * 3600,
                         max_seconds=settings.max_range_seconds)


@router.get("/acceptance", response_model=AcceptanceSeriesRead, summary="Acceptance over time",
            openapi_extra=query.openapi(SERIES),
            responses={404: {"model": ErrorRead, "description": "Unknown model, class or spec mode"},
                       422: {"model": ErrorRead, "description": "Invalid range, step or window; or no spec_mode "
                             "for a model that runs several (code spec_mode_required, `known` lists them)"}})
async def get_acceptance(request: Request, read: ReaderDep, settings: SettingsDep, now: NowDep) -> Response:
    """acceptance_rate (A/D), mean_acceptance_length (1 + A/N), seed_alpha, and the summed drafts,
    draft_tokens and accepted_tokens per point. Point `t[i]` covers (t - step, t] (or (t - window, t]);
    counters are summed inside it, then divided; `null` where undefined."""
    q = query.read(request, SERIES)
    rng = _range(q, now, settings)
    step_s, rolling = _grid(rng, q["step"], q["window"], settings)
    body = await read.run(lambda session: render.series_body(series.acceptance_columns(
        session, model_name=q["model"], traffic_class=q["traffic_class"], spec_mode=q["spec_mode"], rng=rng,
        step=step_s, rolling=rolling, now=now, settings=settings)))
    return render.json_response(body)


@router.get("/acceptance/bulk", response_model=AcceptanceSetRead, summary="Many acceptance series at once",
            openapi_extra=query.openapi(BULK),
            responses=errors("Unknown model or spec mode", "Invalid range, step, window or field"))
async def get_acceptance_bulk(request: Request, read: ReaderDep, settings: SettingsDep, now: NowDep) -> Response:
    """The same series as `/acceptance`, for every pool or model at once, on one shared time grid `t`
    (one database read): what a fleet chart needs in one request. Points are capped like `/acceptance`
    (50,000 per series by default, and 2,000,000 pools × time steps per request)."""
    q = query.read(request, BULK)
    rng = _range(q, now, settings)
    fields = q["fields"]
    columns = tuple(fields.split(",")) if fields else series.COLUMNS
    step_s, rolling = _grid(rng, q["step"], q["window"], settings)
    by = cast(series.By, q["by"])
    body = await read.run(lambda session: render.set_body(series.acceptance_set(
        session, by=by, models=q["model"], spec_mode=q["spec_mode"], rng=rng, step=step_s, rolling=rolling,
        now=now, settings=settings, columns=columns), columns=columns))
    return render.json_response(body)
