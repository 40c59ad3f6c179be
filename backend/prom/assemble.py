"""Turn range-query answers into per-pool, per-bucket records (Prometheus JSON stays in backend.prom)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from backend.domain.quality import DIPS_REFUSED, SPEC_FIELDS
from backend.domain.records import BucketRecord, PoolKey, histogram, set_buckets, set_per_position
from backend.prom.client import SeriesPoints
from backend.prom.queries import DIP_LABEL, Query, dip_counters


def pool_key(labels: dict[str, str], *, class_label: str, mode_label: str, default_class: str,
             default_mode: str) -> PoolKey:
    return PoolKey(labels.get("model_name", ""), labels.get(class_label) or default_class,
                   labels.get(mode_label) or default_mode)


def assemble(answers: Iterable[tuple[Query, list[SeriesPoints]]], *, width: int, class_label: str,
             mode_label: str, default_class: str, default_mode: str) -> dict[tuple[PoolKey, int], BucketRecord]:
    """Records keyed by (pool, bucket start). A value at evaluation time t is the bucket (t - width, t]."""
    records: dict[tuple[PoolKey, int], BucketRecord] = {}
    grouped: dict[tuple[PoolKey, int, str, str], dict[str, float]] = {}

    def record(key: PoolKey, start: int) -> BucketRecord:
        rec = records.get((key, start))
        if rec is None:
            rec = records[(key, start)] = BucketRecord(pool=key, bucket_start=start)
        return rec

    for query, series in answers:
        for s in series:
            key = pool_key(s.labels, class_label=class_label, mode_label=mode_label,
                           default_class=default_class, default_mode=default_mode)
            if not key.model_name:
                continue
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
