"""Exact per-bucket increases from raw counter samples (the direct-scrape source).

Buckets are right-closed: bucket b covers (b, b + width], like a PromQL range ending at b + width. The
increment between two consecutive samples is attributed to the bucket holding the later sample, so the
increases of consecutive buckets add up exactly to the counter's growth (no extrapolation).

Resets need evidence: the series' `_created` time changed, or the value fell below (1 - dip_tolerance) x
the highest value seen since the last reset. Then the counter restarted from 0 and the increment is v_k.
A smaller drop is a *dip* (an exporter that sums its parts in a different order, a replica briefly
missing from an aggregate): not a reset, an increment of 0, counted so it can be flagged; growth is then
measured from the highest value seen, so a dip and its recovery add nothing (1000, 990, 1010 -> +10). With
dip_tolerance 0 any drop is a reset, as in Prometheus' increase(). A gap longer than `max_gap` between two
samples yields no increment (the series went stale), as Prometheus yields no increase across a window
without samples.
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


RESET, DIP = "reset", "dip"


def increments(samples: Sequence[RawSample], *, max_gap: float,
               dip_tolerance: float = 0.0) -> Iterable[tuple[float, float, str]]:
    """(ts, increment, "reset" | "dip" | "") for each sample after the first, samples sorted by ts."""
    high = samples[0].value if samples else 0.0  # highest value since the last reset (or gap)
    for prev, cur in pairwise(samples):
        if cur.ts - prev.ts > max_gap:
            high = cur.value
            continue
        created_changed = (prev.created is not None and cur.created is not None
                           and cur.created != prev.created)
        if created_changed or cur.value < high * (1.0 - dip_tolerance):
            high = cur.value
            yield cur.ts, cur.value, RESET
        elif cur.value < high:
            yield cur.ts, 0.0, DIP
        else:
            yield cur.ts, cur.value - high, ""
            high = cur.value


@dataclass
class Increases:
    """Per-bucket increases of one series, and its resets and dips per bucket."""

    by_bucket: dict[int, float]
    resets: dict[int, int]
    dips: dict[int, int]


def bucket_increases(samples: Sequence[RawSample], *, width: int, max_gap: float, first_bucket: int,
                     last_bucket: int, dip_tolerance: float = 0.0) -> Increases:
    """Per-bucket increases for buckets first_bucket..last_bucket (starts, inclusive), with resets and dips.

    A bucket in range with at least one increment appears in the result (an increase of 0 is real data);
    a bucket without one does not (no data, never 0)."""
    out = Increases({}, {}, {})
    for ts, inc, event in increments(samples, max_gap=max_gap, dip_tolerance=dip_tolerance):
        b = bucket_start(ts, width)
        if first_bucket <= b <= last_bucket:
            out.by_bucket[b] = out.by_bucket.get(b, 0.0) + inc
            if event == RESET:
                out.resets[b] = out.resets.get(b, 0) + 1
            elif event == DIP:
                out.dips[b] = out.dips.get(b, 0) + 1
    return out


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
