"""Capacity reads: generation tokens, covered buckets and running-request sums per pool, concurrency band and
time bin (the samples of the capacity bootstrap, their sum the window's totals). Set-based SQL; the same
routing as every other read (whole clean hours from `pool_buckets_hourly`, the rest from raw buckets)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session

from backend.db import routing
from backend.db.queries import _END_B
from backend.db.session import tune

_NO_BAND = -1


@dataclass(frozen=True)
class ThroughputBin:
    pool_id: int
    band_index: int | None  # domain.bands index; None: running requests not reported
    bin_end: int  # unix seconds
    buckets: int  # buckets with a generation-token increase (hourly rows: the hour's buckets of the band)
    generation_tokens: float
    running_sum: float | None  # Σ running_mean over those buckets


def throughput_bins(session: Session, *, pool_ids: Sequence[int], start: datetime, end: datetime,
                    bucket_seconds: int, bin_seconds: int, band_edges: Sequence[float]) -> list[ThroughputBin]:
    """Buckets ending in (start, end] that carry generation tokens, summed per pool, band and bin."""
    if not pool_ids:
        return []
    band = "CASE WHEN b.running_mean IS NULL OR b.running_mean <= 0 THEN -1 " + " ".join(
        f"WHEN b.running_mean <= :e{i} THEN {i}" for i in range(len(band_edges))) + f" ELSE {len(band_edges)} END"
    raw = (f"b.pool_id, {band} AS band, ({_END_B} + :bin - 1) / :bin AS gi, 1 AS n, "
           "b.generation_tokens AS gen, b.running_mean AS run_sum")
    hourly = ("b.pool_id, b.band::int AS band, (extract(epoch FROM b.hour_start)::bigint + 3600 + :bin - 1) / :bin "
              "AS gi, b.buckets AS n, b.generation_tokens AS gen, b.running_sum AS run_sum")
    hours = routing.whole_hours(start.timestamp(), end.timestamp()) if bin_seconds % routing.HOUR == 0 else None
    src, extra = routing.select(raw, hourly, hours, width=bucket_seconds, where="b.generation_tokens IS NOT NULL")
    sql = f"""
        SELECT pool_id, band, gi, sum(n) AS n, sum(gen) AS gen, sum(run_sum) AS run_sum
        FROM ({src}) AS s GROUP BY pool_id, band, gi ORDER BY pool_id, band, gi
    """
    params = {f"e{i}": float(e) for i, e in enumerate(band_edges)}
    params |= {"ids": list(pool_ids), "bin": bin_seconds, "lo": start - timedelta(seconds=bucket_seconds),
               "hi": end - timedelta(seconds=bucket_seconds)} | extra
    tune(session)
    return [ThroughputBin(pool_id=r.pool_id, band_index=None if r.band == _NO_BAND else int(r.band),
                          bin_end=int(r.gi) * bin_seconds, buckets=int(r.n), generation_tokens=float(r.gen),
                          running_sum=float(r.run_sum) if r.run_sum is not None else None)
            for r in session.execute(text(sql), params).all()]
