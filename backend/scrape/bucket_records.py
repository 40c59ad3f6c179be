"""Sums per destination (record key, slot) and bucket -> BucketRecords: which destinations make up each
record, kept while a worker's targets and their plans stay the same."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from backend.domain.records import BucketRecord, histogram, set_buckets, set_per_position


@dataclass(frozen=True)
class Makeup:
    """What each record is made of: per record key its scalar destinations and its per-position and `le`
    groups (destination, label), and each destination's record key."""

    keys: list[tuple]
    key_of: np.ndarray
    scalars: list[list[tuple]]
    groups: list[dict[tuple, list]]


_LAST: dict[bool, tuple[list, Makeup]] = {}  # per kind of run: the plans it was made for, and it


def makeup(dests: list[tuple], plans: list, *, replicas: bool) -> Makeup:
    """The records' makeup for `dests` (built from `plans` in order, which decide it): kept from the last run
    of the same kind while its targets and their plans are the same ones (a running worker's every run)."""
    last = _LAST.get(replicas)
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
    meta = Makeup(keys, key_of, scalars, groups)
    _LAST[replicas] = (list(plans), meta)
    return meta


def to_records(meta: Makeup, rows_of: dict[int, np.ndarray], touched: dict[int, np.ndarray], *,
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
