"""A histogram family summed over a whole window, per pool and layout, in one statement.

Clean whole hours come from pool_buckets_hourly, the edges and dirty hours from pool_buckets (the union
of backend.db.routing, one snapshot). Postgres sums each `le` column per group (one `sum` per element:
a 30-day window is ~720 hour rows per pool, and 20 short rows travel back instead of each pool's stacked
2-D array, whose binary serialisation cost more than the sums).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from sqlalchemy.orm import Session

from backend.db import routing
from backend.db.queries import HISTOGRAM_FAMILIES, element_sums
from backend.db.spec_series import binary_rows

_END_B = "(extract(epoch FROM b.bucket_start)::bigint + b.bucket_seconds)"


@dataclass
class HistogramTotal:
    pool_id: int
    layout_id: int
    counts: np.ndarray  # cumulative per `le` of the layout, +Inf last
    sum: float | None
    count: float | None
    buckets: int  # raw buckets summed (an hour row counts its buckets)


def histogram_totals(session: Session, *, pool_ids: Sequence[int], family: str, start: datetime, end: datetime,
                     bucket_seconds: int, n_counts: int) -> list[HistogramTotal]:
    """Per pool and layout: the family's buckets ending in (start, end] summed. n_counts: the longest
    count array of any layout (queries.count_width)."""
    if family not in HISTOGRAM_FAMILIES:
        raise ValueError(f"unknown histogram family {family!r}")
    if not pool_ids or end <= start or n_counts <= 0:
        return []
    f = family
    raw = f"b.pool_id, b.{f}_layout_id AS layout, b.{f}_buckets AS c, b.{f}_sum AS s, b.{f}_count AS n, 1 AS k"
    present = f"b.{f}_buckets IS NOT NULL"
    params: dict = {"ids": list(pool_ids), "lo": start - timedelta(seconds=bucket_seconds),
                    "hi": end - timedelta(seconds=bucket_seconds)}
    hourly = (f"b.pool_id, NULLIF(b.{f}_layout_id, 0) AS layout, b.{f}_buckets AS c, b.{f}_sum AS s, "
              f"b.{f}_count AS n, b.buckets AS k")
    hours = routing.whole_hours(start.timestamp(), end.timestamp(), min_hours=1)
    src, extra = routing.select(raw, hourly, hours, width=bucket_seconds, where=present)
    params |= extra
    sql = f"""
        SELECT pool_id, layout, cardinality(c), sum(s), sum(n), sum(k)::bigint, {element_sums("c", n_counts, "c")}
        FROM ({src}) AS u
        GROUP BY pool_id, layout, cardinality(c)
        ORDER BY pool_id, layout
    """
    out: list[HistogramTotal] = []
    for pool_id, layout, size, s, n, k, *columns in binary_rows(session, sql, params):
        if layout is None or not size:
            continue
        # an element no row of the group has (NULL in every row) sums to 0, as a NaN-ignoring sum does
        counts = np.array([0.0 if c is None else c for c in columns[:size]], dtype=np.float64)
        prev = next((t for t in out if t.pool_id == pool_id and t.layout_id == layout), None)
        if prev is not None and len(prev.counts) == len(counts):
            prev.counts = prev.counts + counts
            prev.sum = _add(prev.sum, s)
            prev.count = _add(prev.count, n)
            prev.buckets += k
        else:
            out.append(HistogramTotal(pool_id, layout, counts, s, n, k))
    return out


def _add(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else a + b
