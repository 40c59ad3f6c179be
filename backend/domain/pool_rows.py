"""Which pools each row of a model sums: the one rule every surface (summary, overview, alerts, report,
series) follows, so engine counters and per-request records of the same pool are never counted twice.

A pool is model x traffic class x spec mode. Its counts come from one of two sources:

* ``engine``: vLLM's counters (the scrape or Prometheus), ``Pool.origin == "engine"``;
* ``records``: sums of per-request records posted by a gateway (POST /requests), ``Pool.origin ==
  "requests"``, filed under the spec mode of the engine that served them.

Per model and spec mode:

* a class the engine labels is read from the engine; records of that class only add their distribution
  and coverage (they never change the row's counts);
* when the engine has no class label (its only class is ``default_class``) and records carry classes, the
  classes come from the records and the engine's unlabelled pool is the ``mixed`` row, not a class row;
* a class only records know is read from the records (``source == "records"``);
* ``mixed`` is the engine's exact totals; only a spec mode no engine reports is mixed from its records.

Pure: pools are any objects with ``model_name``, ``traffic_class``, ``spec_mode`` and ``origin``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MIXED = "mixed"  # backend.schemas.summary.MIXED
ENGINE, RECORDS = "engine", "records"


def origin_of(p: Any) -> str:
    """"records" for a pool of per-request sums, else "engine"."""
    return RECORDS if getattr(p, "origin", "engine") == "requests" else ENGINE


@dataclass(frozen=True)
class Row:
    """One row of a model: a class (or ``mixed``) of one spec mode, the pools whose counts it sums
    (`pools`, all of one source), and for coverage the records and engine pools of the same scope."""

    traffic_class: str
    spec_mode: str
    pools: tuple
    source: str  # ENGINE | RECORDS: where `pools`' counts come from
    records: tuple = ()  # records pools of the row's scope (the distribution; the coverage numerator)
    engine: tuple = ()  # engine pools of the row's scope (the coverage denominator)


def rows(pools: Sequence[Any], *, baseline_mode: str, default_class: str) -> list[Row]:
    """The class rows then the ``mixed`` row of every spec mode of one model's `pools`, in spec-mode and
    class order (baseline pools make no row)."""
    spec = [p for p in pools if p.spec_mode != baseline_mode]
    out: list[Row] = []
    for mode in sorted({p.spec_mode for p in spec}):
        engine = sorted((p for p in spec if p.spec_mode == mode and origin_of(p) == ENGINE),
                        key=lambda p: p.traffic_class)
        records = sorted((p for p in spec if p.spec_mode == mode and origin_of(p) == RECORDS),
                         key=lambda p: p.traffic_class)
        e_classes = {p.traffic_class for p in engine}
        unlabelled = e_classes == {default_class} and bool(records)
        class_rows = []
        for p in engine:
            if unlabelled:  # the engine's totals are the mixed row; the classes come from the records
                continue
            same = tuple(r for r in records if r.traffic_class == p.traffic_class)
            class_rows.append(Row(p.traffic_class, mode, (p,), ENGINE, records=same, engine=(p,)))
        for r in records:
            if r.traffic_class in e_classes and not unlabelled:
                continue  # the engine's counts of this class lead
            # coverage over the spec mode: the engine cannot tell this class's share of its counts
            class_rows.append(Row(r.traffic_class, mode, (r,), RECORDS, records=tuple(records), engine=tuple(engine)))
        out += sorted(class_rows, key=lambda x: x.traffic_class)
        members = tuple(engine) if engine else tuple(records)
        out.append(Row(MIXED, mode, members, ENGINE if engine else RECORDS, records=tuple(records),
                       engine=tuple(engine)))
    return out


def repeats_class_row(row: Row, all_rows: Sequence[Row]) -> bool:
    """A mixed row whose counts are exactly those of a class row of the same mode (the mode has one class
    row, summing the same pools): surfaces that list rows once may leave it out."""
    if row.traffic_class != MIXED:
        return False
    mine = [r for r in all_rows if r.spec_mode == row.spec_mode and r.traffic_class != MIXED]
    return len(mine) == 1 and {id(p) for p in mine[0].pools} == {id(p) for p in row.pools}
