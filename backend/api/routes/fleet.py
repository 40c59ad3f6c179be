"""Fleet overview: one row per model x traffic class."""

from __future__ import annotations

from typing import Annotated, Literal

import anyio.to_thread
import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from sqlalchemy.orm import Session

from backend.api import cached, render
from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, ReaderDep, ReadSessionDep, SettingsDep
from backend.api.read_headers import reads_of, with_reads
from backend.api.routes.shared import End, Start, errors, window_range
from backend.schemas.common import Duration
from backend.schemas.fleet import FleetPageRead, FleetRead, FleetState
from backend.services import fleet, fleet_alerts
from backend.services import fleet_page as fp

router = APIRouter(tags=["fleet"], dependencies=[Depends(read_aggregate)])
Sort = Literal[fp.SORTS]  # type: ignore[valid-type]


@router.get("/fleet", response_model=FleetRead | FleetPageRead, summary="Fleet overview",
            responses=errors(None, "Invalid window or paging parameter"))
async def get_fleet(
    request: Request, session: ReadSessionDep, reader: ReaderDep, settings: SettingsDep, now: NowDep,
    window: Annotated[Duration | None, Query(description="Duration ending now: 5m, 1h, 24h, 7d. Default 1h.")] = None,
    start: Start = None,
    end: End = None,
    live: Annotated[bool, Query(description="Compute now even when a fresh snapshot exists")] = False,
    q: Annotated[str | None, Query(min_length=1, max_length=fp.MAX_QUERY, description=(
        "Keep rows whose model, class, spec mode, state or band contains this text (case-insensitive)."))] = None,
    model: Annotated[str | None, Query(min_length=1, max_length=200, description="Keep this model's rows.")] = None,
    state: Annotated[list[FleetState] | None, Query(max_length=8, description=(
        "Keep rows in these states (repeat the parameter for several)."))] = None,
    sort: Annotated[Sort | None, Query(description=(
        "Order by a field, `-field` descending; nulls last either way; ties by model, class, mode. `state` "
        "sorts most urgent first (firing, pending, negative-margin, below-threshold, stale, low-volume, no-data, "
        "estimated, healthy). "
        "Absent: the unpaged answer's order."))] = None,
    offset: Annotated[int | None, Query(ge=0, le=fp.MAX_OFFSET, description="First matching row of the page.")] = None,
    limit: Annotated[int | None, Query(ge=1, le=fp.MAX_LIMIT, description=(
        f"Rows per page (default {fp.DEFAULT_LIMIT})."))] = None,
) -> Response | FleetRead:
    """One row per model x traffic class (plus `mixed` for models with several classes): acceptance rate,
    tau, K, margin, P99 ITL/TPOT deltas and verdicts, band, freshness, the row's alpha threshold (its
    class's alpha_low rule), the pool's pending / firing alerts, a state (firing / pending when an alert
    is, else stale / no-data / low-volume / negative-margin / below-threshold / healthy, or estimated: no
    exact counts, only an engine's estimate) and a 24 h
    acceptance sparkline whose last hour has finer steps. Alerts are read when the answer is served, also
    from a snapshot.

    A window ending now whose length is one of SPECWATCH_FLEET_SNAPSHOT_WINDOWS is served from the snapshot
    the beat task stores every SPECWATCH_FLEET_SNAPSHOT_INTERVAL_SECONDS (`generated_at` says when; at most
    SPECWATCH_FLEET_SNAPSHOT_MAX_AGE_SECONDS old), unless `live=true`; any other range is computed live.
    With a read replica (SPECWATCH_DATABASE_READ_URL), `reads` says whether the standby answered and its lag.

    Large fleets: with any of `q`, `model`, `state`, `sort`, `offset`, `limit` the answer is one page
    (FleetPageRead): the matching rows in the asked order from `offset`, at most `limit`, with
    `total_rows`, `matched_rows` and `state_counts`. Without them the answer is every row, as always."""
    rng = window_range(settings, now, window, start, end)
    paged = any(p is not None for p in (q, model, state, sort, offset, limit))
    standard = not (start or end or live) and float(rng.seconds).is_integer()
    if not paged:
        if standard:
            body = await cached.fleet_snapshot(request.app.state.cache, reader, session,
                                               window_seconds=int(rng.seconds), now=now, settings=settings)
            if body is not None:
                body = await anyio.to_thread.run_sync(lambda: _with_alerts(body, session))
                return render.json_response(with_reads(body, reads_of(request)))

        def live_fleet() -> FleetRead:
            out = fleet.fleet(session, rng=rng, now=now, settings=settings)
            out.reads = reads_of(request)
            return out

        return await anyio.to_thread.run_sync(live_fleet)
    query = fp.PageQuery(q=q, model=model, states=tuple(state or ()), sort=sort, offset=offset or 0,
                         limit=limit or fp.DEFAULT_LIMIT)

    def one_page() -> bytes:
        body = fleet.snapshot_parsed(session, window_seconds=int(rng.seconds), now=now, settings=settings) \
            if standard else None
        if body is None:
            body = fleet.fleet(session, rng=rng, now=now, settings=settings).model_dump(mode="json")
        else:
            body = fleet.overlay(body, session)  # the alerts of this moment, not the snapshot's
        out = fp.page(body, query)
        reads = reads_of(request)
        return orjson.dumps({**out, "reads": reads.model_dump()} if reads is not None else out)

    return render.json_response(await anyio.to_thread.run_sync(one_page))


def _with_alerts(body: bytes, session: Session) -> bytes:
    """A stored snapshot's body with the alerts of this moment (as stored, without a parse, when no row has one)."""
    found = fleet_alerts.active(session)
    return orjson.dumps(fleet.overlay(orjson.loads(body), session, found)) if found else body
