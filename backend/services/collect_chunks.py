"""How a Prometheus collection cycle is cut into chunks: from the cursor to the last complete bucket, each
chunk at most `backfill_chunk_buckets` and `prometheus_max_points` buckets, and small enough that the
estimated samples its largest query loads stay under `prometheus_max_samples` (chunk_buckets_for_samples)."""

from __future__ import annotations

import logging
import math
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db.models import HistogramLayout, Pool
from backend.db.models_replicas import Replica
from backend.prom.queries import PoolLabels, gauge_queries, raw_queries

log = logging.getLogger("specwatch.collect")


def latest_complete_end(now: float, width: int, settle: float) -> int:
    """End of the newest bucket that is complete at `now`."""
    return int(math.floor((now - settle) / width) * width)


def plan_chunks(first_end: int, last_end: int, width: int, chunk_buckets: int) -> list[tuple[int, int]]:
    """Split bucket ends first_end..last_end (inclusive, step width) into chunks of at most chunk_buckets."""
    out = []
    step = chunk_buckets * width
    start = first_end
    while start <= last_end:
        end = min(last_end, start + step - width)
        out.append((start, end))
        start = end + width
    return out


def samples_per_series(buckets: int, width: int, scrape_interval: float) -> int:
    """Samples one series costs a range query over `buckets` bucket ends (step = width, every expression
    over a `[width s]` window): the raw samples its windows read (back to back they span buckets x width
    seconds, the chunk plus the lookback window before its first end: one sample per scrape interval, plus
    one on the left edge), plus the one evaluated point per step the engine keeps. Prometheus and Mimir
    count kept points against max-samples, VictoriaMetrics counts samples read: the sum bounds either."""
    return buckets + math.ceil(buckets * width / scrape_interval) + 1


def raw_samples_per_series(buckets: int, width: int, scrape_interval: float, lookback: float) -> int:
    """Samples one series costs a raw read of `buckets` buckets: its samples over the chunk and the lookback
    before it (one per scrape interval, plus one on the left edge). No evaluated points: an instant query."""
    return math.ceil((buckets * width + lookback) / scrape_interval) + 1


def raw_lookback(s: Settings) -> float:
    """How far before a chunk's first bucket a raw read reaches: the gap over which the sample before it
    still counts, and the coarse replica bucket that may complete in the chunk."""
    return s.scrape_max_gap_seconds + (s.replica_grain or 0)


def largest_query_series(pools: int, max_bounds: int, max_positions: int) -> int:
    """Series answered by a cycle's largest query: one per pool and `le` of a histogram's `_bucket` query
    (finite bounds + Inf) or one per pool and position of the per-position counter, whichever is more."""
    return pools * max(max_bounds + 1, max_positions, 1)


def chunk_buckets_for_samples(max_samples: int, series: int, width: int, scrape_interval: float, cap: int,
                              lookback: float | None = None) -> int:
    """The most buckets (1 .. cap) a chunk may hold so that series x samples_per_series <= max_samples
    (raw_samples_per_series with a `lookback`: the raw path). cap when there is no limit (max_samples 0) or
    no series is known; 1 when even one bucket is over."""
    def cost(n: int) -> int:
        if lookback is None:
            return samples_per_series(n, width, scrape_interval)
        return raw_samples_per_series(n, width, scrape_interval, lookback)

    def fits(n: int) -> bool:
        return series * cost(n) <= max_samples

    if max_samples <= 0 or series <= 0 or fits(cap):
        return cap
    lo, hi = 0, cap  # lo fits (0: a sentinel), hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return max(lo, 1)


def chunk_size(s: Settings, series: int, cap: int) -> int:
    lookback = raw_lookback(s) if s.prometheus_increases == "raw" else None
    n = chunk_buckets_for_samples(s.prometheus_max_samples, series, s.bucket_seconds,
                                  s.prometheus_scrape_interval_seconds, cap, lookback)
    one = (samples_per_series(1, s.bucket_seconds, s.prometheus_scrape_interval_seconds) if lookback is None else
           raw_samples_per_series(1, s.bucket_seconds, s.prometheus_scrape_interval_seconds, lookback))
    if n == 1 and series * one > s.prometheus_max_samples > 0:
        log.warning("one bucket of %d series is estimated over prometheus_max_samples=%d; querying it anyway",
                    series, s.prometheus_max_samples)
    return n


def known_series(session: Session, *, raw: bool = False) -> int:
    """largest_query_series from what earlier cycles stored: every pool (all shards: an overestimate), the
    longest histogram layout, the largest K. With `raw` (answers per series, not per pool): every replica
    stored, if more than the pools. 0 before the first cycle."""
    layout = select(func.max(func.cardinality(HistogramLayout.bounds))).scalar_subquery()
    pools, positions, bounds = session.execute(
        select(func.count(Pool.id), func.max(Pool.num_spec_tokens), layout)).one()
    if raw:
        pools = max(pools or 0, session.scalar(select(func.count(Replica.id))) or 0)
    return largest_query_series(pools or 0, bounds or 0, positions or 0)


def cursor_range(cursor: datetime | None, *, now: float, s: Settings) -> tuple[int, int, str]:
    width = s.bucket_seconds
    last_end = latest_complete_end(now, width, s.settle_seconds)
    if cursor is None:
        return last_end - s.initial_lookback_seconds + width, last_end, "first cycle"
    first_end = int(cursor.timestamp()) + width
    oldest = last_end - s.max_gap_seconds + width
    if first_end < oldest:
        return oldest, last_end, f"gap older than {s.max_gap_seconds}s skipped"
    return first_end, last_end, ""


def raw_requests_per_chunk() -> int:
    """Requests one chunk of the raw path makes, whatever the number of pools (without sharding): the
    raw series, the gauges and the drafter / vLLM version labels (config_query)."""
    return len(raw_queries(PoolLabels())) + len(gauge_queries(PoolLabels(), 60)) + 1
