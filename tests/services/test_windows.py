from datetime import UTC, datetime

import pytest

from backend.services.windows import (
    InvalidWindow,
    Range,
    auto_step,
    check_span,
    make_grid,
    parse_duration,
    parse_instant,
    resolve_range,
    verdict_bin_seconds,
)

NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


@pytest.mark.parametrize("text,seconds", [("5m", 300), ("1h", 3600), ("24h", 86400), ("7d", 604800),
                                          ("30d", 2592000), ("90s", 90), ("120", 120)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "-1h", "0m", "1.5h", "h"])
def test_bad_durations(text):
    with pytest.raises(InvalidWindow):
        parse_duration(text)


def test_instants():
    assert parse_instant("2026-11-30T12:00:00Z", name="start") == datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert parse_instant("2026-11-30T12:00:00", name="start").tzinfo is not None
    with pytest.raises(InvalidWindow, match="RFC 3339"):
        parse_instant("yesterday", name="start")


def test_resolve_range_rules():
    rng = resolve_range(now=NOW, window="1h", start=None, end=None, default_seconds=60, max_seconds=10**9)
    assert rng.seconds == 3600 and rng.end == NOW
    with pytest.raises(InvalidWindow, match="after start"):
        resolve_range(now=NOW, window=None, start="2026-11-30T13:00:00Z", end="2026-11-30T12:00:00Z",
                      default_seconds=60, max_seconds=10**9)
    with pytest.raises(InvalidWindow, match="maximum"):
        resolve_range(now=NOW, window="30d", start=None, end=None, default_seconds=60, max_seconds=86400)


def test_auto_step_is_a_multiple_of_the_bucket_width():
    assert auto_step(30 * 86400, bucket_seconds=60, max_points=1500) == 1740  # 29 min: 1490 points
    assert auto_step(3600, bucket_seconds=60, max_points=1500) == 60
    with pytest.raises(InvalidWindow):
        check_span(90, name="step", bucket_seconds=60)
    with pytest.raises(InvalidWindow):
        check_span(30, name="step", bucket_seconds=60)


def test_grid_is_aligned_to_the_step():
    grid = make_grid(Range(datetime(2026, 11, 30, 11, 0, 30, tzinfo=UTC), NOW), step=600)
    times = grid.times()
    assert times[0] == datetime(2026, 11, 30, 11, 10, tzinfo=UTC)
    assert times[-1] == datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert grid.count == 6


@pytest.mark.parametrize("seconds,width,expected", [
    (3600, 60, 60),  # 1 h: 60 one-minute bins
    (86400, 60, 480),  # 24 h: 180 bins of 8 min (raw buckets)
    (7 * 86400, 60, 3600),  # 7 d: 56 min would be 180 bins; whole hours instead, 168 bins from the rollups
    (30 * 86400, 60, 4 * 3600),  # 30 d: 180 bins of 4 h
    (7 * 86400, 7, 3360),  # a width that does not divide an hour: no rounding to hours
])
def test_verdict_bins_are_whole_hours_once_they_are_long(seconds, width, expected):
    got = verdict_bin_seconds(seconds, bucket_seconds=width, max_samples=180)
    assert got == expected and seconds / got <= 180
