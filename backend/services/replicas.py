"""Replicas of a pool: write the coarse per-replica buckets (both sources), read a window per replica.

Writes run in the chunk's transaction, after the pool rows (so the pools exist); a coarse bucket is written
only by the chunk in which it completes, from all its collection buckets, so a re-run rewrites identical
rows. Reads sum the coarse rows, then divide (alpha = A / D, tau = 1 + A / drafts), and take P99 from the
summed TPOT / ITL buckets."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from backend.db import replica_repo
from backend.db import repositories as repo
from backend.db.models import Pool
from backend.domain import acceptance as acc
from backend.domain.histogram import histogram_quantile
from backend.domain.records import BucketRecord, ReplicaKey, known_add
from backend.domain.replicas import REPLICA_HISTOGRAMS, ReplicaVolume, aligned, coarsen, is_empty
from backend.services.ingest import rejection_row, ts

log = logging.getLogger("specwatch.replicas")


def write_replicas(session: Session, fine: Iterable[tuple[ReplicaKey, BucketRecord]], *, grain: int,
                   ends: Sequence[int], source: str, now: datetime,
                   labels: dict[ReplicaKey, dict[str, str]] | None = None) -> int:
    """Validate, coarsen and store the replica buckets ending at `ends`; returns the rows written.
    Refusals are rejection rows of the pool (rule `replica_<rule>`, the replica named in the detail)."""
    if not ends or grain <= 0:
        return 0
    coarse = coarsen(fine, grain=grain, ends=set(ends))
    rejections = []
    for r in coarse:
        for v in r.violations:
            name = f"{r.replica.instance}/{r.replica.engine}" if r.replica.engine else r.replica.instance
            log.warning("replica %s of %s/%s/%s bucket %s: %s %s", name, *r.record.pool, ts(r.record.bucket_start),
                        v.rule, v.detail)
            rejections.append(rejection_row(r.record.pool, r.record.bucket_start, f"replica_{v.rule}"[:60],
                                            f"replica {name}: {v.detail}", source=source, now=now))
    repo.record_rejections(session, rejections)
    pools = replica_repo.pool_ids(session, sorted({r.record.pool for r in coarse}))
    # a refused pool (labels, pool limit) has no replicas; a record all refused has no row
    kept = [r for r in coarse if r.record.pool in pools and not is_empty(r.record)]
    if not kept:
        return 0
    seen: dict[tuple[int, str, str], list] = {}
    for r in kept:
        key = (pools[r.record.pool], r.replica.instance[:300], r.replica.engine[:60])
        start, end = ts(r.record.bucket_start), ts(r.record.bucket_start + grain)
        span = seen.setdefault(key, [start, end, dict((labels or {}).get(r.replica, {}))])
        span[0], span[1] = min(span[0], start), max(span[1], end)
    ids = replica_repo.upsert_replicas(session, {k: (f, last, lab) for k, (f, last, lab) in seen.items()})
    layouts = repo.layout_ids(session, {h.bounds for r in kept for n in REPLICA_HISTOGRAMS
                                        if (h := getattr(r.record, n)) is not None})
    rows = []
    for r in kept:
        rec = r.record
        row = {"replica_id": ids[(pools[rec.pool], r.replica.instance[:300], r.replica.engine[:60])],
               "bucket_start": ts(rec.bucket_start), "bucket_seconds": grain, "drafts": rec.drafts,
               "draft_tokens": rec.draft_tokens, "accepted_tokens": rec.accepted_tokens,
               "accepted_per_pos": rec.accepted_per_pos}
        for n in REPLICA_HISTOGRAMS:
            h = getattr(rec, n)
            row[f"{n}_layout_id"] = layouts[h.bounds] if h is not None else None
            row[f"{n}_buckets"] = list(h.counts) if h is not None else None
            row[f"{n}_sum"] = h.sum if h is not None else None
            row[f"{n}_count"] = h.count if h is not None else None
        rows.append(row)
    return replica_repo.upsert_buckets(session, rows)


# --- reads ---------------------------------------------------------------------------------------------


@dataclass
class ReplicaTotals:
    """One replica's sums over a window (None: not reported)."""

    replica_id: int
    pool_id: int
    instance: str
    engine: str
    labels: dict
    last_seen: datetime
    buckets: int = 0
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    per_pos: list[float] | None = None
    hists: dict[str, dict[tuple[float, ...], list[float]]] = field(default_factory=dict)  # name -> layout -> counts
    by_bucket: dict[datetime, ReplicaVolume] = field(default_factory=dict)  # coarse bucket start -> its sums

    @property
    def volume(self) -> ReplicaVolume:
        return ReplicaVolume(self.drafts, self.draft_tokens, self.accepted_tokens)

    def p99(self, name: str) -> float | None:
        by_layout = self.hists.get(name) or {}
        if len(by_layout) != 1:  # none, or a layout change inside the window: not one histogram
            return None
        (bounds, counts), = by_layout.items()
        return histogram_quantile(0.99, list(zip((*bounds, math.inf), counts, strict=True))).value


