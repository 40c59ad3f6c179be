"""Pools: every model x traffic class x spec mode seen, with freshness and rejected-data counts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, ReadSessionDep, SettingsDep
from backend.api.routes.shared import End, Start, errors, window_range
from backend.schemas.common import Duration
from backend.schemas.pools import PoolFiguresRead, PoolsRead
from backend.services import fleet, spec_figures

router = APIRouter(tags=["pools"], dependencies=[Depends(read_aggregate)])


@router.get("/pools", response_model=PoolsRead, summary="List pools")
def list_pools(session: ReadSessionDep, settings: SettingsDep, now: NowDep) -> PoolsRead:
    """Every pool with model, traffic class, spec mode, K, first/last seen, `stale` (last data older than
    `stale_after_seconds`) and the number of rejected (impossible) data rows per rule."""
    return fleet.list_pools(session, now=now, settings=settings)


@router.get("/pools/figures", response_model=PoolFiguresRead, summary="Spec-decode figures per pool, exact or estimated",
            responses=errors())
def pool_figures(
    session: ReadSessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name as the engine serves it", max_length=300)],
    window: Annotated[Duration | None, Query(description="Duration ending at `end`: 5m, 1h, 24h, 7d. Default 1h.")]
    = None,
    start: Start = None,
    end: End = None,
) -> PoolFiguresRead:
    """Per engine pool of the model: acceptance rate, mean accepted length, drafts, draft and accepted tokens
    over the window, each with `exact` (true: the engine's counters; false: an estimate, SGLang's gauges, with
    `estimate_basis` stating the weighting), `exposed` (false: the engine does not expose it; null value, never
    0) and `note`. docs/engines.md."""
    rng = window_range(settings, now, window, start, end)
    return spec_figures.pool_figures(session, model_name=model, rng=rng, settings=settings, now=now)
