"""Chart annotations: counter restarts per bucket, changes of drafter, K or vLLM version (the pools'
configuration history: collection's K changes and operators' annotations), and the versions each pool
reports now."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, ReadSessionDep, SettingsDep
from backend.api.routes.shared import FromRow
from backend.db import annotation_queries as q
from backend.db import config_repo, queries
from backend.schemas import Duration, ErrorRead, Instant, WindowRead
from backend.services.errors import UnknownModel
from backend.services.windows import resolve_range

router = APIRouter(tags=["annotations"], dependencies=[Depends(read_aggregate)])


class AnnotationRead(FromRow):
    t: datetime
    kind: Literal["restart", "config_change"]
    traffic_class: str
    spec_mode: str
    text: str


class PoolVersionRead(BaseModel):
    traffic_class: str
    spec_mode: str
    drafter: str | None = None
    vllm_version: str | None = None


class AnnotationsRead(BaseModel):
    model_name: str
    window: WindowRead
    annotations: list[AnnotationRead]
    versions: list[PoolVersionRead]


@router.get("/annotations", response_model=AnnotationsRead, summary="Restarts and versions of one model",
            responses={404: {"model": ErrorRead, "description": "Unknown model"}})
def list_annotations(
    session: ReadSessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name")],
    range_: Annotated[Duration | None, Query(alias="range", description="Duration ending at `end`; default 24h")] = None,
    start: Annotated[Instant | None, Query(description="RFC 3339 start (instead of range)")] = None,
    end: Annotated[Instant | None, Query(description="RFC 3339 end (default now)")] = None,
) -> AnnotationsRead:
    """One annotation per bucket in which a pool of the model restarted (counters reset; found from the
    raw samples, by direct scrape or through Prometheus), at the bucket's end, and one per change of a
    pool's drafter, K or vLLM version, at the instant it took effect; at most 500, oldest first."""
    rng = resolve_range(now=now, window=range_, start=start, end=end, default_seconds=24 * 3600,
                        max_seconds=settings.max_range_seconds)
    pools = q.model_pools(session, model_name=model)
    if not pools:
        raise UnknownModel(model, queries.model_names(session))
    rows = q.restarts(session, model_name=model, start=rng.start, end=rng.end)
    notes = [AnnotationRead(t=r.bucket_start + timedelta(seconds=r.bucket_seconds), kind="restart",
                            traffic_class=r.traffic_class, spec_mode=r.spec_mode,
                            text=f"{r.traffic_class}/{r.spec_mode}: {r.restarts} restart(s)") for r in rows]
    words = {"num_spec_tokens": "K", "drafter": "drafter", "vllm_version": "vLLM"}
    notes += [AnnotationRead(t=c.at, kind="config_change", traffic_class=c.traffic_class, spec_mode=c.spec_mode,
                             text=f"{c.traffic_class}/{c.spec_mode}: {words.get(c.field, c.field)} "
                                  f"{c.old_value or '?'} -> {c.new_value}")
              for c in config_repo.changes(session, start=rng.start, end=rng.end, model_name=model)]
    notes = sorted(notes, key=lambda n: n.t)[:500]
    versions = [PoolVersionRead(traffic_class=p.traffic_class, spec_mode=p.spec_mode, drafter=p.drafter,
                                vllm_version=p.vllm_version) for p in pools]
    return AnnotationsRead(model_name=model, window=WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds),
                           annotations=notes, versions=versions)
