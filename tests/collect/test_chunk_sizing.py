"""Chunk sizing of the Prometheus source: points per series and the estimated samples per query (pure)."""

from __future__ import annotations

import pytest

from backend.config import Settings
from backend.services.collect_chunks import (
    chunk_buckets_for_samples,
    largest_query_series,
    plan_chunks,
    raw_lookback,
    raw_samples_per_series,
    samples_per_series,
)


def test_samples_per_series_counts_points_raw_samples_and_the_lookback_edge():
    # 720 one-minute buckets scraped every 15 s: 720 points + 720 x 60 / 15 raw samples + 1 edge sample
    assert samples_per_series(720, 60, 15.0) == 720 + 2880 + 1 == 3601
    assert samples_per_series(1, 60, 15.0) == 1 + 4 + 1
    # a scrape interval that does not divide the bucket rounds the raw samples up
    assert samples_per_series(7, 5, 15.0) == 7 + 3 + 1
    assert samples_per_series(10, 5, 1.0) == 10 + 50 + 1


def test_raw_samples_per_series_counts_the_chunk_and_its_lookback_no_points():
    # 720 one-minute buckets at 15 s, the sample before them searched 300 s back: (43,200 + 300) / 15 + 1
    assert raw_samples_per_series(720, 60, 15.0, 300.0) == 2900 + 1
    assert raw_samples_per_series(1, 60, 15.0, 300.0) == 24 + 1
    assert raw_samples_per_series(1, 5, 1.0, 10.0) == 15 + 1
    # the defaults: the gap limit plus the replica rows' grain (600 s) that a chunk may reach back for
    assert raw_lookback(Settings(_env_file=None)) == 300.0 + 600
    assert raw_lookback(Settings(_env_file=None, replica_bucket_seconds=0, scrape_max_gap_seconds=120)) == 120.0
    # 20,000 series under 50 M: 2,500 samples each -> (60 n + 900) / 15 + 1 <= 2500 -> n = 609
    n = chunk_buckets_for_samples(50_000_000, 20_000, 60, 15.0, 720, lookback=900.0)
    assert n == 609 and 20_000 * raw_samples_per_series(609, 60, 15.0, 900.0) <= 50_000_000
    assert 20_000 * raw_samples_per_series(610, 60, 15.0, 900.0) > 50_000_000


def test_largest_query_series_is_the_histogram_le_or_the_position_query():
    assert largest_query_series(pools=40, max_bounds=17, max_positions=5) == 40 * 18
    assert largest_query_series(pools=40, max_bounds=3, max_positions=7) == 40 * 7
    assert largest_query_series(pools=40, max_bounds=0, max_positions=0) == 40
    assert largest_query_series(pools=0, max_bounds=17, max_positions=5) == 0


def test_not_binding_keeps_the_cap():
    # the defaults: 720 buckets of 60 s, 1,000 series -> 3.6 M samples, far under 50 M
    assert chunk_buckets_for_samples(50_000_000, 1000, 60, 15.0, 720) == 720
    assert chunk_buckets_for_samples(0, 10**9, 60, 15.0, 720) == 720  # 0 = no limit
    assert chunk_buckets_for_samples(100, 0, 60, 15.0, 720) == 720  # nothing known yet
    assert chunk_buckets_for_samples(1000 * 3601, 1000, 60, 15.0, 720) == 720  # exactly at the limit


def test_binding_gives_the_largest_chunk_under_the_limit():
    # 20,000 series, 50 M: each series may cost 2,500 samples; n + 4n + 1 <= 2500 -> n = 499
    n = chunk_buckets_for_samples(50_000_000, 20_000, 60, 15.0, 720)
    assert n == 499
    assert 20_000 * samples_per_series(499, 60, 15.0) == 49_920_000  # <= 50 M
    assert 20_000 * samples_per_series(500, 60, 15.0) == 50_020_000  # > 50 M
    # ceil on the raw samples: 10 series, 100 samples -> n + ceil(n/3) + 1 <= 10 -> n = 6 (7 costs 11)
    assert chunk_buckets_for_samples(100, 10, 5, 15.0, 720) == 6
    # one bucket over the limit: still one bucket per chunk (the query may be refused, never skipped)
    assert chunk_buckets_for_samples(1, 10, 5, 1.0, 720) == 1


def test_binding_limit_splits_the_plan_into_more_chunks():
    cap = chunk_buckets_for_samples(100, 10, 5, 15.0, 720)
    assert plan_chunks(0, 5 * 19, 5, cap) == [(0, 25), (30, 55), (60, 85), (90, 95)]
    assert plan_chunks(0, 5 * 19, 5, 720) == [(0, 95)]


def test_settings():
    s = Settings(_env_file=None)
    assert (s.prometheus_max_samples, s.prometheus_scrape_interval_seconds) == (50_000_000, 15.0)
    assert Settings(_env_file=None, prometheus_max_samples=0).prometheus_max_samples == 0
    with pytest.raises(ValueError):
        Settings(_env_file=None, prometheus_max_samples=-1)
    with pytest.raises(ValueError):
        Settings(_env_file=None, prometheus_scrape_interval_seconds=0)
