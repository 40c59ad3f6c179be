"""Additive window totals in memory: the rows `queries.window_totals` returns, summed across bands and
pools. Only sums live here (None-aware: None + None = None, None + x = x); ratios are in backend.domain."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from backend.db.queries import TotalsRow
from backend.domain.mix import ClassTotals
from backend.domain.records import known_add

_ADDITIVE = ("drafts", "draft_tokens", "accepted_tokens", "drafts_with_per_pos", "generation_tokens",
             "finished_requests", "running_sum", "itl_sum", "itl_count", "tpot_sum", "tpot_count", "restarts")


@dataclass
class Totals:
    buckets: int = 0
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    drafts_with_per_pos: float | None = None
    per_pos: list[float | None] | None = None
    per_pos_lengths: set[int] = field(default_factory=set)
    generation_tokens: float | None = None
    finished_requests: float | None = None
    running_sum: float | None = None
    running_n: int = 0
    itl_sum: float | None = None
    itl_count: float | None = None
    tpot_sum: float | None = None
    tpot_count: float | None = None
    restarts: float | None = None
    last_end: datetime | None = None

    @classmethod
    def from_row(cls, row: TotalsRow) -> Totals:
        t = cls(buckets=row.buckets, running_n=row.running_n, last_end=row.last_end)
        for name in _ADDITIVE:
            setattr(t, name, getattr(row, name))
        if row.per_pos_len:
            t.per_pos = list(row.per_pos[: row.per_pos_len])
            t.per_pos_lengths = {row.per_pos_len}
        return t

    def __add__(self, other: Totals) -> Totals:
        out = Totals(buckets=self.buckets + other.buckets, running_n=self.running_n + other.running_n,
                     per_pos_lengths=self.per_pos_lengths | other.per_pos_lengths)
        for name in _ADDITIVE:
            setattr(out, name, known_add(getattr(self, name), getattr(other, name)))
        if self.per_pos is None or other.per_pos is None:
            out.per_pos = self.per_pos if other.per_pos is None else other.per_pos
        else:
            n = max(len(self.per_pos), len(other.per_pos))
            pad = lambda p: list(p) + [None] * (n - len(p))
            out.per_pos = [known_add(x, y) for x, y in zip(pad(self.per_pos), pad(other.per_pos))]
        ends = [e for e in (self.last_end, other.last_end) if e is not None]
        out.last_end = max(ends) if ends else None
        return out

    @property
    def has_spec_data(self) -> bool:
        return any(v is not None for v in (self.drafts, self.draft_tokens, self.accepted_tokens))

    @property
    def running_mean(self) -> float | None:
        return self.running_sum / self.running_n if self.running_n and self.running_sum is not None else None

    @property
    def tpot_mean(self) -> float | None:
        if self.tpot_sum is None or not self.tpot_count:
            return None
        return self.tpot_sum / self.tpot_count

    def class_totals(self, name: str) -> ClassTotals:
        """The acceptance counters as the domain's mix type (per_pos only when consistent)."""
        per_pos = tuple(self.per_pos) if self.per_pos is not None and len(self.per_pos_lengths) == 1 else None
        return ClassTotals(name=name, drafts=self.drafts, draft_tokens=self.draft_tokens,
                           accepted=self.accepted_tokens, per_pos=per_pos)

    def per_pos_totals(self, name: str) -> ClassTotals:
        """Per-position counters with N restricted to the buckets that reported them."""
        per_pos = tuple(self.per_pos) if self.per_pos is not None and len(self.per_pos_lengths) == 1 else None
        return ClassTotals(name=name, drafts=self.drafts_with_per_pos, draft_tokens=None, accepted=None,
                           per_pos=per_pos)


def total(items: Iterable[Totals]) -> Totals:
    out = Totals()
    for t in items:
        out = out + t
    return out


@dataclass
class PoolTotals:
    """One pool's window: all buckets, and per concurrency band index (None = running not reported)."""

    all: Totals
    by_band: dict[int | None, Totals]


def group_rows(rows: Sequence[TotalsRow]) -> dict[int, PoolTotals]:
    grouped: dict[int, dict[int | None, Totals]] = {}
    for row in rows:
        grouped.setdefault(row.pool_id, {})[row.band_index] = Totals.from_row(row)
    return {pid: PoolTotals(all=total(bands.values()), by_band=bands) for pid, bands in grouped.items()}


__all__ = ["PoolTotals", "Totals", "group_rows", "total"]
