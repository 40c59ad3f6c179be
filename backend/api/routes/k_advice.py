"""K advice from measured per-position acceptance (the calculator's twin: POST /calc/k-advisor)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, SessionDep, SettingsDep
from backend.schemas.calc import KAdviceSetRead
from backend.schemas.common import Duration, ErrorRead, Instant
from backend.services import k_advice
from backend.services.windows import resolve_range

router = APIRouter(tags=["summary"], dependencies=[Depends(read_aggregate)])


@router.get("/k-advice", response_model=KAdviceSetRead, summary="Which K maximises the speedup, from measured data",
            responses={404: {"model": ErrorRead, "description": "Unknown model (known names listed)"},
                       422: {"model": ErrorRead, "description": "Invalid window"}})
def get_k_advice(
    session: SessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name as served by vLLM")],
    window: Annotated[Duration | None, Query(description="Duration ending at `end` (default now): 1h, 24h, 7d. "
                                                    "Default 1h.")] = None,
    start: Annotated[Instant | None, Query(description="RFC 3339 start (instead of window)")] = None,
    end: Annotated[Instant | None, Query(description="RFC 3339 end (default now)")] = None,
) -> KAdviceSetRead:
    """Per spec mode and traffic class: the measured conditional acceptance p_1..p_K over the window,
    tau(K') = 1 + sum of u_j = p_1...p_j and S = tau / (1 + eps(K')) for K' = K-1..K+2 (rows above K
    `extrapolated` from a fitted decay of p_j), the best K and the gain over the current K; and for the mix
    (classes weighted by output tokens N + A: tokens, steps and step time pooled, each class keeping its own
    overhead). Each class's eps(K) = eps0 + K eps_tok comes from its own step overhead `eps_step`
    (`eps_step_source`: measured from ITL against the baseline in its band, or the band default), split by
    the configured eps0 share, or fitted through measurements of the same model and drafter at other K in the
    same concurrency band.
    Classes without per-position counters are listed in `unavailable`. See docs/k-advisor.md."""
    rng = resolve_range(now=now, window=window, start=start, end=end,
                        default_seconds=settings.default_window_seconds, max_seconds=settings.max_range_seconds)
    return k_advice.k_advice(session, model_name=model, rng=rng, now=now, settings=settings)
