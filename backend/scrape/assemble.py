"""Raw scrapes of engine targets -> exact per-pool, per-bucket increases (the direct-scrape source).

Every engine (backend.domain.engines) goes the same way: its series' families say which record field each
fills. SGLang's spec-decode gauges (families of kind `estimate`) fill no exact field: each target's scrapes
give the estimate parts of backend.domain.engines.estimate, set on the record's separate `est_*` fields."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from backend.domain.engines.estimate import EstimateParts, bucket_estimates, mean
from backend.domain.families import RESTART_SERIES, RESTART_SERIES_ALL  # noqa: F401 (RESTART_SERIES: re-exported)
from backend.domain.records import ESTIMATE_FIELDS, BucketRecord, PoolKey, ReplicaKey
from backend.scrape.bucket_records import makeup, to_records
from backend.scrape.increases import Columns, bucket_values
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


def _columns(rows: list[Scrape]) -> Columns:
    first = rows[0].layout
    if all(sc.layout is first for sc in rows) and first.duplicate is None:  # the usual case: one shape
        n, m = len(rows), first.size
        idx = first.created_index
        with_c = idx >= 0
        created = np.full((n, m), np.nan)
        if with_c.any():
            created[:, with_c] = np.vstack([sc.created for sc in rows])[:, idx[with_c]]
        return Columns(first.keys, [sc.ts for sc in rows], np.vstack([sc.values for sc in rows]),
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
    return Columns(list(keys), [sc.ts for sc in rows], values, present, created, has)


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


def _plan(cols: Columns, families: list, target: str, tl: dict, naming: PoolNaming,
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
        fast, slow = bucket_values(cols, kinds, width=width, first_bucket=first_bucket,
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
    records = to_records(makeup(dests, used, replicas=replicas), rows_of, touched, replicas=replicas)
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


def _estimates(cols: Columns, families: list, tl: dict, naming: PoolNaming, *, width: int, first_bucket: int,
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
