"""Replicas of a model's pools: per (instance, engine) alpha, tau, drafts, TPOT/ITL P99, last seen."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, SessionDep, SettingsDep
from backend.api.routes.shared import errors
from backend.db import queries
from backend.schemas.common import Duration
from backend.schemas.pools import ReplicasRead
from backend.services import replicas
from backend.services.errors import UnknownModel
from backend.services.windows import InvalidWindow, parse_duration

router = APIRouter(tags=["replicas"], dependencies=[Depends(read_aggregate)])


@router.get("/models/{model:path}/replicas", response_model=ReplicasRead, summary="Replicas of a model's pools",
            responses=errors(invalid="Invalid window, or one outside its bounds"))
def get_replicas(
    session: SessionDep, settings: SettingsDep, now: NowDep,
    model: Annotated[str, Path(description="model_name as served by vLLM (may contain '/')", max_length=300)],
    window: Annotated[Duration, Query(description="Duration ending at the newest replica bucket, rounded up to whole "
                                 "replica buckets (10m by default); at most SPECWATCH_REPLICA_RETENTION_DAYS. "
                                 "Default 1h.", max_length=20)] = "1h",
) -> ReplicasRead:
    """Per pool (traffic class x spec mode) of the model, per replica: alpha = A/D and tau = 1 + A/N from the
    replica's counters summed over the window, the other replicas' pooled alpha (what `replica_outlier`
    compares with), drafts, P99 TPOT and ITL from the summed histogram buckets, last seen and version
    labels. A replica's rows are SPECWATCH_REPLICA_BUCKET_SECONDS wide and kept
    SPECWATCH_REPLICA_RETENTION_DAYS; the window ends at the newest one and is rounded up to whole buckets."""
    grain = settings.replica_grain or settings.bucket_seconds
    seconds = -(-parse_duration(window or "1h") // grain) * grain  # whole replica buckets (empty: 1h)
    longest = settings.replica_retention_days * 86400
    if seconds > longest:
        raise InvalidWindow(f"window={window!r}: longer than the replica retention ({longest:g}s, "
                            "SPECWATCH_REPLICA_RETENTION_DAYS)")
    out = replicas.model_replicas(session, model, window=seconds, now=now)
    if out is None:
        raise UnknownModel(model, queries.model_names(session))
    return ReplicasRead(**out, bucket_seconds=grain)
