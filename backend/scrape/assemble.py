"""Raw scrapes of engine targets -> exact per-pool, per-bucket increases (the direct-scrape source).

Every engine (backend.domain.engines) goes the same way: its series' families say which record field each
fills. SGLang's spec-decode gauges (families of kind `estimate`) fill no exact field: each target's scrapes
give the estimate parts of backend.domain.engines.estimate, set on the record's separate `est_*` fields."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from backend.domain.buckets import (
    RawSample,
    appeared_from,
    bucket_increases,
    bucket_means,
    bucket_start,
    ran_on,
    split_increment,
    split_shares,
)
from backend.domain.engines.estimate import EstimateParts, bucket_estimates, mean
from backend.domain.families import RESTART_SERIES, RESTART_SERIES_ALL  # noqa: F401 (RESTART_SERIES: re-exported)
from backend.domain.records import (
    ESTIMATE_FIELDS,
    BucketRecord,
    PoolKey,
    ReplicaKey,
    histogram,
    set_buckets,
    set_per_position,
)
from backend.scrape.layout import LAYOUTS, LabelsKey, Layout, LayoutCache, shape_json, values_of
from backend.scrape.parse import SAMPLE_FAMILY, ParsedScrape

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
        return cls(target, ts, layouts.checked(shape_json(parsed)), np.frombuffer(values, "<f8"),
                   np.frombuffer(created, "<f8"))


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
    layout: Layout | None = None  # the one layout of every row, if so (then the columns are its series)


def _columns(rows: list[Scrape]) -> _Columns:
    first = rows[0].layout
    if all(sc.layout is first for sc in rows) and first.duplicate is None:  # the usual case: one shape
        n, m = len(rows), first.size
        idx = first.created_index
        with_c = idx >= 0
        created = np.full((n, m), np.nan)
        if with_c.any():
            created[:, with_c] = np.vstack([sc.created for sc in rows])[:, idx[with_c]]
        return _Columns(first.keys, [sc.ts for sc in rows], np.vstack([sc.values for sc in rows]),
                        np.ones((n, m), dtype=bool), created, np.repeat(with_c[None, :], n, axis=0), first)
    layouts: dict[int, tuple[Layout, np.ndarray]] = {}  # id(layout) -> (layout, its columns)
    keys: dict[tuple[str, LabelsKey], int] = {}
    for sc in rows:
        if id(sc.layout) not in layouts:
            lay = sc.layout
            cols = [keys.setdefault(k, len(keys)) for k in lay.keys]
            layouts[id(lay)] = (lay, np.array(cols, dtype=np.intp))
    n, m = len(rows), len(keys)
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
               max_gap: float, dip_tolerance: float,
               split_within: float | None = None) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], dict[int, Any]]:
    """(fast, slow): per bucket, (values, has): a value per column and whether the column has one there, for
    the columns done together; and for each other column its Increases (counters, histograms) or bucket
    means (gauges). All as domain.buckets.bucket_increases / bucket_means give from the column's samples.

    Columns present in every row (nearly all of them) are done together: a gauge's mean per bucket, and a
    counter's increments when it has a steady `_created` and no drop between consecutive samples: the
    differences, split between the buckets each interval overlaps (domain.buckets.split_shares, the same
    parts as sample by sample) and summed per bucket in time order. The others (a drop, a restart, a series
    that comes or goes) go sample by sample."""
    n, m = c.values.shape
    starts = [bucket_start(t, width) for t in c.ts]
    pairs = [k for k in range(1, n) if c.ts[k] - c.ts[k - 1] <= max_gap]  # the others yield no increment
    gauge = np.array([k == "gauge" for k in kinds], dtype=bool)
    present = c.present.all(axis=0)
    if pairs:
        rows = np.array(pairs)
        diff = c.values[rows] - c.values[rows - 1]
        changed = (c.has_created[rows] & c.has_created[rows - 1]
                   & (c.created[rows] != c.created[rows - 1])).any(axis=0)
        counting = present & (diff >= 0).all(axis=0) & ~changed & ~gauge
    else:
        counting = present & ~gauge
    averaging = present & gauge
    fast: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i, k in enumerate(pairs):
        shares = ([(starts[k], None)] if starts[k - 1] == starts[k]
                  else split_shares(c.ts[k - 1], c.ts[k], width, split_within=split_within))
        for b, part in split_increment(diff[i], shares):
            if first_bucket <= b <= last_bucket:
                got = fast.get(b)
                fast[b] = (np.zeros(m) + part, counting) if got is None else (got[0] + part, counting)
    if averaging.any():
        cols = np.flatnonzero(averaging)
        means: dict[int, list] = {}
        for k in range(n):
            b = starts[k]
            if first_bucket <= b <= last_bucket:
                acc = means.setdefault(b, [np.zeros(len(cols)), 0])
                acc[0] = acc[0] + c.values[k, cols]
                acc[1] += 1
        for b, (total, count) in means.items():
            values, has = fast.get(b, (np.zeros(m), np.zeros(m, dtype=bool)))
            values = values.copy()
            values[cols] = total / count
            fast[b] = (values, has | averaging)
    slow: dict[int, Any] = {}
    for j in np.flatnonzero(~(counting | averaging)).tolist():
        samples = [_sample(c, k, j) for k in range(n) if c.present[k, j]]
        if kinds[j] == "gauge":
            slow[j] = bucket_means(samples, width=width, first_bucket=first_bucket, last_bucket=last_bucket)
        else:
            zero = _appeared(c, j, max_gap=max_gap, dip_tolerance=dip_tolerance)
            if zero is not None:
                samples.insert(0, zero)
            slow[j] = bucket_increases(samples, width=width, max_gap=max_gap, first_bucket=first_bucket,
                                       last_bucket=last_bucket, dip_tolerance=dip_tolerance,
                                       split_within=split_within)
    return fast, slow


def _sample(c: _Columns, k: int, j: int) -> RawSample:
    return RawSample(c.ts[k], float(c.values[k, j]), float(c.created[k, j]) if c.has_created[k, j] else None)


def _appeared(c: _Columns, j: int, *, max_gap: float, dip_tolerance: float) -> RawSample | None:
    """The zero a counter column started from when it first appears after the target's first scrape in the
    window while the target ran on (domain.buckets.ran_on) between that scrape and the one before: every
    restart series of the target whose labels the column's include (its engine's output-token counter, of
    the same model and data-parallel engine) is in both scrapes and shows no restart. Then the column's first
    value is an increase from 0 (domain.buckets.appeared_from), not a base: llama-server writes its
    per-position counters only once a request that drafted has finished; a labelled child a client library
    creates on its first increment appears the same way. None otherwise (a target's first scrape, an engine
    that joins or restarts, a restart series that itself appears: no evidence, the first value is a base)."""
    rows = np.flatnonzero(c.present[:, j])
    k = int(rows[0]) if rows.size else 0
    if k == 0:
        return None
    labels = set(c.keys[j][1])
    restart = [r for r, (name, lkey) in enumerate(c.keys) if name in RESTART_SERIES_ALL and set(lkey) <= labels]
    if not restart or not all(c.present[k - 1, r] and c.present[k, r] and ran_on(
            _sample(c, k - 1, r), _sample(c, k, r), max_gap=max_gap, dip_tolerance=dip_tolerance) for r in restart):
        return None
    return appeared_from(_sample(c, k, j), c.ts[k - 1])


def _slot(name: str, fam, labels: dict) -> tuple:
    """Where a series' increase goes in its record."""
    if fam.kind == "gauge":
        return ("mean",)
    if fam.kind == "counter":
        return ("counter", fam.field)
    if fam.kind == "per_pos":
        return ("pos", fam.field, labels.get("position", ""))
    part = name[len(fam.metric) + 1:]  # bucket | sum | count
    if part == "bucket":
        return ("le", fam.field, labels.get("le", ""))
    return ("hist", fam.field, part)


