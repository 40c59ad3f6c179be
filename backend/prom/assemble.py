"""Turn range-query answers into per-pool, per-bucket records (Prometheus JSON stays in backend.prom)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from backend.domain.buckets import Increases, RawSample, appeared_from, bucket_increases, ran_on

# Each increment goes whole to the bucket of its later sample (split_within=0: never split between two
# buckets). Direct scrape splits an interval that straddles a minute in proportion to time, reading its
# samples a settle period ahead; a chunk of Prometheus samples ends at its last bucket's end, so a split
# part would fall into a bucket a previous chunk already stored. Sums over any run of buckets are exact
# either way; single minutes on this path carry up to one scrape interval's counts of the next minute.
WHOLE_TO_LATER = 0.0
from backend.domain.engines import ENGINE_NAMES
from backend.domain.engines.estimate import EstimateParts, bucket_estimates, mean
from backend.domain.families import ALL_FAMILIES, CURRENT_SAMPLE, RESTART_SERIES_ALL
from backend.domain.quality import DIPS_REFUSED, SPEC_FIELDS
from backend.domain.records import BucketRecord, PoolKey, ReplicaKey, histogram, set_buckets, set_per_position
from backend.prom.client import SeriesPoints
from backend.prom.queries import DIP_LABEL, Query, RawQuery, created_of, dip_counters


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
    engine = None  # the engine of the answer being read

    def record(key, start: int) -> BucketRecord:
        rec = records.get((key, start))
        if rec is None:
            pool = key[0] if replica_labels else key
            rec = records[(key, start)] = BucketRecord(pool=pool, bucket_start=start)
        if rec.engine is None:
            rec.engine = engine
        return rec

    for query, series in answers:
        engine = query.engine
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
    fields = {metric: field for metric, (_, field) in dip_counters(ENGINE_NAMES).items()}
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


# --- raw samples -------------------------------------------------------------------------------------------

_HIST = {f.field for f in ALL_FAMILIES if f.kind == "histogram"}


@dataclass(frozen=True)
class SeriesIncreases:
    """One counter series' exact increases per bucket (domain.buckets), and where they go."""

    query: RawQuery
    name: str  # the series' metric name
    labels: dict[str, str]
    inc: Increases


def _labels_key(labels: dict[str, str], drop: tuple[str, ...] = ()) -> tuple:
    return tuple(sorted((k, v) for k, v in labels.items() if k != "__name__" and k not in drop))


def _steady_increases(points: list[tuple[float, float]], created: dict[float, float], *, width: int,
                      max_gap: float, first_bucket: int, last_bucket: int) -> Increases | None:
    """The increases of a series that never drops, keeps its `_created` and has no gap over max_gap (nearly
    every series): the differences of consecutive samples, each in the bucket of the later one, exactly what
    domain.buckets.bucket_increases gives for it. None for any other series."""
    by: dict[int, float] = {}
    gaps: dict[int, float] = {}
    if not points:
        return Increases(by, {}, {})
    pt, pv = points[0]
    pc = created.get(pt)
    for t, v in points[1:]:
        c = created.get(t)
        if v < pv or t - pt > max_gap or (c is not None and pc is not None and c != pc):
            return None
        b = math.ceil(t / width) * width - width  # bucket_start
        if first_bucket <= b <= last_bucket:
            by[b] = by.get(b, 0.0) + (v - pv)
            if t - pt > width:  # a gap closed by the samples on both sides
                gaps[b] = max(gaps.get(b, 0.0), t - pt)
        pt, pv, pc = t, v, c
    return Increases(by, {}, {}, gaps)


