"""Latency quantiles per pool."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import WithJsonSchema

from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, ReadSessionDep, SettingsDep
from backend.api.routes.shared import End, Start, errors, window_range
from backend.schemas.common import Duration
from backend.schemas.latency import LatencyTableRead
from backend.services.errors import InvalidParameter
from backend.services.latency_table import latency_table

_QUANTILE = r"(?:0(?:\.[0-9]+)?|1(?:\.0+)?|\.[0-9]+)"  # a number in [0, 1], written plainly
QUANTILES_PATTERN = rf"^{_QUANTILE}(?:,{_QUANTILE})*$"
# the form the document declares; get_latency refuses any other with a sentence
Quantiles = Annotated[str, WithJsonSchema({"type": "string", "pattern": QUANTILES_PATTERN})]

router = APIRouter(tags=["latency"], dependencies=[Depends(read_aggregate)])


@router.get("/latency", response_model=LatencyTableRead, summary="Latency quantiles per pool",
            responses=errors("Unknown model", "Invalid window, family or quantile"))
def get_latency(
    session: ReadSessionDep, settings: SettingsDep, now: NowDep,
    family: Annotated[Literal["itl", "tpot", "ttft"], Query(description="Histogram family")] = "itl",
    q: Annotated[Quantiles, Query(description="Comma-separated quantiles in [0, 1]")] = "0.5,0.9,0.99",
    model: Annotated[list[str] | None, Query(description="Only these models (repeatable); default all")] = None,
    window: Annotated[Duration | None, Query(description="Duration ending now: 5m, 1h, 24h, 30d. Default 1h.")] = None,
    start: Start = None,
    end: End = None,
) -> LatencyTableRead:
    """Every pool's (speculative and baseline) histogram summed over the window and its quantiles, as
    Prometheus's `histogram_quantile(q, sum by (pool, le) (increase(..._bucket[window])))` over the same
    buckets. ITL is per engine step, not per token (see /summary for the spec-vs-baseline verdict)."""
    rng = window_range(settings, now, window, start, end)
    if not re.fullmatch(QUANTILES_PATTERN, q):
        raise InvalidParameter(f"q must be comma-separated quantiles in [0, 1] such as 0.5,0.9,0.99, got {q!r}")
    qs = [float(x) for x in q.split(",")]
    return latency_table(session, family=family, quantiles=qs, models=model, rng=rng, now=now, settings=settings)