@dataclass(frozen=True)
class _Plan:
    """Where a target's columns go: its distinct (record key, slot) pairs in order of first use, and per
    column the index of its pair (-1: a family replicas do not keep)."""

    dests: list[tuple]
    col_dest: np.ndarray
    restart_cols: frozenset[int]  # columns of RESTART_SERIES
    dest_engines: tuple[str, ...] = ()  # per destination, the engine of its family


_PLANS: OrderedDict[tuple, _Plan] = OrderedDict()
PLAN_CACHE_SIZE = 8192  # two a target (its pool rows and its replica rows)


def _plan(cols: _Columns, families: list, target: str, tl: dict, naming: PoolNaming,
          replica_of: ReplicaOf | None) -> _Plan:
    """The target's plan, kept per target and layout (a fleet's targets keep their shapes); `replica_of` must
    be a pure function (it is part of the key)."""
    cache_key = None
    if cols.layout is not None:
        cache_key = (cols.layout.digest, target, tuple(sorted(tl.items())), naming, replica_of)
        plan = _PLANS.get(cache_key)
        if plan is not None:
            _PLANS.move_to_end(cache_key)
            return plan
    dests: dict[tuple, int] = {}
    col_dest: list[int] = []
    restart_cols = set()
    engines_of: list[str] = []
    for j, ((name, lkey), fam) in enumerate(zip(cols.keys, families, strict=True)):
        if (replica_of is not None and fam.field not in REPLICA_FIELDS) or fam.kind == "estimate":
            col_dest.append(-1)  # a family replicas do not keep; an estimate's gauge (read apart)
            continue
        labels = dict(lkey)
        key = pool_key(labels, tl, naming)
        if replica_of is not None:
            key = (key, replica_of(target, labels, tl))
        dest = (key, _slot(name, fam, labels))
        if dest not in dests:
            engines_of.append(fam.engine)
        col_dest.append(dests.setdefault(dest, len(dests)))
        if name in RESTART_SERIES_ALL:
            restart_cols.add(j)
    plan = _Plan(list(dests), np.array(col_dest, dtype=np.intp), frozenset(restart_cols), tuple(engines_of))
    if cache_key is not None:
        _PLANS[cache_key] = plan
        while len(_PLANS) > PLAN_CACHE_SIZE:
            _PLANS.popitem(last=False)
    return plan