def series_increases(answers: Iterable[tuple[RawQuery, list[SeriesPoints]]], *, width: int, first_bucket: int,
                     last_bucket: int, max_gap: float, dip_tolerance: float = 0.0) -> list[SeriesIncreases]:
    """Per counter series, its increases in buckets first_bucket..last_bucket (starts) from its raw samples,
    exactly as the direct-scrape path computes them: the increment between two consecutive samples goes to
    the bucket holding the later one; a reset (a drop, or its `_created` value changed between the two
    samples) adds the new value and counts; a gap longer than `max_gap` adds nothing. The sample before a
    bucket may lie anywhere before it (up to max_gap): an outage of Prometheus or a missed target is closed
    by the samples on both sides, its whole increase in the bucket of the first sample after it. A series
    whose first sample follows its target's earlier samples, with no restart between (`_appeared`), counts
    its first value from 0: it was created after the scrape before."""
    answers = list(answers)
    created: dict[tuple, dict[float, float]] = {}
    for q, series in answers:
        if q.part == "created":
            for s in series:
                created[(s.labels.get("__name__", ""), _labels_key(s.labels))] = dict(s.points)
    restart = _restart_series(answers, created)
    out = []
    for q, series in answers:
        if q.part in ("created", "gauge"):  # `_created` values; an estimate's gauge (raw_estimates)
            continue
        current = {(s.labels.get("__name__", ""), _labels_key(s.labels)) for s in series
                   if s.labels.get("__name__", "") not in CURRENT_SAMPLE}
        for s in series:
            name = s.labels.get("__name__", "")
            if name in CURRENT_SAMPLE and (CURRENT_SAMPLE[name], _labels_key(s.labels)) in current:
                continue  # the same series under its current name counts instead
            at = created.get((created_of(name), _labels_key(s.labels, ("le",))), {})
            inc = _steady_increases(s.points, at, width=width, max_gap=max_gap, first_bucket=first_bucket,
                                    last_bucket=last_bucket)
            zero = _appeared(s, at, restart, max_gap=max_gap, dip_tolerance=dip_tolerance)
            if inc is None or zero is not None:  # a drop, a `_created` change, a long gap, a new series
                samples = [RawSample(t, v, at.get(t)) for t, v in s.points]
                if zero is not None:
                    samples.insert(0, zero)
                inc = bucket_increases(samples, width=width, max_gap=max_gap, first_bucket=first_bucket,
                                       last_bucket=last_bucket, dip_tolerance=dip_tolerance,
                                       split_within=WHOLE_TO_LATER)
            if inc.by_bucket:
                out.append(SeriesIncreases(q, CURRENT_SAMPLE.get(name, name), s.labels, inc))
    return out


def _restart_series(answers: list, created: dict[tuple, dict[float, float]]) -> list[tuple[set, dict[float, RawSample]]]:
    """Every restart series in the answers (each engine's output-token counter: RESTART_SERIES_ALL): its
    labels and its samples by time."""
    out = []
    for q, series in answers:
        if q.part != "value":
            continue
        for s in series:
            name = s.labels.get("__name__", "")
            if CURRENT_SAMPLE.get(name, name) in RESTART_SERIES_ALL:
                at = created.get((created_of(name), _labels_key(s.labels)), {})
                out.append((set(_labels_key(s.labels)), {t: RawSample(t, v, at.get(t)) for t, v in s.points}))
    return out


def _appeared(s: SeriesPoints, created: dict[float, float], restart: list[tuple[set, dict[float, RawSample]]], *,
              max_gap: float, dip_tolerance: float) -> RawSample | None:
    """The zero a counter series started from when its first raw sample follows, on the same target, samples
    of the target's restart series that show it ran on (domain.buckets.ran_on): every restart series whose
    labels the series' include (the same Prometheus target, model and engine labels) has a sample at the
    series' first instant (Prometheus stamps a scrape's samples with one time) and one before it, and no
    restart between them. Then the series appeared after the scrape before (llama-server's per-position
    counters, a labelled child created on its first increment): its first value is an increase from 0
    (domain.buckets.appeared_from). None otherwise: a series there since the window's start, a restart, a
    target without a restart series, a restart series that itself appears."""
    if not s.points or s.labels.get("__name__", "") in RESTART_SERIES_ALL:
        return None
    t1, v1 = s.points[0]
    labels = set(_labels_key(s.labels))
    mine = [at for lk, at in restart if lk <= labels]
    if not mine:
        return None
    prev_ts = None
    for at in mine:
        cur = at.get(t1)
        before = [t for t in at if t < t1]
        if cur is None or not before:
            return None
        prev = at[max(before)]
        if not ran_on(prev, cur, max_gap=max_gap, dip_tolerance=dip_tolerance):
            return None
        prev_ts = prev.ts if prev_ts is None else max(prev_ts, prev.ts)
    return appeared_from(RawSample(t1, v1, created.get(t1)), prev_ts)