def window_totals(session: Session, pools: Sequence[Pool], *, since: datetime, until: datetime
                  ) -> dict[int, list[ReplicaTotals]]:
    """{pool id: [its replicas' sums over the coarse buckets inside (since, until]]} (replicas seen in it)."""
    replicas = replica_repo.replicas_of(session, [p.id for p in pools])
    out: dict[int, ReplicaTotals] = {r.id: ReplicaTotals(r.id, r.pool_id, r.instance, r.engine, dict(r.labels or {}),
                                                         r.last_seen) for r in replicas}
    rows = replica_repo.buckets(session, list(out), since=since, until=until)
    layout_ids = {lid for b in rows for lid in (b.tpot_layout_id, b.itl_layout_id) if lid is not None}
    layouts = replica_repo.layouts(session, layout_ids)
    for b in rows:
        t = out[b.replica_id]
        t.buckets += 1
        t.by_bucket[b.bucket_start] = ReplicaVolume(b.drafts, b.draft_tokens, b.accepted_tokens)
        t.drafts, t.draft_tokens = known_add(t.drafts, b.drafts), known_add(t.draft_tokens, b.draft_tokens)
        t.accepted_tokens = known_add(t.accepted_tokens, b.accepted_tokens)
        if b.accepted_per_pos is not None:
            pp = list(b.accepted_per_pos)
            if t.per_pos is None or len(t.per_pos) != len(pp):
                t.per_pos = pp if t.per_pos is None or len(pp) > len(t.per_pos) else t.per_pos
            else:
                t.per_pos = [x + y for x, y in zip(t.per_pos, pp, strict=True)]
        for name in REPLICA_HISTOGRAMS:
            counts = getattr(b, f"{name}_buckets")
            lid = getattr(b, f"{name}_layout_id")
            if counts is None or lid is None:
                continue
            slot = t.hists.setdefault(name, {})
            bounds = layouts[lid]
            prev = slot.get(bounds)
            slot[bounds] = list(counts) if prev is None else [x + y for x, y in zip(prev, counts, strict=True)]
    by_pool: dict[int, list[ReplicaTotals]] = {}
    for t in out.values():
        if t.buckets:
            by_pool.setdefault(t.pool_id, []).append(t)
    return by_pool


def newest_end(pools: Sequence[Pool], session: Session) -> datetime | None:
    seen = [r.last_seen for r in replica_repo.replicas_of(session, [p.id for p in pools])]
    return max(seen) if seen else None


def model_replicas(session: Session, model: str, *, window: float, now: datetime) -> dict | None:
    """The replica table of a model: per pool, per replica alpha, tau, drafts, TPOT/ITL P99, last seen.
    None for an unknown model. The window ends at the newest replica bucket (at most `now`)."""
    pools = replica_repo.model_pools(session, model)
    if not pools:
        return None
    end = newest_end(pools, session)
    end = min(end, now) if end is not None else None
    out = {"model": model, "window_seconds": window, "window_start": None, "window_end": end, "pools": []}
    if end is None:
        return out
    start = end - timedelta(seconds=window)
    out["window_start"] = start
    totals = window_totals(session, pools, since=start, until=end)
    for p in pools:
        reps = sorted(totals.get(p.id, []), key=lambda t: (t.instance, t.engine))
        pool_sum = ReplicaVolume()
        for t in reps:
            pool_sum = pool_sum + t.volume
        out["pools"].append({
            "traffic_class": p.traffic_class, "spec_mode": p.spec_mode, "num_spec_tokens": p.num_spec_tokens,
            "acceptance_rate": pool_sum.alpha, "drafts": pool_sum.drafts,
            "replicas": [_replica_row(t, reps) for t in reps]})
    return out


def _replica_row(t: ReplicaTotals, reps: list[ReplicaTotals]) -> dict:
    # the other replicas' pooled alpha over the buckets this replica reports too: the outlier rule's figure
    _mine, others = aligned({o.replica_id: o.by_bucket for o in reps}, t.replica_id)
    alpha = acc.acceptance_rate(t.accepted_tokens, t.draft_tokens)
    return {"instance": t.instance, "engine": t.engine, "labels": t.labels, "buckets": t.buckets,
            "drafts": t.drafts, "draft_tokens": t.draft_tokens, "accepted_tokens": t.accepted_tokens,
            "acceptance_rate": alpha, "mean_acceptance_length": acc.mean_acceptance_length(t.accepted_tokens, t.drafts),
            "others_acceptance_rate": others.alpha if len(reps) > 1 else None,
            "tpot_p99": t.p99("tpot"), "itl_p99": t.p99("itl"), "last_seen": t.last_seen}


def prune(session: Session, *, now: datetime, retention_days: float) -> int:
    return replica_repo.prune(session, before=now - timedelta(days=retention_days))
