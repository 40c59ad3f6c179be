"""The pre-columnar `backend.scrape.assemble.assemble`, kept as a reference to check the columnar one against
(tests/scrape/test_assemble_columnar.py).

A scrape here holds its samples as lists, `RefScrape(target, ts, samples, created)`; every series is
grouped in Python, sample by sample, and goes through domain.buckets (no fast path). Copied from the
implementation before the columnar rewrite, trimmed to assembling; it splits intervals straddling a bucket
boundary as the columnar code does, through domain.buckets (sample by sample). One addition: `by_target=True` sums
the series in the order the columnar code does (per target, targets and each target's series in order of
first appearance) instead of in global order of first appearance; float sums are then comparable
bit for bit even where the two orders differ (a pool spread over several targets whose series appear at
different times). A counter series that first appears on a target that ran on since its previous scrape
starts from 0 (domain.buckets.ran_on / appeared_from), as in the columnar code."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from backend.domain.buckets import RawSample, appeared_from, bucket_increases, bucket_means, ran_on
from backend.domain.records import BucketRecord, PoolKey, histogram, set_buckets, set_per_position
from backend.scrape.assemble import REPLICA_FIELDS, RESTART_SERIES, RESTART_SERIES_ALL, PoolNaming, ReplicaOf
from backend.scrape.parse import SAMPLE_FAMILY, WANTED


@dataclass(frozen=True)
class RefScrape:
    target: str
    ts: float
    samples: list  # [name, labels, value]
    created: list  # [base, labels, value]


def _labels_key(labels: dict[str, str], drop: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if k not in drop))


def _series(scrapes: Iterable[RefScrape]) -> dict[tuple, list[RawSample]]:
    """Per series (target, name, labels): its samples in time order, with the series' _created value."""
    out: dict[tuple, list[RawSample]] = defaultdict(list)
    for sc in sorted(scrapes, key=lambda s: s.ts):
        created = {(base, _labels_key(lbl)): v for base, lbl, v in sc.created}
        for name, labels, value in sc.samples:
            base = WANTED[name]
            c = created.get((base, _labels_key(labels, drop=("le",))))
            out[(sc.target, name, _labels_key(labels))].append(RawSample(sc.ts, value, c))
    return out


def _appeared(series: dict[tuple, list[RawSample]], scrapes: list[RefScrape], *, max_gap: float,
              dip_tolerance: float) -> dict[tuple, RawSample]:
    """Per counter series that first appears after its target's first scrape while the target ran on (every
    restart series of the target whose labels the series' include is in the scrape before and shows no
    restart, domain.buckets.ran_on): the zero it started from (domain.buckets.appeared_from)."""
    times: dict[str, list[float]] = defaultdict(list)
    for sc in scrapes:
        times[sc.target].append(sc.ts)
    by_ts = {key: {x.ts: x for x in samples} for key, samples in series.items() if key[1] in RESTART_SERIES_ALL}
    out = {}
    for (target, name, lkey), samples in series.items():
        if SAMPLE_FAMILY[name].kind in ("gauge", "estimate"):
            continue
        ts = times[target]
        i = ts.index(samples[0].ts)
        if i == 0:
            continue
        prev, cur = ts[i - 1], ts[i]
        restart = [at for (t, n, lk), at in by_ts.items() if t == target and set(lk) <= set(lkey)]
        if restart and all(prev in at and cur in at and ran_on(at[prev], at[cur], max_gap=max_gap,
                                                                  dip_tolerance=dip_tolerance) for at in restart):
            zero = appeared_from(samples[0], prev)
            if zero is not None:
                out[(target, name, lkey)] = zero
    return out


def assemble(scrapes: Iterable[RefScrape], *, target_labels: dict[str, dict[str, str]], width: int,
             first_bucket: int, last_bucket: int, max_gap: float, naming: PoolNaming,
             dip_tolerance: float = 0.0, split_within: float | None = None, replica_of: ReplicaOf | None = None,
             by_target: bool = False) -> dict[tuple, BucketRecord]:
    """Per pool and bucket, the exact increases of every family (see backend.scrape.assemble.assemble)."""
    records: dict[tuple, BucketRecord] = {}
    grouped: dict[tuple, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    engine = None  # the family's engine of the series being read

    def rec(key, b: int) -> BucketRecord:
        r = records.get((key, b))
        if r is None:
            r = records[(key, b)] = BucketRecord(pool=key[0] if replica_of else key, bucket_start=b)
        r.engine = r.engine or engine  # the engine of the record's series (every one here is vLLM's)
        return r

    scrapes = sorted(scrapes, key=lambda s: s.ts)
    by_series = _series(scrapes)
    zeros = _appeared(by_series, scrapes, max_gap=max_gap, dip_tolerance=dip_tolerance)
    series = [(key, [zeros[key], *samples] if key in zeros else samples) for key, samples in by_series.items()]
    if by_target:
        rank: dict[str, int] = {}
        for sc in scrapes:
            rank.setdefault(sc.target, len(rank))
        series.sort(key=lambda kv: rank[kv[0][0]])  # stable: each target's series keep their order

    for (target, name, lkey), samples in series:
        labels = dict(lkey)
        tl = target_labels.get(target, {})
        fam = SAMPLE_FAMILY[name]
        engine = fam.engine
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
                               last_bucket=last_bucket, dip_tolerance=dip_tolerance, split_within=split_within)
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