def assemble_raw(increases: Iterable[SeriesIncreases], *, class_label: str, mode_label: str, default_class: str,
                 default_mode: str, first_bucket: int | None = None, last_bucket: int | None = None,
                 replica_labels: tuple[str, str] | None = None,
                 fields: tuple[str, ...] | None = None) -> dict[tuple, BucketRecord]:
    """Records keyed by (pool, bucket start) from per-series increases (or, with `replica_labels`, by
    ((pool, replica), bucket start)), for the buckets in [first_bucket, last_bucket] and the record `fields`
    (all by default). A field is the sum of its series' increases; a pool's restarts in a bucket are the
    resets of its RESTART_SERIES there (0 where that series has an increase), its dips per counter name
    (flagged, kept: a dip adds 0)."""
    records: dict[tuple, BucketRecord] = {}
    grouped: dict[tuple, dict[str, float]] = {}
    for si in increases:
        q = si.query
        if fields is not None and q.field not in fields:
            continue
        key = pool_key(si.labels, class_label=class_label, mode_label=mode_label, default_class=default_class,
                       default_mode=default_mode)
        if not key.model_name:
            continue
        if replica_labels:
            key = (key, ReplicaKey(si.labels.get(replica_labels[0], ""), si.labels.get(replica_labels[1], "")))
        for b, v in si.inc.by_bucket.items():
            if (first_bucket is not None and b < first_bucket) or (last_bucket is not None and b > last_bucket):
                continue
            rec = records.get((key, b))
            if rec is None:
                rec = records[(key, b)] = BucketRecord(pool=key[0] if replica_labels else key, bucket_start=b)
            if rec.engine is None:
                rec.engine = q.engine
            if q.group is not None:
                by = grouped.setdefault((key, b, q.field), {})
                label = si.labels.get(q.group, "")
                by[label] = by.get(label, 0.0) + v
            elif q.field in _HIST:
                hist = histogram(rec, q.field)
                setattr(hist, q.part, (getattr(hist, q.part) or 0.0) + v)
            else:
                setattr(rec, q.field, (getattr(rec, q.field) or 0.0) + v)
            if si.name in RESTART_SERIES_ALL and not replica_labels:
                rec.restarts = (rec.restarts or 0) + si.inc.resets.get(b, 0)
            if b in si.inc.dips:
                rec.dips[si.name] = rec.dips.get(si.name, 0) + si.inc.dips[b]
            if b in si.inc.gaps:
                rec.gap_seconds = max(rec.gap_seconds, si.inc.gaps[b])
    for (key, b, field), by_label in grouped.items():
        if field == "accepted_per_pos":
            set_per_position(records[(key, b)], by_label)
        else:
            set_buckets(records[(key, b)], field, by_label)
    return records


def raw_estimates(answers: list[tuple[RawQuery, list[SeriesPoints]]], *, width: int, first_bucket: int,
                  last_bucket: int, max_gap: float, class_label: str, mode_label: str, default_class: str,
                  default_mode: str) -> dict[tuple[PoolKey, int], EstimateParts]:
    """The estimate parts (backend.domain.engines.estimate) per (pool, bucket start) from the raw samples of
    an engine's generated-token counter and its estimate gauges (SGLang): per pool and Prometheus target
    (`instance`, `job`), at each scrape instant of the counter, the sum of its counter series and the mean of
    each gauge's series at that instant; each target's intervals weighted as the direct scrape does it."""
    naming = {"class_label": class_label, "mode_label": mode_label, "default_class": default_class,
              "default_mode": default_mode}
    engines = {q.engine for q, _series in answers if q.part == "gauge"}
    counters: dict[tuple, dict[float, float]] = {}
    gauges: dict[tuple, dict[str, dict[float, list[float]]]] = {}
    for q, series in answers:
        gauge = q.part == "gauge"
        if not gauge and not (q.field == "generation_tokens" and q.engine in engines and q.part == "value"):
            continue
        for s in series:
            key = pool_key(s.labels, **naming)
            if not key.model_name:
                continue
            group = (key, s.labels.get("instance", ""), s.labels.get("job", ""))
            for t, v in s.points:
                if gauge:
                    gauges.setdefault(group, {}).setdefault(q.field, {}).setdefault(t, []).append(v)
                else:
                    at = counters.setdefault(group, {})
                    at[t] = at.get(t, 0.0) + v
    out: dict[tuple[PoolKey, int], EstimateParts] = {}
    for group, at in counters.items():
        by = gauges.get(group)
        if not by or "spec_accept_length" not in by:
            continue
        points = [(t, c, mean(by["spec_accept_length"].get(t, ())), mean(by.get("spec_accept_rate", {}).get(t, ())))
                  for t, c in at.items()]
        for b, parts in bucket_estimates(points, width=width, max_gap=max_gap, first_bucket=first_bucket,
                                         last_bucket=last_bucket).items():
            out.setdefault((group[0], b), EstimateParts()).add(parts)
    return out


def config_labels(series: Iterable[SeriesPoints], *, width: int, names: tuple[str, str], class_label: str,
                  mode_label: str, default_class: str,
                  default_mode: str) -> dict[tuple[PoolKey, int], tuple[str | None, str | None]]:
    """(pool, bucket start) -> (drafter, vLLM version) from config_query's answer: at each bucket end, the
    label pair with the latest sample; pools whose series carry neither label are left out."""
    best: dict[tuple[PoolKey, int], tuple[float, tuple[str, str], tuple[str | None, str | None]]] = {}
    for s in series:
        value = tuple(s.labels.get(n) or None for n in names)
        if not any(value):
            continue
        key = pool_key(s.labels, class_label=class_label, mode_label=mode_label, default_class=default_class,
                       default_mode=default_mode)
        if not key.model_name:
            continue
        for t, v in s.points:
            if not math.isfinite(v):
                continue
            k = (key, round(t) - width)
            rank = (v, tuple(x or "" for x in value))
            if k not in best or rank > best[k][:2]:
                best[k] = (*rank, value)
    return {k: r[2] for k, r in best.items()}
