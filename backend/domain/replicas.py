"""Replicas inside a pool (pure): coarse per-replica buckets from the collection grain, and the outlier test.

A replica is one (instance, engine) of a model x class x mode pool. Its rows keep only what the replica
questions need (the spec-decode counters, per-position accepted, TPOT and ITL histograms) at a coarser grain
than the pool rows (`replica_bucket_seconds`, 5 min by default): a coarse bucket (S, S + G] is the sum of the
collection buckets whose start lies in [S, S + G). Sums only; ratios are taken after summing.

The outlier rule compares a replica's alpha with the POOLED alpha of the pool's other replicas
(sum of their accepted / sum of their draft tokens), never a mean of their ratios, over the coarse buckets
both report (aligned): a replica is an outlier against its peers at the same time, never against hours
in which it did not run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from backend.domain.alerting import Evaluation
from backend.domain.quality import SPEC_FIELDS, Violation, validate
from backend.domain.records import BucketRecord, Histogram, PoolKey, ReplicaKey, known_add

REPLICA_SCALARS = ("drafts", "draft_tokens", "accepted_tokens")
REPLICA_HISTOGRAMS = ("itl", "tpot")


def coarse_start(start: float, grain: int) -> int:
    """The coarse bucket a collection bucket (start, start + width] belongs to (grain a multiple of width)."""
    s = round(start)
    return s - s % grain


def complete_coarse_ends(first_end: int, last_end: int, grain: int) -> list[int]:
    """Ends of the coarse buckets that end inside collection bucket ends first_end..last_end."""
    first = -(-first_end // grain) * grain
    return list(range(first, last_end + 1, grain))


def _add_lists(a: list[float] | None, b: list[float] | None) -> list[float] | None:
    if a is None:
        return list(b) if b is not None else None
    if b is None:
        return a
    if len(a) != len(b):  # K changed inside the coarse bucket: not summable, refused as a whole
        return [math.nan] * max(len(a), len(b))
    return [x + y for x, y in zip(a, b, strict=True)]


def _add_hist(a: Histogram | None, b: Histogram | None) -> Histogram | None:
    if b is None:
        return a
    if a is None:
        return Histogram(b.bounds, list(b.counts), b.sum, b.count)
    if a.bounds != b.bounds:  # a layout change inside the coarse bucket: refused (NaN) rather than mixed
        return Histogram(a.bounds, [math.nan] * len(a.counts), a.sum, a.count)
    return Histogram(a.bounds, [x + y for x, y in zip(a.counts, b.counts, strict=True)], known_add(a.sum, b.sum),
                     known_add(a.count, b.count))


@dataclass
class ReplicaRecord:
    """One replica's sums over one coarse bucket; `record` carries the values (and the pool key)."""

    replica: ReplicaKey
    record: BucketRecord
    violations: list[Violation]


def coarsen(fine: Iterable[tuple[ReplicaKey, BucketRecord]], *, grain: int,
            ends: set[int] | None = None) -> list[ReplicaRecord]:
    """Validate each collection-grain replica record, then sum them per (pool, replica, coarse bucket).

    A family refused in any fine bucket is refused for the whole coarse bucket (the spec-decode group
    together), so a coarse row never hides a gap. With `ends`, only coarse buckets ending there are kept
    (the complete ones a chunk finalises). A record left empty by its refusals is returned too (for its
    violations); is_empty() tells."""
    out: dict[tuple[PoolKey, ReplicaKey, int], ReplicaRecord] = {}
    for replica, rec in fine:
        start = coarse_start(rec.bucket_start, grain)
        if ends is not None and start + grain not in ends:
            continue
        violations = validate(rec)
        key = (rec.pool, replica, start)
        acc = out.get(key)
        if acc is None:
            acc = out[key] = ReplicaRecord(replica, BucketRecord(pool=rec.pool, bucket_start=start), [])
        acc.violations.extend(violations)
        c = acc.record
        for name in REPLICA_SCALARS:
            setattr(c, name, known_add(getattr(c, name), getattr(rec, name)))
        c.accepted_per_pos = _add_lists(c.accepted_per_pos, rec.accepted_per_pos)
        for name in REPLICA_HISTOGRAMS:
            setattr(c, name, _add_hist(getattr(c, name), getattr(rec, name)))
    for acc in out.values():
        refused = {f for v in acc.violations for f in v.fields}
        if refused & set(SPEC_FIELDS):
            refused |= set(SPEC_FIELDS)
        for name in refused:
            setattr(acc.record, name, None)
        acc.violations.extend(validate(acc.record))
    return list(out.values())


