"""Pools: every model x traffic class x spec mode seen, with freshness and rejected-data counts."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, ReadSessionDep, SettingsDep
from backend.schemas import PoolsRead
from backend.services import fleet

router = APIRouter(tags=["pools"], dependencies=[Depends(read_aggregate)])


@router.get("/pools", response_model=PoolsRead, summary="List pools")
def list_pools(session: ReadSessionDep, settings: SettingsDep, now: NowDep) -> PoolsRead:
    """Every pool with model, traffic class, spec mode, K, first/last seen, `stale` (last data older than
    `stale_after_seconds`) and the number of rejected (impossible) data rows per rule."""
    return fleet.list_pools(session, now=now, settings=settings)
