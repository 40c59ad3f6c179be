"""Validate assembled records and write them: facts, pools, layouts, rejections (one transaction)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from backend.db import repositories as repo
from backend.domain.quality import (
    DIPS_REFUSED,
    LABEL_LIMITS,
    Violation,
    label_violation,
    storable_label,
    validate,
)
from backend.domain.records import HISTOGRAM_FIELDS, BucketRecord, ConfigSeen, PoolKey, PoolSeen

log = logging.getLogger("specwatch.ingest")
MAX_LIMIT_ROWS = 50


@dataclass
class IngestResult:
    rows: int = 0
    rejected: int = 0
    pools: int = 0


def ts(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def rejection_row(pool: PoolKey, bucket: float | None, rule: str, detail: str, *, source: str,
                  now: datetime) -> dict:
    labels = {name: storable_label(getattr(pool, name), limit) for name, limit in LABEL_LIMITS.items()}
    return {**labels, "bucket_start": ts(bucket) if bucket is not None else None, "rule": rule, "detail": detail[:2000],
            "source": source, "created_at": now}


def write_records(session: Session, records: list[BucketRecord], *, width: int, source: str,
                  now: datetime, max_pools: int = 0) -> IngestResult:
    """Store `records` (refusing what breaks a rule); with max_pools > 0, no new pool is created once that
    many pools are stored (its records are refused, one `pool_limit` row per pool); stored pools go on."""
    result = IngestResult()
    rejections: list[dict] = []
    kept: list[BucketRecord] = []
    records = _refuse_bad_labels(records, rejections, source=source, now=now)
    if max_pools > 0:
        records = _refuse_new_pools_past(max_pools, session, records, rejections, source=source, now=now)
    for rec in records:
        for v in validate(rec):
            log.warning("%s %s for %s/%s/%s bucket %s: %s", "flagged" if v.kept else "rejected", v.rule, *rec.pool,
                        ts(rec.bucket_start), v.detail)
            rejections.append(rejection_row(rec.pool, rec.bucket_start, v.rule, v.detail, source=source, now=now))
        if rec.dips:
            what = ("refused: increase() read each dip as a reset" if DIPS_REFUSED in rec.flags
                    else "flagged, kept (increase 0 for the dip)")
            detail = f"{what}: counter dipped without a reset: " + ", ".join(
                f"{name} x{n}" for name, n in sorted(rec.dips.items()))
            rejections.append(rejection_row(rec.pool, rec.bucket_start, "counter_dip", detail, source=source,
                                            now=now))
        if rec.gap_seconds:  # flagged, kept: the counts are exact, their minute is not
            rejections.append(rejection_row(
                rec.pool, rec.bucket_start, "gap_filled",
                f"flagged, kept: holds the counters' whole increase over a {rec.gap_seconds:.0f} s gap without "
                "samples (closed by the samples on both sides; the buckets in the gap have no data)",
                source=source, now=now))
        if not rec.is_empty():
            kept.append(rec)
    repo.record_rejections(session, rejections)
    result.rejected = len(rejections)

    seen = pools_seen(kept, width)
    engines = {rec.pool: rec.engine for rec in kept if rec.engine}
    pool_ids = repo.upsert_pools(session, seen, engines=engines)
    layouts = repo.layout_ids(session, {h.bounds for rec in kept for name in HISTOGRAM_FIELDS
                                        if (h := getattr(rec, name)) is not None})
    starts = {t: ts(t) for t in {rec.bucket_start for rec in kept}}
    rows = [_row(rec, pool_ids[rec.pool], layouts, start=starts[rec.bucket_start], width=width, source=source, now=now)
            for rec in kept]
    result.rows = repo.upsert_buckets(session, rows)
    result.pools = len(seen)
    return result


CONFIG_LIMITS = {"drafter": 300, "vllm_version": 120}  # the pools table's columns


def pools_seen(records: list[BucketRecord], width: int) -> dict[PoolKey, PoolSeen]:
    """Per pool: its first bucket start, last bucket end and configuration per bucket (K from the
    per-position counters, drafter and vLLM version from the labels; a value longer than its column is
    left out, with a warning)."""
    by_pool: dict[PoolKey, list[BucketRecord]] = {}
    for rec in records:
        by_pool.setdefault(rec.pool, []).append(rec)
    out = {}
    for pool, recs in by_pool.items():
        recs.sort(key=lambda r: r.bucket_start)
        config = []
        for r in recs:
            labels = {}
            for name, limit in CONFIG_LIMITS.items():
                value = getattr(r, name)
                if value is not None and len(value) > limit:
                    log.warning("%s label of %s/%s/%s longer than %d characters: not stored", name, *pool, limit)
                    value = None
                labels[name] = value or None
            if r.k is not None or any(labels.values()):
                config.append(ConfigSeen(ts(r.bucket_start), r.k, **labels))
        out[pool] = PoolSeen(ts(recs[0].bucket_start), ts(recs[-1].bucket_start + width), width, tuple(config))
    return out


def _refuse_bad_labels(records: list[BucketRecord], rejections: list[dict], *, source: str,
                       now: datetime) -> list[BucketRecord]:
    """Drop the records of pools whose labels the schema cannot hold: one rejection row per such pool
    (at its first bucket of the batch, so a re-run adds nothing); every other pool is written as usual."""
    first: dict[PoolKey, tuple[int, Violation]] = {}
    out = []
    for rec in records:
        bad = label_violation(rec.pool)
        if bad is None:
            out.append(rec)
        elif rec.pool not in first or rec.bucket_start < first[rec.pool][0]:
            first[rec.pool] = (rec.bucket_start, bad)
    for pool, (start, bad) in first.items():
        log.warning("refused pool %.80r: %s", pool.model_name, bad.detail)
        rejections.append(rejection_row(pool, start, bad.rule, bad.detail, source=source, now=now))
    return out


def _refuse_new_pools_past(max_pools: int, session: Session, records: list[BucketRecord], rejections: list[dict],
                           *, source: str, now: datetime) -> list[BucketRecord]:
    first: dict[PoolKey, int] = {}
    for rec in records:
        first[rec.pool] = min(first.get(rec.pool, rec.bucket_start), rec.bucket_start)
    stored, total = repo.stored_pools(session, list(first))
    room = max(0, max_pools - total)
    new = sorted(k for k in first if k not in stored)  # admitted in a stable order while there is room
    refused = set(new[room:])
    if not refused:
        return records
    log.warning("pool limit %d reached: %d new pools refused (e.g. %.80r)", max_pools, len(refused),
                min(refused).model_name)
    # a row per refused pool, up to MAX_LIMIT_ROWS a batch (a flood of new labels must not flood this table)
    for pool in sorted(refused)[:MAX_LIMIT_ROWS]:
        rejections.append(rejection_row(pool, first[pool], "pool_limit", f"the limit of {max_pools} pools "
                                        f"(SPECWATCH_MAX_POOLS) is reached: new pool refused ({len(refused)} "
                                        "refused in this batch)", source=source, now=now))
    return [rec for rec in records if rec.pool not in refused]


def _row(rec: BucketRecord, pool_id: int, layouts: dict, *, start: datetime, width: int, source: str,
         now: datetime) -> dict:
    row = {
        "pool_id": pool_id, "bucket_start": start, "bucket_seconds": width,
        "drafts": rec.drafts, "draft_tokens": rec.draft_tokens, "accepted_tokens": rec.accepted_tokens,
        "accepted_per_pos": rec.accepted_per_pos, "generation_tokens": rec.generation_tokens,
        "prompt_tokens": rec.prompt_tokens, "finished_requests": rec.finished_requests,
        "preemptions": rec.preemptions, "running_mean": rec.running_mean, "restarts": rec.restarts,
        "est_weight_tokens": rec.est_weight_tokens, "est_verify_steps": rec.est_verify_steps,
        "est_accepted_tokens": rec.est_accepted_tokens, "est_draft_tokens": rec.est_draft_tokens,
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
