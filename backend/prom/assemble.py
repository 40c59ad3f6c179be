"""Turn range-query answers into per-pool, per-bucket records (Prometheus JSON stays in backend.prom)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from backend.domain.quality import DIPS_REFUSED, SPEC_FIELDS
from backend.domain.records import BucketRecord, PoolKey, ReplicaKey, histogram, set_buckets, set_per_position
from backend.prom.client import SeriesPoints
from backend.prom.queries import DIP_LABEL, Query, dip_counters


def pool_key(labels: dict[str, str], *, class_label: str, mode_label: str, default_class: str,
             default_mode: str) -> PoolKey:
    return PoolKey(labels.get("model_name", ""), labels.get(class_label) or default_class,
                   labels.get(mode_label) or default_mode)


def assemble(answers: Iterable[tuple[Query, list[SeriesPoints]]], *, width: int, class_label: str,
             mode_label: str, default_class: str, default_mode: str,
             replica_labels: tuple[str, str] | None = None) -> dict[tuple, BucketRecord]:
    """Records keyed by (pool, bucket start). A value at evaluation time t is the bucket (t - width, t].
    With `replica_labels` (instance label, engine label): keyed by ((pool, replica), bucket start), one
    record per replica (see replica_records)."""
    records: dict[tuple, BucketRecord] = {}
    grouped: dict[tuple, dict[str, float]] = {}

    def record(key, start: int) -> BucketRecord:
        rec = records.get((key, start))
        if rec is None:
            pool = key[0] if replica_labels else key
            rec = records[(key, start)] = BucketRecord(pool=pool, bucket_start=start)
        return rec

    for query, series in answers:
        for s in series:
            key = pool_key(s.labels, class_label=class_label, mode_label=mode_label,
                           default_class=default_class, default_mode=default_mode)
            if not key.model_name:
                continue
            if replica_labels:
                key = (key, ReplicaKey(s.labels.get(replica_labels[0], ""), s.labels.get(replica_labels[1], "")))
            for t, v in s.points:
                start = round(t) - width
                if query.field == "dips":
                    if math.isfinite(v) and v >= 1:
                        record(key, start).dips[s.labels.get(DIP_LABEL, "")] = int(v)
                elif query.group is None:
                    rec = record(key, start)
                    if query.field == "restarts":
                        rec.restarts = int(v) if math.isfinite(v) else None
                    elif query.part == "value":
                        setattr(rec, query.field, v)
                    else:
                        hist = histogram(rec, query.field)
                        setattr(hist, query.part, v)
                else:
                    record(key, start)
                    grouped.setdefault((key, start, query.field, query.part), {})[s.labels.get(query.group, "")] = v

    for (key, start, field, _part), by_label in grouped.items():
        if field == "accepted_per_pos":
            set_per_position(records[(key, start)], by_label)
        else:
            set_buckets(records[(key, start)], field, by_label)
    fields = {metric: field for metric, (_, field) in dip_counters().items()}
    for rec in records.values():
        if rec.dips:  # increase() added the whole counter for each dip: those increases are wrong
            for name in refused_fields(rec.dips, fields):
                setattr(rec, name, None)
            rec.flags.append(DIPS_REFUSED)
    return {k: r for k, r in records.items() if not r.is_empty() or r.restarts or r.dips}



def refused_fields(dips: dict[str, int], fields: dict[str, str]) -> list[str]:
    """The record fields a bucket's dips make unusable: each dipped counter's own, and all the spec-decode
    counters together when one of them dipped (their ratios are only meaningful together)."""
    out: list[str] = []
    for metric in dips:
        field = fields.get(metric)
        for name in (SPEC_FIELDS if field in SPEC_FIELDS else (field,) if field else ()):
            if name not in out:
                out.append(name)
    return out


def replica_records(records: dict[tuple, BucketRecord]) -> list[tuple[ReplicaKey, BucketRecord]]:
    """(replica, record) pairs of an assemble(..., replica_labels=...) answer."""
    return [(key[1], rec) for (key, _start), rec in records.items()]
