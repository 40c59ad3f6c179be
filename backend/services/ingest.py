"""Validate assembled records and write them: facts, pools, layouts, rejections (one transaction)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from backend.db import repositories as repo
from backend.domain.quality import validate
from backend.domain.records import HISTOGRAM_FIELDS, BucketRecord, PoolKey

log = logging.getLogger("specwatch.ingest")


@dataclass
class IngestResult:
    rows: int = 0
    rejected: int = 0
    pools: int = 0


def ts(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def rejection_row(pool: PoolKey, bucket: float | None, rule: str, detail: str, *, source: str,
                  now: datetime) -> dict:
    return {"model_name": pool.model_name, "traffic_class": pool.traffic_class, "spec_mode": pool.spec_mode,
            "bucket_start": ts(bucket) if bucket is not None else None, "rule": rule, "detail": detail[:2000],
            "source": source, "created_at": now}


def write_records(session: Session, records: list[BucketRecord], *, width: int, source: str,
                  now: datetime) -> IngestResult:
    result = IngestResult()
    rejections: list[dict] = []
    kept: list[BucketRecord] = []
    for rec in records:
        for v in validate(rec):
            log.warning("%s %s for %s/%s/%s bucket %s: %s", "flagged" if v.kept else "rejected", v.rule, *rec.pool,
                        ts(rec.bucket_start), v.detail)
            rejections.append(rejection_row(rec.pool, rec.bucket_start, v.rule, v.detail, source=source, now=now))
        if not rec.is_empty():
            kept.append(rec)
    repo.record_rejections(session, rejections)
    result.rejected = len(rejections)

    spans: dict[PoolKey, list] = {}  # pool -> [first start, last start, K] in unix seconds
    for rec in kept:
        span = spans.get(rec.pool)
        k = len(rec.accepted_per_pos) if rec.accepted_per_pos else None
        if span is None:
            spans[rec.pool] = [rec.bucket_start, rec.bucket_start, k]
        else:
            span[0] = min(span[0], rec.bucket_start)
            span[1] = max(span[1], rec.bucket_start)
            span[2] = k or span[2]
    seen = {pool: (ts(first), ts(last + width), k) for pool, (first, last, k) in spans.items()}
    pool_ids = repo.upsert_pools(session, seen)
    layouts = repo.layout_ids(session, {h.bounds for rec in kept for name in HISTOGRAM_FIELDS
                                        if (h := getattr(rec, name)) is not None})
    starts = {t: ts(t) for t in {rec.bucket_start for rec in kept}}
    rows = [_row(rec, pool_ids[rec.pool], layouts, start=starts[rec.bucket_start], width=width, source=source, now=now)
            for rec in kept]
    result.rows = repo.upsert_buckets(session, rows)
    result.pools = len(seen)
    return result


def _row(rec: BucketRecord, pool_id: int, layouts: dict, *, start: datetime, width: int, source: str,
         now: datetime) -> dict:
    row = {
        "pool_id": pool_id, "bucket_start": start, "bucket_seconds": width,
        "drafts": rec.drafts, "draft_tokens": rec.draft_tokens, "accepted_tokens": rec.accepted_tokens,
        "accepted_per_pos": rec.accepted_per_pos, "generation_tokens": rec.generation_tokens,
        "prompt_tokens": rec.prompt_tokens, "finished_requests": rec.finished_requests,
        "preemptions": rec.preemptions, "running_mean": rec.running_mean, "restarts": rec.restarts,
        "source": source, "collected_at": now,
    }
    for name, h in (("itl", rec.itl), ("tpot", rec.tpot), ("ttft", rec.ttft)):
        if h is None:
            row[f"{name}_layout_id"] = row[f"{name}_buckets"] = row[f"{name}_sum"] = row[f"{name}_count"] = None
        else:
            row[f"{name}_layout_id"] = layouts[h.bounds]
            row[f"{name}_buckets"] = h.counts
            row[f"{name}_sum"] = h.sum
            row[f"{name}_count"] = h.count
    return row
