"""Per-model summary: acceptance, economics and latency per traffic class and for the mix."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from backend.api import cached, render
from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, ReaderDep, ReadSessionDep, SettingsDep
from backend.schemas.common import Duration, ErrorRead, Instant
from backend.schemas.summary import SummaryRead
from backend.services.windows import resolve_range

router = APIRouter(tags=["summary"], dependencies=[Depends(read_aggregate)])

WINDOW_DOC = "Duration ending at `end` (default now): 5m, 1h, 24h, 7d, 30d. Default 1h."


@router.get("/summary", response_model=SummaryRead, summary="Summary of one model",
            responses={404: {"model": ErrorRead, "description": "Unknown model (known names listed)"},
                       422: {"model": ErrorRead, "description": "Invalid window"}})
async def get_summary(
    request: Request, session: ReadSessionDep, reader: ReaderDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name as served by vLLM")],
    window: Annotated[Duration | None, Query(description=WINDOW_DOC)] = None,
    start: Annotated[Instant | None, Query(description="RFC 3339 start (instead of window)")] = None,
    end: Annotated[Instant | None, Query(description="RFC 3339 end (default now)")] = None,
) -> Response:
    """Per traffic class (and `mixed`, counters pooled across classes): acceptance rate r = A/D, seed alpha
    A/(N K), tau = 1 + A/N, per-position u_i and p_i, per-token a (i.i.d. fit), eps and its source
    (measured from TPOT vs the baseline in the same concurrency band, else the configured default for the
    band), break-even alpha eps/K, margin, estimated and measured speedup, P50/P90/P99 of ITL (per engine
    step) and TPOT (per token) vs the baseline with verdicts, band, volume, freshness and data-quality flags.

    Answers are kept per API process until new data lands (SPECWATCH_API_CACHE_*; docs/api-cache.md).
    """
    rng = resolve_range(now=now, window=window, start=start, end=end,
                        default_seconds=settings.default_window_seconds, max_seconds=settings.max_range_seconds)
    return render.json_response(await cached.summary_body(request.app.state.cache, reader, session, model=model,
                                                          rng=rng, now=now, settings=settings))
