"""Per-model summary: acceptance, economics and latency per traffic class and for the mix."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from backend.api import cached, render
from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, ReaderDep, ReadSessionDep, SettingsDep
from backend.api.routes.shared import End, Start, errors, window_range
from backend.schemas.common import Duration
from backend.schemas.summary import SummaryRead

router = APIRouter(tags=["summary"], dependencies=[Depends(read_aggregate)])

WINDOW_DOC = "Duration ending at `end` (default now): 5m, 1h, 24h, 7d, 30d. Default 1h."


@router.get("/summary", response_model=SummaryRead, summary="Summary of one model",
            responses=errors())
async def get_summary(
    request: Request, session: ReadSessionDep, reader: ReaderDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name as served by vLLM")],
    window: Annotated[Duration | None, Query(description=WINDOW_DOC)] = None,
    start: Start = None,
    end: End = None,
) -> Response:
    """Per traffic class (and `mixed`, counters pooled across classes): acceptance rate r = A/D, seed alpha
    A/(N K), tau = 1 + A/N, per-position u_i and p_i, per-token a (i.i.d. fit), eps and its source
    (measured from TPOT vs the baseline in the same concurrency band, else the configured default for the
    band), break-even alpha eps/K, margin, estimated and measured speedup, P50/P90/P99 of ITL (per engine
    step) and TPOT (per token) vs the baseline with verdicts, band, volume, freshness and data-quality flags.

    Answers are kept per API process until new data lands (SPECWATCH_API_CACHE_*; docs/api-cache.md).
    """
    rng = window_range(settings, now, window, start, end)
    return render.json_response(await cached.summary_body(request.app.state.cache, reader, session, model=model,
                                                          rng=rng, now=now, settings=settings))
