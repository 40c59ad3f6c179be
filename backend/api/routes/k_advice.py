"""K advice from measured per-position acceptance (the calculator's twin: POST /calc/k-advisor)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, SessionDep, SettingsDep
from backend.api.routes.shared import End, Start, errors, window_range
from backend.schemas.calc import KAdviceSetRead
from backend.schemas.common import Duration
from backend.services import k_advice

router = APIRouter(tags=["summary"], dependencies=[Depends(read_aggregate)])


@router.get("/k-advice", response_model=KAdviceSetRead, summary="Which K maximises the speedup, from measured data",
            responses=errors())
def get_k_advice(
    session: SessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Query(description="model_name as served by vLLM")],
    window: Annotated[Duration | None, Query(description="Duration ending at `end` (default now): 1h, 24h, 7d. "
                                                    "Default 1h.")] = None,
    start: Start = None,
    end: End = None,
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
    rng = window_range(settings, now, window, start, end)
    return k_advice.k_advice(session, model_name=model, rng=rng, now=now, settings=settings)
