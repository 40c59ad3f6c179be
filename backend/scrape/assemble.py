"""Raw scrapes of vLLM targets -> exact per-pool, per-bucket increases (the direct-scrape source)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from backend.domain.buckets import Increases, RawSample, bucket_increases, bucket_means, bucket_start
from backend.domain.records import BucketRecord, PoolKey, ReplicaKey, histogram, set_buckets, set_per_position
from backend.scrape.layout import LAYOUTS, LabelsKey, Layout, LayoutCache, shape_json, values_of
from backend.scrape.parse import SAMPLE_FAMILY, ExpositionError, ParsedScrape

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


@dataclass(frozen=True, eq=False)
class Scrape:
    """One target's stored scrape: its layout and the values in the layout's order (float64 arrays)."""

    target: str
    ts: float
    layout: Layout
    values: np.ndarray
    created: np.ndarray

    @classmethod
    def of(cls, target: str, ts: float, parsed: ParsedScrape, layouts: LayoutCache = LAYOUTS) -> Scrape:
        values, created = values_of(parsed)
        layout = layouts.of(shape_json(parsed))
        if layout.duplicate:
            raise ExpositionError(f"series {layout.duplicate} appears twice in one exposition")
        return cls(target, ts, layout, np.frombuffer(values, "<f8"), np.frombuffer(created, "<f8"))


@dataclass(frozen=True)
class PoolNaming:
    class_label: str
    mode_label: str
    default_class: str
    default_mode: str


@dataclass
class _Columns:
    """One target's scrapes in a window as a matrix: rows in time order, a column per series (the union of
    its layouts' series, in order of first appearance)."""

    keys: list[tuple[str, LabelsKey]]
    ts: list[float]
    values: np.ndarray  # rows x series, NaN where a scrape lacks the series
    present: np.ndarray  # rows x series
    created: np.ndarray  # rows x series, the series' _created value (NaN where it has none)
    has_created: np.ndarray  # rows x series


def _columns(rows: list[Scrape]) -> _Columns:
    layouts: dict[int, tuple[Layout, np.ndarray]] = {}  # id(layout) -> (layout, its columns)
    keys: dict[tuple[str, LabelsKey], int] = {}
    for sc in rows:
        if id(sc.layout) not in layouts:
            lay = sc.layout
            cols = [keys.setdefault(k, len(keys)) for k in zip(lay.names, lay.labels, strict=True)]
            layouts[id(lay)] = (lay, np.array(cols, dtype=np.intp))
    n, m = len(rows), len(keys)
    if len(layouts) == 1 and rows[0].layout.size == m:  # the usual case: one shape in the whole window
        lay = rows[0].layout
        values = np.vstack([sc.values for sc in rows]) if n else np.empty((0, m))
        present = np.ones((n, m), dtype=bool)
        idx = lay.created_index
        has = np.broadcast_to(idx >= 0, (n, m))
        created = np.full((n, m), np.nan)
        if lay.n_created and (idx >= 0).any():
            created[:, idx >= 0] = np.vstack([sc.created for sc in rows])[:, idx[idx >= 0]]
        return _Columns(list(keys), [sc.ts for sc in rows], values, present, created, np.array(has))
    values, created = np.full((n, m), np.nan), np.full((n, m), np.nan)
    present, has = np.zeros((n, m), dtype=bool), np.zeros((n, m), dtype=bool)
    for k, sc in enumerate(rows):
        lay, cols = layouts[id(sc.layout)]
        values[k, cols] = sc.values
        present[k, cols] = True
        with_c = lay.created_index >= 0
        created[k, cols[with_c]] = sc.created[lay.created_index[with_c]]
        has[k, cols[with_c]] = True
    return _Columns(list(keys), [sc.ts for sc in rows], values, present, created, has)


