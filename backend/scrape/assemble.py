"""Raw scrapes of vLLM targets -> exact per-pool, per-bucket increases (the direct-scrape source)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from backend.domain.buckets import RawSample, bucket_increases, bucket_means
from backend.domain.records import BucketRecord, PoolKey, ReplicaKey, histogram, set_buckets, set_per_position
from backend.scrape.parse import SAMPLE_FAMILY, WANTED

RESTART_SERIES = "vllm:generation_tokens_total"
REPLICA_FIELDS = ("drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos", "itl", "tpot")
ReplicaOf = Callable[[str, dict, dict], ReplicaKey]


def replica_of_target(name: Callable[[str], str]) -> ReplicaOf:
    """A scrape target is a replica: the series' `instance` label, else the target's, else the target's
    (redacted) URL; and vLLM's `engine` label (data-parallel engines behind one target)."""
    def of(target: str, labels: dict, target_labels: dict) -> ReplicaKey:
        return ReplicaKey(labels.get("instance") or target_labels.get("instance") or name(target),
                          labels.get("engine", ""))
    return of


@dataclass(frozen=True)
class Scrape:
    target: str
    ts: float
    samples: list  # [name, labels, value]
    created: list  # [base, labels, value]


@dataclass(frozen=True)
class PoolNaming:
    class_label: str
    mode_label: str
    default_class: str
    default_mode: str


def _labels_key(labels: dict[str, str], drop: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k not in drop))


def _series(scrapes: Iterable[Scrape]) -> dict[tuple, list[RawSample]]:
    """Per series (target, name, labels): its samples in time order, with the series' _created value."""
    out: dict[tuple, list[RawSample]] = defaultdict(list)
    for sc in sorted(scrapes, key=lambda s: s.ts):
        created = {(base, _labels_key(lbl)): v for base, lbl, v in sc.created}
        for name, labels, value in sc.samples:
            base = WANTED[name]
            c = created.get((base, _labels_key(labels, drop=("le",))))
            out[(sc.target, name, _labels_key(labels))].append(RawSample(sc.ts, value, c))
    return out


def assemble(scrapes: Iterable[Scrape], *, target_labels: dict[str, dict[str, str]], width: int,
             first_bucket: int, last_bucket: int, max_gap: float, naming: PoolNaming,
             dip_tolerance: float = 0.0,
             replica_of: ReplicaOf | None = None) -> dict[tuple, BucketRecord]:
    """Per pool and bucket, the exact increases of every family. A counter drop smaller than
    `dip_tolerance` (a fraction of its value) without a `_created` change is a dip, not a reset
    (domain.buckets): it adds 0 and is counted in the record's `dips`.

    With `replica_of` (target, series labels, target labels) -> replica: per replica instead, keyed by
    ((pool, replica), bucket), and only the families replicas keep (spec decode, TPOT, ITL)."""
    records: dict[tuple, BucketRecord] = {}
    grouped: dict[tuple, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def rec(key, b: int) -> BucketRecord:
        r = records.get((key, b))
        if r is None:
            r = records[(key, b)] = BucketRecord(pool=key[0] if replica_of else key, bucket_start=b)
        return r

    for (target, name, lkey), samples in _series(scrapes).items():
        labels = dict(lkey)
        tl = target_labels.get(target, {})
        fam = SAMPLE_FAMILY[name]
        if replica_of is not None and fam.field not in REPLICA_FIELDS:
            continue
        key = PoolKey(labels["model_name"],
                      tl.get(naming.class_label) or labels.get(naming.class_label) or naming.default_class,
                      tl.get(naming.mode_label) or labels.get(naming.mode_label) or naming.default_mode)
        if replica_of is not None:
            key = (key, replica_of(target, labels, tl))
        if fam.kind == "gauge":
            for b, mean in bucket_means(samples, width=width, first_bucket=first_bucket,
                                        last_bucket=last_bucket).items():
                r = rec(key, b)
                r.running_mean = (r.running_mean or 0.0) + mean
            continue
        res = bucket_increases(samples, width=width, max_gap=max_gap, first_bucket=first_bucket,
                               last_bucket=last_bucket, dip_tolerance=dip_tolerance)
        for b, inc in res.by_bucket.items():
            r = rec(key, b)
            if name == RESTART_SERIES:
                r.restarts = (r.restarts or 0) + res.resets.get(b, 0)
            if b in res.dips:
                r.dips[name] = r.dips.get(name, 0) + res.dips[b]
            if fam.kind == "counter":
                setattr(r, fam.field, (getattr(r, fam.field) or 0.0) + inc)
            elif fam.kind == "per_pos":
                grouped[(key, b, fam.field, "pos")][labels.get("position", "")] += inc
            else:
                part = name[len(fam.metric) + 1:]  # bucket | sum | count
                if part == "bucket":
                    grouped[(key, b, fam.field, "le")][labels.get("le", "")] += inc
                else:
                    h = histogram(r, fam.field)
                    setattr(h, part, (getattr(h, part) or 0.0) + inc)

    for (key, b, field, kind), by_label in grouped.items():
        if kind == "pos":
            set_per_position(records[(key, b)], by_label)
        else:
            set_buckets(records[(key, b)], field, by_label)
    return records

