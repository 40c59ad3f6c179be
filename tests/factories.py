"""Plain factory functions: build ORM rows with keyword defaults, add, flush, return."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.db.models import HistogramLayout, Pool, PoolBucket, Rejection

ITL_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
              20.0, 40.0, 80.0)
T0 = datetime(2026, 11, 30, 11, 0, tzinfo=UTC)


def make_layout(session: Session, bounds: Sequence[float] = ITL_BOUNDS) -> HistogramLayout:
    existing = session.scalar(select(HistogramLayout).where(HistogramLayout.bounds == list(bounds)))
    if existing is not None:
        return existing
    layout = HistogramLayout(bounds=list(bounds))
    session.add(layout)
    session.flush()
    return layout


def make_pool(session: Session, **kw) -> Pool:
    values = {"model_name": "llama-70b", "traffic_class": "chat", "spec_mode": "eagle3", "num_spec_tokens": 3,
                  "drafter": "eagle3-llama-70b", "vllm_version": "0.33.0", "first_seen": T0, "last_seen": T0}
    values.update(kw)
    if values["spec_mode"] == "off" and "num_spec_tokens" not in kw:
        values["num_spec_tokens"] = None
    pool = Pool(**values)
    session.add(pool)
    session.flush()
    return pool


def cumulative(per_bucket: Sequence[float]) -> list[float]:
    """Per-bucket (non-cumulative) counts, +Inf bucket included last -> cumulative counts per le."""
    out, acc = [], 0.0
    for c in per_bucket:
        acc += c
        out.append(acc)
    return out


def make_bucket(session: Session, pool: Pool, start: datetime, **kw) -> PoolBucket:
    """One bucket of increases. Histograms: pass `itl=[per-le counts...]` (non-cumulative, +Inf last,
    len(bounds)+1) or `itl_buckets=` (cumulative) with `itl_layout_id=`; same for tpot/ttft."""
    values: dict = {"pool_id": pool.id, "bucket_start": start, "bucket_seconds": 60, "source": "prometheus",
                        "collected_at": start + timedelta(minutes=2)}
    for fam in ("itl", "tpot", "ttft"):
        if fam in kw:
            counts = cumulative(kw.pop(fam))
            bounds = kw.pop(f"{fam}_bounds", ITL_BOUNDS)
            values[f"{fam}_layout_id"] = make_layout(session, bounds).id
            values[f"{fam}_buckets"] = counts
            values[f"{fam}_count"] = counts[-1]
            values.setdefault(f"{fam}_sum", kw.pop(f"{fam}_sum", None))
    values.update(kw)
    bucket = PoolBucket(**values)
    session.add(bucket)
    end = start + timedelta(seconds=values["bucket_seconds"])
    pool.last_seen = max(pool.last_seen, end)
    pool.first_seen = min(pool.first_seen, start)
    session.flush()
    return bucket


def make_rejection(session: Session, pool: Pool, **kw) -> Rejection:
    values = {"model_name": pool.model_name, "traffic_class": pool.traffic_class, "spec_mode": pool.spec_mode,
                  "bucket_start": T0, "rule": "accepted_gt_drafted", "detail": "A > D", "source": "prometheus",
                  "created_at": T0}
    values.update(kw)
    row = Rejection(**values)
    session.add(row)
    session.flush()
    return row