def _increases(c: _Columns, kinds: list[str], *, width: int, first_bucket: int, last_bucket: int,
               max_gap: float, dip_tolerance: float) -> list:
    """Per column, its Increases (counters, histograms) or bucket means (gauges), as
    domain.buckets.bucket_increases / bucket_means would give from the column's samples.

    Columns present in every row, with steady `_created` and no drop between consecutive samples (nearly
    all of them) are done together: the increment of a pair is the difference, summed per bucket in time
    order. The others (a drop, a restart, a series that comes or goes, gauges) go sample by sample."""
    n, m = c.values.shape
    out: list = [None] * m
    starts = [bucket_start(t, width) for t in c.ts]
    pairs = [k for k in range(1, n) if c.ts[k] - c.ts[k - 1] <= max_gap]  # the others yield no increment
    if n > 1 and pairs:
        rows = np.array(pairs)
        diff = c.values[rows] - c.values[rows - 1]
        changed = (c.has_created[rows] & c.has_created[rows - 1]
                   & (c.created[rows] != c.created[rows - 1])).any(axis=0)
        fast = c.present.all(axis=0) & (diff >= 0).all(axis=0) & ~changed
    else:
        diff = np.empty((0, m))
        fast = c.present.all(axis=0)
    fast &= np.array([k != "gauge" for k in kinds], dtype=bool) if m else fast
    by_bucket: dict[int, np.ndarray] = {}
    for i, k in enumerate(pairs):
        b = starts[k]
        if first_bucket <= b <= last_bucket:
            acc = by_bucket.get(b)
            by_bucket[b] = diff[i].copy() if acc is None else acc + diff[i]
    sums = {b: acc.tolist() for b, acc in by_bucket.items()}
    for j in np.flatnonzero(fast).tolist():
        out[j] = Increases({b: v[j] for b, v in sums.items()}, {}, {})
    for j in np.flatnonzero(~fast).tolist():
        samples = [RawSample(c.ts[k], float(c.values[k, j]), float(c.created[k, j]) if c.has_created[k, j] else None)
                   for k in range(n) if c.present[k, j]]
        if kinds[j] == "gauge":
            out[j] = bucket_means(samples, width=width, first_bucket=first_bucket, last_bucket=last_bucket)
        else:
            out[j] = bucket_increases(samples, width=width, max_gap=max_gap, first_bucket=first_bucket,
                                      last_bucket=last_bucket, dip_tolerance=dip_tolerance)
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

    def _add_series(target: str, name: str, labels: dict, tl: dict, fam, res) -> None:
        key = PoolKey(labels["model_name"],
                      tl.get(naming.class_label) or labels.get(naming.class_label) or naming.default_class,
                      tl.get(naming.mode_label) or labels.get(naming.mode_label) or naming.default_mode)
        if replica_of is not None:
            key = (key, replica_of(target, labels, tl))
        if fam.kind == "gauge":
            for b, mean in res.items():
                r = rec(key, b)
                r.running_mean = (r.running_mean or 0.0) + mean
            return
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

    by_target: dict[str, list[Scrape]] = {}
    for sc in sorted(scrapes, key=lambda s: s.ts):
        by_target.setdefault(sc.target, []).append(sc)
    for target, rows in by_target.items():
        tl = target_labels.get(target, {})
        cols = _columns(rows)
        families = [SAMPLE_FAMILY[name] for name, _lkey in cols.keys]
        incs = _increases(cols, [f.kind for f in families], width=width, first_bucket=first_bucket,
                          last_bucket=last_bucket, max_gap=max_gap, dip_tolerance=dip_tolerance)
        for (name, lkey), fam, res in zip(cols.keys, families, incs, strict=True):
            if replica_of is not None and fam.field not in REPLICA_FIELDS:
                continue
            _add_series(target, name, dict(lkey), tl, fam, res)

    for (key, b, field, kind), by_label in grouped.items():
        if kind == "pos":
            set_per_position(records[(key, b)], by_label)
        else:
            set_buckets(records[(key, b)], field, by_label)
    return records

