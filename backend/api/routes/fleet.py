"""Fleet overview: one row per model x traffic class."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Query, Request, Response

from backend.api import cached, render
from backend.api.deps import NowDep, ReaderDep, ReadSessionDep, SettingsDep
from backend.api.read_headers import reads_of, with_reads
from backend.schemas import ErrorRead, FleetRead
from backend.services import fleet
from backend.services.windows import resolve_range

router = APIRouter(tags=["fleet"])


@router.get("/fleet", response_model=FleetRead, summary="Fleet overview",
            responses={422: {"model": ErrorRead, "description": "Invalid window"}})
async def get_fleet(
    request: Request, session: ReadSessionDep, reader: ReaderDep, settings: SettingsDep, now: NowDep,
    window: Annotated[str | None, Query(description="Duration ending now: 5m, 1h, 24h, 7d. Default 1h.")] = None,
    start: Annotated[str | None, Query(description="ISO-8601 start (instead of window)")] = None,
    end: Annotated[str | None, Query(description="ISO-8601 end (default now)")] = None,
    live: Annotated[bool, Query(description="Compute now even when a fresh snapshot exists")] = False,
) -> Response | FleetRead:
    """One row per model x traffic class (plus `mixed` for models with several classes): acceptance rate,
    tau, K, margin, P99 ITL/TPOT deltas and verdicts, band, freshness, a state (stale / no-data /
    low-volume / negative-margin / below-threshold / healthy) and a 24 h acceptance sparkline.

    A window ending now whose length is one of SPECWATCH_FLEET_SNAPSHOT_WINDOWS is served from the snapshot
    the beat task stores every SPECWATCH_FLEET_SNAPSHOT_INTERVAL_SECONDS (`generated_at` says when; at most
    SPECWATCH_FLEET_SNAPSHOT_MAX_AGE_SECONDS old), unless `live=true`; any other range is computed live.
    With a read replica (SPECWATCH_DATABASE_READ_URL), `reads` says whether the standby answered and its lag."""
    rng = resolve_range(now=now, window=window, start=start, end=end,
                        default_seconds=settings.default_window_seconds, max_seconds=settings.max_range_seconds)
    if not (start or end or live) and float(rng.seconds).is_integer():
        body = await cached.fleet_snapshot(request.app.state.cache, reader, session, window_seconds=int(rng.seconds),
                                           now=now, settings=settings)
        if body is not None:
            return render.json_response(with_reads(body, reads_of(request)))

    def live_fleet() -> FleetRead:
        out = fleet.fleet(session, rng=rng, now=now, settings=settings)
        out.reads = reads_of(request)
        return out

    return await anyio.to_thread.run_sync(live_fleet)
