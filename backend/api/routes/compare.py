"""Drafter / configuration A/B (services.compare) and the pools' configuration history (config_changes)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field

from backend.api.auth import Operator, read_aggregate
from backend.api.deps import NowDep, ReadSessionDep, SessionDep, SettingsDep
from backend.db import config_repo, queries
from backend.schemas.common import Duration, ErrorRead, Instant
from backend.services import compare as svc
from backend.services.errors import InvalidParameter, NotFound, UnknownModel
from backend.services.windows import parse_duration, parse_instant, resolve_range

router = APIRouter(tags=["compare"], dependencies=[Depends(read_aggregate)])
NAME = Annotated[str, Query(min_length=1, max_length=300)]


@router.get("/compare", responses={404: {"model": ErrorRead}, 422: {"model": ErrorRead}, 200: {
    "description": "The comparison as JSON, or CSV with format=csv",
    "content": {"application/json": {}, "text/csv": {"schema": {"type": "string"}}}}})
def get_compare(
    session: ReadSessionDep, settings: SettingsDep, now: NowDep, model: NAME,
    a: Annotated[str | None, Query(max_length=120, description="side A (reference): a spec mode")] = None,
    b: Annotated[str | None, Query(max_length=120, description="side B (candidate): a spec mode; not with at=")] = None,
    at: Annotated[Instant | None, Query(description="before/after this instant (A before, B after)")] = None,
    range_: Annotated[Duration | None, Query(alias="range", description="side by side: the window ending at "
                                             "`end` (default 24h); before/after: each side's length (default 7d)")] = None,
    start: Annotated[Instant | None, Query(description="side by side: RFC 3339 start (instead of range)")] = None,
    end: Annotated[Instant | None, Query(description="side by side: RFC 3339 end (default now)")] = None,
    traffic_class: Annotated[str | None, Query(alias="class", max_length=120, description="one class only")] = None,
    format: Literal["json", "csv"] = "json",
) -> Any:
    """B against A per class and for the mix, load-matched by concurrency band: alpha, tau, per-position
    acceptance, measured speedup, P99 ITL / TPOT and cost per 1 M tokens, each with a 95 % interval and a
    verdict (better / worse / no-significant-change / inconclusive), and the sentence the CLI prints."""
    a, b, traffic_class = a or None, b or None, traffic_class or None  # empty: not given
    if at:
        if start or end:
            raise InvalidParameter("with at=, give each side's length as range= (not start/end)")
        span = parse_duration(range_, name="range") if range_ else svc.DEFAULT_SPAN
        data = svc.compare(session, model=model, a=a, b=b, at=parse_instant(at, name="at"), span_seconds=span,
                           traffic_class=traffic_class, now=now, settings=settings)
    else:
        rng = resolve_range(now=now, window=range_, start=start, end=end, default_seconds=24 * 3600,
                            max_seconds=settings.max_range_seconds)
        data = svc.compare(session, model=model, a=a, b=b, rng=rng, traffic_class=traffic_class, now=now,
                           settings=settings)
    if format == "csv":
        return Response(svc.to_csv(data), media_type="text/csv",
                        headers={"Content-Disposition": 'attachment; filename="specwatch-compare.csv"'})
    return data


class ConfigChangeRead(BaseModel):
    at: str
    model: str
    traffic_class: str
    spec_mode: str
    field: str
    old: str | None
    new: str | None
    source: str
    note: str | None = None


class ConfigChangeWrite(BaseModel):
    model: str = Field(min_length=1, max_length=300)
    traffic_class: str = Field(min_length=1, max_length=120)
    spec_mode: str = Field(min_length=1, max_length=120)
    at: datetime
    field: Literal["drafter", "num_spec_tokens", "vllm_version"]
    old: str | None = Field(default=None, max_length=300)
    new: str = Field(min_length=1, max_length=300)
    note: str | None = Field(default=None, max_length=500)


@router.get("/config-changes", response_model=list[ConfigChangeRead], responses={422: {"model": ErrorRead}})
def list_changes(session: ReadSessionDep, settings: SettingsDep, now: NowDep,
                 model: Annotated[str | None, Query(max_length=300)] = None,
                 range_: Annotated[Duration | None, Query(alias="range", description="default 7d")] = None,
                 start: Instant | None = None, end: Instant | None = None) -> list[dict]:
    """Changes of drafter, K or vLLM version (found by collection or annotated), oldest first, at most 500."""
    rng = resolve_range(now=now, window=range_, start=start, end=end, default_seconds=7 * 86400,
                        max_seconds=settings.max_range_seconds)
    return [svc._change_dict(c) for c in config_repo.changes(session, start=rng.start, end=rng.end, model_name=model)]


@router.post("/config-changes", response_model=ConfigChangeRead, status_code=201,
             responses={404: {"model": ErrorRead}, 422: {"model": ErrorRead}})
def annotate_change(body: ConfigChangeWrite, session: SessionDep, now: NowDep, who: Operator) -> dict:
    """Annotate a change an operator made (a new drafter version, K or vLLM upgrade) at `at`; it shows in
    the weekly report's "what changed this week" with its before/after verdicts."""
    at = body.at if body.at.tzinfo else body.at.replace(tzinfo=now.tzinfo)
    if at > now + timedelta(minutes=5):
        raise InvalidParameter("at= must not be in the future")
    pool = next((p for p in queries.list_pools(session) if (p.model_name, p.traffic_class, p.spec_mode)
                 == (body.model, body.traffic_class, body.spec_mode) and getattr(p, "origin", "engine") == "engine"),
                None)
    if pool is None:
        if body.model not in queries.model_names(session):
            raise UnknownModel(body.model, queries.model_names(session))
        raise NotFound(f"no pool {body.model}/{body.traffic_class}/{body.spec_mode}", [], code="unknown_pool")
    config_repo.record(session, pool_id=pool.id, at=at, field=body.field, old=body.old, new=body.new,
                       source="annotation", now=now, note=body.note, by=who.name[:120])
    return {"at": at.isoformat(), "model": body.model, "traffic_class": body.traffic_class,
            "spec_mode": body.spec_mode, "field": body.field, "old": body.old, "new": body.new,
            "source": "annotation", "note": body.note}
