"""Exact per-bucket increases from raw counter samples (the direct-scrape source).

Buckets are right-closed: bucket b covers (b, b + width], like a PromQL range ending at b + width. The
increment between two consecutive samples is attributed to the bucket holding the later sample, so the
increases of consecutive buckets add up exactly to the counter's growth (no extrapolation).

Reset handling is Prometheus-equivalent, plus `_created`: an increment is v_k - v_{k-1} unless the value
dropped or the series' creation time changed, in which case the counter restarted from 0 and the increment
is v_k. A gap longer than `max_gap` between two samples yields no increment (the series went stale), as
Prometheus yields no increase across a window without samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise


@dataclass(frozen=True)
class RawSample:
    ts: float
    value: float
    created: float | None = None


def bucket_start(ts: float, width: int) -> int:
    """Start of the right-closed bucket holding ts: ts in (start, start + width]."""
    return int(math.ceil(ts / width) * width) - width


def increments(samples: Sequence[RawSample], *, max_gap: float) -> Iterable[tuple[float, float, bool]]:
    """(ts, increment, was_reset) for each sample after the first, samples sorted by ts."""
    for prev, cur in pairwise(samples):
        if cur.ts - prev.ts > max_gap:
            continue
        created_changed = (prev.created is not None and cur.created is not None
                           and cur.created != prev.created)
        if created_changed or cur.value < prev.value:
            yield cur.ts, cur.value, True
        else:
            yield cur.ts, cur.value - prev.value, False


def bucket_increases(samples: Sequence[RawSample], *, width: int, max_gap: float,
                     first_bucket: int, last_bucket: int) -> tuple[dict[int, float], dict[int, int]]:
    """Per-bucket increases for buckets first_bucket..last_bucket (starts, inclusive), and resets per bucket.

    A bucket in range with at least one increment appears in the result (an increase of 0 is real data);
    a bucket without one does not (no data, never 0)."""
    out: dict[int, float] = {}
    resets: dict[int, int] = {}
    for ts, inc, was_reset in increments(samples, max_gap=max_gap):
        b = bucket_start(ts, width)
        if first_bucket <= b <= last_bucket:
            out[b] = out.get(b, 0.0) + inc
            if was_reset:
                resets[b] = resets.get(b, 0) + 1
    return out, resets


def bucket_means(samples: Sequence[RawSample], *, width: int, first_bucket: int,
                 last_bucket: int) -> dict[int, float]:
    """Mean of a gauge's samples per bucket."""
    sums: dict[int, list[float]] = {}
    for s in samples:
        b = bucket_start(s.ts, width)
        if first_bucket <= b <= last_bucket:
            acc = sums.setdefault(b, [0.0, 0.0])
            acc[0] += s.value
            acc[1] += 1
    return {b: total / n for b, (total, n) in sums.items()}