def is_empty(rec: BucketRecord) -> bool:
    return all(getattr(rec, n) is None for n in (*REPLICA_SCALARS, "accepted_per_pos", *REPLICA_HISTOGRAMS))


# --- the outlier rule --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaVolume:
    """Additive spec-decode sums of one replica (or of several, pooled) over a window."""

    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None

    def __add__(self, other: ReplicaVolume) -> ReplicaVolume:
        return ReplicaVolume(known_add(self.drafts, other.drafts), known_add(self.draft_tokens, other.draft_tokens),
                             known_add(self.accepted_tokens, other.accepted_tokens))

    @property
    def alpha(self) -> float | None:
        if self.accepted_tokens is None or not self.draft_tokens:
            return None
        return self.accepted_tokens / self.draft_tokens


def pooled_others(volumes: Mapping[ReplicaKey, ReplicaVolume], replica: ReplicaKey) -> ReplicaVolume:
    """The other replicas' sums added (their pooled alpha is sum A / sum D, not a mean of ratios)."""
    out = ReplicaVolume()
    for key, v in sorted(volumes.items()):
        if key != replica:
            out = out + v
    return out


def aligned(per_bucket: Mapping[Any, Mapping[Any, ReplicaVolume]], replica: Any
            ) -> tuple[ReplicaVolume, ReplicaVolume]:
    """(this replica's sums, the other replicas' pooled sums) over the same buckets only: those in which this
    replica reported spec-decode counters and at least one other replica did too. An outlier is a replica
    unlike its peers at the same time: a replica that joined late (a restart, a new pod) or one whose rows
    stopped (a renamed or gone server) is never compared with its peers' other hours, so a drop of the
    whole pool, which every replica sees in the same buckets, leaves no replica below the others.
    per_bucket: {replica key: {bucket start: its sums}} (any sortable bucket key)."""
    mine_rows = per_bucket.get(replica, {})
    mine, others = ReplicaVolume(), ReplicaVolume()
    for start, own in sorted(mine_rows.items(), key=lambda kv: kv[0]):
        if own.draft_tokens is None:
            continue
        peers = [rows[start] for key, rows in sorted(per_bucket.items(), key=lambda kv: kv[0])
                 if key != replica and start in rows and rows[start].draft_tokens is not None]
        if not peers:
            continue
        mine = mine + own
        for v in peers:
            others = others + v
    return mine, others


def replica_outlier(mine: ReplicaVolume, others: ReplicaVolume, *, gap: float, recover_margin: float,
                    min_drafts: float, window: float, replicas: int) -> Evaluation:
    """Breached when this replica's alpha is below the others' pooled alpha by more than `gap`; ok once it is
    within gap - recover_margin; hold in between. Both sides need at least `min_drafts` drafts and there must
    be another replica, else no_data (never read as recovery)."""
    a_mine, a_others = mine.alpha, others.alpha
    line = a_others - gap if a_others is not None else None
    values = {"window": window, "alpha_replica": a_mine, "alpha_others": a_others, "gap": gap,
              "gap_observed": (a_others - a_mine) if a_mine is not None and a_others is not None else None,
              "drafts_replica": mine.drafts, "drafts_others": others.drafts, "min_drafts": min_drafts,
              "replicas": replicas, "recover_at": line + recover_margin if line is not None else None}
    if replicas < 2:
        return Evaluation("no_data", a_mine, line, "no other replica in the pool", values)
    if a_mine is None or not mine.drafts or mine.drafts < min_drafts:
        return Evaluation("no_data", a_mine, line, f"replica volume below the guard ({mine.drafts or 0:.0f} < "
                          f"{min_drafts:.0f} drafts)", values)
    if line is None or not others.drafts or others.drafts < min_drafts:
        return Evaluation("no_data", a_mine, line, f"other replicas' volume below the guard "
                          f"({others.drafts or 0:.0f} < {min_drafts:.0f} drafts)", values)
    if a_mine < line:
        return Evaluation("breached", a_mine, line, f"alpha {a_mine:.3f} is {a_others - a_mine:.3f} below the "
                          f"other replicas' pooled {a_others:.3f} (gap {gap:g})", values)
    if a_mine >= line + recover_margin:
        return Evaluation("ok", a_mine, line, "back with the other replicas", values)
    return Evaluation("hold", a_mine, line, "inside the recovery band", values)