def pool_key(labels: dict, target_labels: dict, naming: PoolNaming) -> PoolKey:
    """The pool a series belongs to: the series' model_name (the target's `model_name` label for an engine
    whose series have none: llama.cpp), the class and mode from the target's labels, else the series', else
    the defaults."""
    tl = target_labels
    return PoolKey(labels["model_name"] if "model_name" in labels else tl.get("model_name", ""),
                   tl.get(naming.class_label) or labels.get(naming.class_label) or naming.default_class,
                   tl.get(naming.mode_label) or labels.get(naming.mode_label) or naming.default_mode)


def pools_in(scrapes: Iterable[Scrape], *, target_labels: dict[str, dict[str, str]],
             naming: PoolNaming) -> set[PoolKey]:
    """The pools the scrapes' series belong to, whether or not they give an increase yet (one sample does
    not): what `specwatch collect --once` reports as found."""
    out: set[PoolKey] = set()
    for sc in scrapes:
        tl = target_labels.get(sc.target, {})
        for name, lkey in sc.layout.keys:
            if name in SAMPLE_FAMILY:
                key = pool_key(dict(lkey), tl, naming)
                if key.model_name:
                    out.add(key)
    return out


def config_labels(scrapes: Iterable[Scrape], *, target_labels: dict[str, dict[str, str]], naming: PoolNaming,
                  width: int, first_bucket: int, last_bucket: int,
                  names: tuple[str, str]) -> dict[tuple[PoolKey, int], tuple[str | None, str | None]]:
    """Per pool and bucket start (first_bucket..last_bucket), its (drafter, vLLM version) labels, `names`,
    as the bucket's latest scrape shows them: the target's labels first, else the series' (the deployment
    sets them; vLLM exposes neither). Pools whose series carry neither label are left out."""
    out: dict[tuple[PoolKey, int], tuple[str | None, str | None]] = {}
    per_layout: dict[tuple[int, str], dict[PoolKey, tuple[str | None, str | None]]] = {}
    for sc in sorted(scrapes, key=lambda x: x.ts):
        b = int(-(-sc.ts // width) * width) - width  # the bucket (b, b + width] the sample belongs to
        if not first_bucket <= b <= last_bucket:
            continue
        found = per_layout.get((id(sc.layout), sc.target))
        if found is None:
            tl = target_labels.get(sc.target, {})
            found = per_layout[(id(sc.layout), sc.target)] = {}
            for name, lkey in sc.layout.keys:
                if name not in SAMPLE_FAMILY:
                    continue
                labels = dict(lkey)
                if "model_name" not in labels:
                    continue
                value = tuple(tl.get(n) or labels.get(n) or None for n in names)
                if any(value):
                    key = pool_key(labels, tl, naming)
                    found[key] = max(found.get(key, value), value, key=lambda v: tuple(x or "" for x in v))
        for key, value in found.items():
            out[(key, b)] = value
    return out


def assemble(scrapes: Iterable[Scrape], *, target_labels: dict[str, dict[str, str]], width: int,
             first_bucket: int, last_bucket: int, max_gap: float, naming: PoolNaming,
             dip_tolerance: float = 0.0, split_within: float | None = None,
             replica_of: ReplicaOf | None = None, origins: dict | None = None) -> dict[tuple, BucketRecord]:
    """Per pool and bucket, the exact increases of every family. A counter drop smaller than
    `dip_tolerance` (a fraction of its value) without a `_created` change is a dip, not a reset
    (domain.buckets): it adds 0 and is counted in the record's `dips`. An interval between two samples that
    straddles a bucket boundary is split between the buckets in proportion to time (domain.buckets;
    `split_within` limits which intervals are split).

    With `replica_of` (target, series labels, target labels) -> replica: per replica instead, keyed by
    ((pool, replica), bucket), and only the families replicas keep (spec decode, TPOT, ITL). `origins`, if
    given, receives the target each record key came from (the last one, if several give the same key).

    Each record field is the sum of its series' increases in the order the series are met (targets by
    their first scrape, then each target's series in exposition order). Each record says the engine of its
    series (`engine`); a target with an engine's estimate gauges (SGLang) adds its estimate parts to the
    `est_*` fields of its pools' records (not with `replica_of`)."""
    dest_ids: dict[tuple, int] = {}  # (record key, slot) -> its index in every bucket's row
    dests: list[tuple] = []
    rows_of: dict[int, np.ndarray] = {}  # bucket -> sum per destination
    touched: dict[int, np.ndarray] = {}  # bucket -> whether each destination has at least one increase
    restarts: dict[tuple, int] = {}
    dips: dict[tuple, dict[str, int]] = {}

    used: list[_Plan] = []  # each target's plan, in order: they decide `dests`
    engine_of: dict[tuple, str] = {}  # record key -> the engine of its series
    estimates: list[tuple[tuple, int, EstimateParts]] = []
    by_target: dict[str, list[Scrape]] = {}
    for sc in sorted(scrapes, key=lambda s: s.ts):
        by_target.setdefault(sc.target, []).append(sc)
    for target, rows in by_target.items():
        cols = _columns(rows)
        families = [SAMPLE_FAMILY[name] for name, _lkey in cols.keys]
        plan = _plan(cols, families, target, target_labels.get(target, {}), naming, replica_of)
        used.append(plan)
        ids = []
        for d in plan.dests:
            g = dest_ids.get(d)
            if g is None:
                g = dest_ids[d] = len(dests)
                dests.append(d)
            ids.append(g)
        if origins is not None:
            origins.update(dict.fromkeys((key for key, _slot in plan.dests), target))
        for (key, _slot), engine in zip(plan.dests, plan.dest_engines, strict=True):
            engine_of.setdefault(key, engine)
        if replica_of is None and any(f.kind == "estimate" for f in families):
            estimates += _estimates(cols, families, target_labels.get(target, {}), naming, width=width,
                                    first_bucket=first_bucket, last_bucket=last_bucket, max_gap=max_gap)
        kinds = ["gauge" if f.kind == "estimate" else f.kind for f in families]
        fast, slow = _increases(cols, kinds, width=width, first_bucket=first_bucket,
                                last_bucket=last_bucket, max_gap=max_gap, dip_tolerance=dip_tolerance,
                                split_within=split_within)
        gcol = np.append(np.array(ids, dtype=np.intp), -1)[plan.col_dest]  # -1 stays -1
        live = gcol >= 0
        slow_cols = [j for j in slow if live[j]]
        buckets = dict.fromkeys(fast)
        for j in slow_cols:
            buckets.update(dict.fromkeys(slow[j] if isinstance(slow[j], dict) else slow[j].by_bucket))
        for b in buckets:
            row = rows_of.get(b)
            if row is None or len(row) < len(dests):
                size = max(2 * len(dests), 64)
                grown, grown_seen = np.zeros(size), np.zeros(size, dtype=bool)
                if row is not None:
                    grown[:len(row)], grown_seen[:len(row)] = row, touched[b]
                row, rows_of[b], touched[b] = grown, grown, grown_seen
            seen = touched[b]
            values, has = fast.get(b, (None, None))
            if values is None:
                values, has = np.zeros(len(gcol)), np.zeros(len(gcol), dtype=bool)
            else:
                has = has & live
                for j in plan.restart_cols:
                    if has[j]:
                        key = (dests[gcol[j]][0], b)
                        restarts[key] = restarts.get(key, 0)
            if slow_cols:
                values, has = values.copy(), has.copy()
                for j in slow_cols:
                    res = slow[j]
                    if isinstance(res, dict):  # a gauge's mean
                        if b in res:
                            values[j], has[j] = res[b], True
                        continue
                    inc = res.by_bucket.get(b)
                    if inc is None:
                        continue
                    values[j], has[j] = inc, True
                    key = (dests[gcol[j]][0], b)
                    if j in plan.restart_cols:
                        restarts[key] = restarts.get(key, 0) + res.resets.get(b, 0)
                    if b in res.dips:
                        d = dips.setdefault(key, {})
                        name = cols.keys[j][0]
                        d[name] = d.get(name, 0) + res.dips[b]
            # in column order, one after the other: the same sums, to the last bit, as series by series
            np.add.at(row, gcol[has], values[has])
            seen[gcol[has]] = True

    replicas = replica_of is not None
    records = _records(_meta(dests, used, replicas=replicas), rows_of, touched, replicas=replicas)
    for key, n in restarts.items():
        records[key].restarts = n
    for key, d in dips.items():
        records[key].dips.update(d)
    for key, b, parts in estimates:
        rec = records.get((key, b))
        if rec is None:
            rec = records[(key, b)] = BucketRecord(pool=key, bucket_start=b)
        for name, value in zip(ESTIMATE_FIELDS, (parts.weight_tokens, parts.verify_steps, parts.accepted_tokens,
                                                 parts.draft_tokens), strict=True):
            setattr(rec, name, (getattr(rec, name) or 0.0) + value)
        engine_of.setdefault(key, "sglang")
    for (key, _b), rec in records.items():
        rec.engine = engine_of.get(key)
    return records


def _estimates(cols: _Columns, families: list, tl: dict, naming: PoolNaming, *, width: int, first_bucket: int,
               last_bucket: int, max_gap: float) -> list[tuple[tuple, int, EstimateParts]]:
    """One target's estimate parts per pool and bucket (backend.domain.engines.estimate): per scrape, the sum
    of the pool's generated-token counter series (None where one is missing) and the mean of each gauge's
    series."""
    groups: dict[PoolKey, dict[str, list[int]]] = {}
    for j, ((_name, lkey), fam) in enumerate(zip(cols.keys, families, strict=True)):
        if fam.field in ("generation_tokens", "spec_accept_length", "spec_accept_rate") and fam.engine == "sglang":
            key = pool_key(dict(lkey), tl, naming)
            groups.setdefault(key, {}).setdefault(fam.field, []).append(j)
    out = []
    for key, by in groups.items():
        gen, tau, rate = by.get("generation_tokens", []), by.get("spec_accept_length"), by.get("spec_accept_rate")
        if not gen or not tau:
            continue
        points = []
        for k, t in enumerate(cols.ts):
            counter = float(cols.values[k, gen].sum()) if cols.present[k, gen].all() else None
            points.append((t, counter,
                           mean(float(cols.values[k, j]) for j in tau if cols.present[k, j]),
                           mean(float(cols.values[k, j]) for j in rate or () if cols.present[k, j])))
        for b, parts in bucket_estimates(points, width=width, max_gap=max_gap, first_bucket=first_bucket,
                                         last_bucket=last_bucket).items():
            out.append((key, b, parts))
    return out


@dataclass(frozen=True)
class _Meta:
    """What each record is made of: per record key its scalar destinations and its per-position and `le`
    groups (destination, label), and each destination's record key."""

    keys: list[tuple]
    key_of: np.ndarray
    scalars: list[list[tuple]]
    groups: list[dict[tuple, list]]


_LAST_META: dict[bool, tuple[list, _Meta]] = {}  # per kind of run: the plans it was made for, and it


def _meta(dests: list[tuple], plans: list[_Plan], *, replicas: bool) -> _Meta:
    """The records' makeup for `dests` (built from `plans` in order, which decide it): kept from the last run
    of the same kind while its targets and their plans are the same ones (a running worker's every run)."""
    last = _LAST_META.get(replicas)
    if last is not None and len(last[0]) == len(plans) and all(a is b for a, b in zip(last[0], plans, strict=True)):
        return last[1]
    key_ids: dict[tuple, int] = {}
    keys: list[tuple] = []
    key_of = np.empty(len(dests), dtype=np.intp)
    scalars: list[list[tuple]] = []
    groups: list[dict[tuple, list]] = []
    for g, (key, slot) in enumerate(dests):
        k = key_ids.get(key)
        if k is None:
            k = key_ids[key] = len(keys)
            keys.append(key)
            scalars.append([])
            groups.append({})
        key_of[g] = k
        if slot[0] in ("pos", "le"):
            groups[k].setdefault((slot[1], slot[0]), []).append((g, slot[2]))
        else:
            scalars[k].append((g, slot))
    meta = _Meta(keys, key_of, scalars, groups)
    _LAST_META[replicas] = (list(plans), meta)
    return meta


def _records(meta: _Meta, rows_of: dict[int, np.ndarray], touched: dict[int, np.ndarray], *,
             replicas: bool) -> dict[tuple, BucketRecord]:
    """The records of every bucket from its sums per destination, set where a destination had an increase.
    Records come in the order of their first destination with an increase, and each group's labels in
    destination order, as destination by destination."""
    keys, key_of, scalars, groups = meta.keys, meta.key_of, meta.scalars, meta.groups
    records: dict[tuple, BucketRecord] = {}
    for b, seen in touched.items():
        hit = np.flatnonzero(seen[:len(key_of)])
        if not hit.size:
            continue
        kid = key_of[hit]
        uniq, first = np.unique(kid, return_index=True)
        row, on = rows_of[b].tolist(), seen.tolist()
        for k in uniq[np.argsort(first, kind="stable")].tolist():
            key = keys[k]
            r = records[(key, b)] = BucketRecord(pool=key[0] if replicas else key, bucket_start=b)
            for g, slot in scalars[k]:
                if on[g]:
                    if slot[0] == "counter":
                        setattr(r, slot[1], row[g])
                    elif slot[0] == "mean":
                        r.running_mean = row[g]
                    else:
                        setattr(histogram(r, slot[1]), slot[2], row[g])
            for (field, kind), pairs in groups[k].items():
                by_label = {label: row[g] for g, label in pairs if on[g]}
                if by_label:
                    (set_per_position(r, by_label) if kind == "pos" else set_buckets(r, field, by_label))
    return records
