"""Exact per-bucket increases from raw counter samples (the direct-scrape source).

Buckets are right-closed: bucket b covers (b, b + width], like a PromQL range ending at b + width. The
increment between two consecutive samples is split between the buckets their interval overlaps, in
proportion to time (a 15 s scrape interval straddling a minute boundary 5 s before its end gives 2/3 to the
earlier bucket, 1/3 to the later one): counters grow steadily between scrapes, so a one-minute bucket then
holds its own minute's counts, not a whole interval of the next. The parts are rounded to multiples of
SPLIT_QUANTUM (1/1024 of a count) and the last part takes the rest, so the parts of an integer increment add
up to it exactly and the increases of consecutive buckets still add up exactly to the counter's growth (no
extrapolation; floating-point sums of multiples of 1/1024 below 2**43 are exact in any order). Each
bucket's share is within half a quantum of proportional. After a reset the counts accrued from the new
process's start (its `_created`, when that falls inside the interval) to the sample, so that increment is
split over (created, ts].

`split_within`: an interval is split only when its later sample is at most this many seconds past the
first bucket boundary it crosses (None: always). The direct-scrape finalizer sets it so that whichever run
writes a bucket at an interval's edge has already stored the interval's later sample; a longer interval
goes whole to the bucket of its later sample, as every interval did before splitting.

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
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np


@dataclass(frozen=True)
class RawSample:
    ts: float
    value: float
    created: float | None = None


def bucket_start(ts: float, width: int) -> int:
    """Start of the right-closed bucket holding ts: ts in (start, start + width]."""
    return int(math.ceil(ts / width) * width) - width


SPLIT_QUANTUM = 2.0 ** -10
_SCALE = 1.0 / SPLIT_QUANTUM


def split_shares(start: float, ts: float, width: int, *,
                 split_within: float | None = None) -> list[tuple[int, float | None]]:
    """The buckets the interval (start, ts] overlaps, in time order, each with the fraction of the interval
    up to that bucket's end (None for the last bucket: it takes the rest). One bucket when the interval lies
    in one bucket, or is not to be split (`split_within`)."""
    last = bucket_start(ts, width)
    first = int(math.floor(start / width) * width)  # the bucket holding the instant just after `start`
    if first >= last or ts <= start or (split_within is not None and ts - (first + width) > split_within):
        return [(last, None)]
    span = ts - start
    return [(b, (b + width - start) / span) for b in range(first, last, width)] + [(last, None)]


def split_increment(inc, shares: Sequence[tuple[int, float | None]]) -> list[tuple[int, object]]:
    """`inc` (a float or an array of them) in parts along `shares` (split_shares): each cumulative share
    rounded to SPLIT_QUANTUM, each part the difference of consecutive ones, the last part the rest."""
    if len(shares) == 1:
        return [(shares[0][0], inc)]
    out = []
    done = 0.0
    for b, frac in shares:
        if frac is None:
            out.append((b, inc - done))
        else:
            cum = _quantize(inc * frac)
            out.append((b, cum - done))
            done = cum
    return out


def _quantize(x):
    """x rounded to a multiple of SPLIT_QUANTUM (half to even), for a float or an array alike."""
    r = np.round(x * _SCALE) / _SCALE
    return float(r) if isinstance(x, float) else r


RESET, DIP = "reset", "dip"


def increments(samples: Sequence[RawSample], *, max_gap: float,
               dip_tolerance: float = 0.0) -> Iterable[tuple[float, float, float, str]]:
    """(from, ts, increment, "reset" | "dip" | "") for each sample after the first, samples sorted by ts:
    the increment accrued over (from, ts] (from: the previous sample's time, or after a reset the new
    process's `_created` when it lies between the two samples)."""
    high = samples[0].value if samples else 0.0  # highest value since the last reset (or gap)
    for prev, cur in pairwise(samples):
        if cur.ts - prev.ts > max_gap:
            high = cur.value
            continue
        created_changed = (prev.created is not None and cur.created is not None
                           and cur.created != prev.created)
        if created_changed or cur.value < high * (1.0 - dip_tolerance):
            high = cur.value
            since = cur.created if cur.created is not None and prev.ts < cur.created < cur.ts else prev.ts
            yield since, cur.ts, cur.value, RESET
        elif cur.value < high:
            yield prev.ts, cur.ts, 0.0, DIP
        else:
            yield prev.ts, cur.ts, cur.value - high, ""
            high = cur.value


def ran_on(prev: RawSample, cur: RawSample, *, max_gap: float, dip_tolerance: float = 0.0) -> bool:
    """Whether two consecutive samples of an engine's restart series (its output-token counter) show the
    engine ran on between them: at most `max_gap` apart, its `_created` unchanged (where both have one)
    and no reset (a fall below (1 - dip_tolerance) x the earlier value), as `increments` tells a reset."""
    if cur.ts - prev.ts > max_gap or cur.ts <= prev.ts:
        return False
    if prev.created is not None and cur.created is not None and cur.created != prev.created:
        return False
    return not cur.value < prev.value * (1.0 - dip_tolerance)


def appeared_from(first: RawSample, prev_ts: float) -> RawSample | None:
    """The zero a counter series started from when it first appears at `first` on a target that ran on since
    its previous scrape at `prev_ts` (ran_on): the series was created after that scrape, so its first value
    is all increase. The zero lies at its `_created` when that falls between the two scrapes (the counts
    accrued from then, as after a reset), else at `prev_ts`. None when its `_created` says it existed at or
    before the previous scrape (it was there but not shown: what it counted before is unknown, not 0)."""
    if first.created is not None:
        if not math.isfinite(first.created) or first.created <= prev_ts:
            return None
        if first.created < first.ts:
            return RawSample(first.created, 0.0, first.created)
    return RawSample(prev_ts, 0.0, first.created)


@dataclass
class Increases:
    """Per-bucket increases of one series, and its resets and dips per bucket; `gaps`: the buckets that
    hold, whole, an increment over more than one bucket width of time without samples (a gap closed by
    the samples on both sides), with that interval's length in seconds."""

    by_bucket: dict[int, float]
    resets: dict[int, int]
    dips: dict[int, int]
    gaps: dict[int, float] = field(default_factory=dict)


def bucket_increases(samples: Sequence[RawSample], *, width: int, max_gap: float, first_bucket: int,
                     last_bucket: int, dip_tolerance: float = 0.0, split_within: float | None = None) -> Increases:
    """Per-bucket increases for buckets first_bucket..last_bucket (starts, inclusive), with resets and dips
    (counted in the bucket of the sample that shows them). Each increment is split between the buckets its
    interval overlaps (split_shares / split_increment).

    A bucket in range with at least a part of an increment appears in the result (an increase of 0 is real
    data); a bucket without one does not (no data, never 0)."""
    out = Increases({}, {}, {})
    for since, ts, inc, event in increments(samples, max_gap=max_gap, dip_tolerance=dip_tolerance):
        shares = split_shares(since, ts, width, split_within=split_within)
        for b, part in split_increment(inc, shares):
            if first_bucket <= b <= last_bucket:
                out.by_bucket[b] = out.by_bucket.get(b, 0.0) + part  # type: ignore[operator]
        b = bucket_start(ts, width)
        if len(shares) == 1 and ts - since > width and first_bucket <= b <= last_bucket:
            out.gaps[b] = max(out.gaps.get(b, 0.0), ts - since)
        if first_bucket <= b <= last_bucket:
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
