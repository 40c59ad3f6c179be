"""Time windows and steps: parse `5m`/`1h`/`7d` durations and ISO-8601 instants, align and validate.

A point at time t covers (t - span, t], span being the step (or the rolling window). Points sit on
multiples of the step since the epoch (as Grafana aligns Prometheus range queries), so the same range
asked twice gives the same points.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from backend.schemas.common import INSTANT_PATTERN
from backend.services.errors import InvalidParameter

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# the forms the OpenAPI document declares (backend.schemas.common): nothing else is read
_DURATION = re.compile(r"([0-9]{1,12})([smhdw])?", re.ASCII)  # DURATION_PATTERN, not empty, with groups
_INSTANT = re.compile(INSTANT_PATTERN, re.ASCII)
_UNIX = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?", re.ASCII)
# instants outside these years are refused: nothing is measured there, and date arithmetic near year 1
# or 9999 (a window before the start, a grid rounded past the end) would overflow
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
MAX_DURATION_SECONDS = 100 * 366 * 86400


class InvalidWindow(InvalidParameter):
    """A window, step or instant the API refuses (422)."""

    code = "invalid_window"


@dataclass(frozen=True)
class Range:
    start: datetime
    end: datetime

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


def parse_duration(text: str, *, name: str = "window") -> int:
    """`90s`, `5m`, `1h`, `24h`, `7d`, `2w` (or plain seconds) -> seconds (> 0): common.DURATION_PATTERN."""
    m = _DURATION.fullmatch(text)
    if not m:
        raise InvalidWindow(f"{name}={text!r}: expected a duration such as 5m, 1h, 24h, 7d or 30d")
    seconds = int(m.group(1)) * _UNITS[m.group(2) or "s"]
    if seconds <= 0:
        raise InvalidWindow(f"{name}={text!r}: must be positive")
    if seconds > MAX_DURATION_SECONDS:
        raise InvalidWindow(f"{name}={text!r}: longer than 100 years")
    return seconds


def parse_instant(text: str, *, name: str) -> datetime:
    """RFC 3339 (seconds, fraction and offset optional; naive means UTC) or unix seconds, between 1970 and
    2200: common.INSTANT_PATTERN, the form the OpenAPI document gives; any other form is refused."""
    if not text or not _INSTANT.fullmatch(text):
        raise InvalidWindow(f"{name}={text!r}: expected an RFC 3339 time such as 2026-11-30T12:00:00Z or unix "
                            f"seconds")
    try:
        if _UNIX.fullmatch(text):
            value = datetime.fromtimestamp(float(text), tz=UTC)
        else:
            value = datetime.fromisoformat(text.upper())  # Python 3.11 reads `Z`
    except (ValueError, OverflowError, OSError):  # the form is right; the day is not in the calendar, or the
        # number of seconds is beyond what the platform reads
        raise InvalidWindow(f"{name}={text!r}: no such time (between {EARLIEST:%Y-%m-%d} and "
                            f"{LATEST:%Y-%m-%d})") from None
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    if not EARLIEST <= value <= LATEST:
        raise InvalidWindow(f"{name}={text!r}: must be between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}")
    return value


def resolve_range(
    *, now: datetime, window: str | None, start: str | None, end: str | None, default_seconds: int,
    max_seconds: int,
) -> Range:
    """Combine `window`, `start` and `end`: end defaults to now, start to end - window."""
    end_t = parse_instant(end, name="end") if end else now
    if start:
        start_t = parse_instant(start, name="start")
        if window:
            raise InvalidWindow("give either start or window, not both")
    else:
        seconds = parse_duration(window) if window else default_seconds
        if seconds > max_seconds:
            raise InvalidWindow(f"range longer than the maximum of {max_seconds // 86400} days")
        start_t = end_t - timedelta(seconds=seconds)
    if end_t <= start_t:
        raise InvalidWindow(f"end ({end_t.isoformat()}) must be after start ({start_t.isoformat()})")
    if (end_t - start_t).total_seconds() > max_seconds:
        raise InvalidWindow(f"range longer than the maximum of {max_seconds // 86400} days")
    return Range(start_t, end_t)


def auto_step(range_seconds: float, *, bucket_seconds: int, max_points: int) -> int:
    """The smallest multiple of the bucket width giving at most max_points points."""
    return max(1, math.ceil(range_seconds / max_points / bucket_seconds)) * bucket_seconds


def verdict_bin_seconds(range_seconds: float, *, bucket_seconds: int, max_samples: int) -> int:
    """Time bins of the latency verdict: about max_samples of them (never more), and whole hours once a
    bin would be half an hour or longer, so the hourly rollups serve them (7 d: 168 bins of 1 h instead of
    180 of 56 min read from 10,080 raw buckets per pool)."""
    step = auto_step(range_seconds, bucket_seconds=bucket_seconds, max_points=max_samples)
    if step >= 1800 and 3600 % bucket_seconds == 0:
        return math.ceil(step / 3600) * 3600
    return step


def check_span(seconds: int, *, name: str, bucket_seconds: int) -> int:
    if seconds < bucket_seconds or seconds % bucket_seconds:
        raise InvalidWindow(f"{name}={seconds}s must be a multiple of the bucket width ({bucket_seconds}s)")
    return seconds


@dataclass(frozen=True)
class Grid:
    """Points t_first, t_first + step, ..., t_last (unix seconds), each covering (t - span, t]."""

    first: int
    last: int
    step: int
    span: int

    @property
    def count(self) -> int:
        return 0 if self.last < self.first else (self.last - self.first) // self.step + 1

    def times(self) -> list[datetime]:
        return [datetime.fromtimestamp(self.first + i * self.step, tz=UTC) for i in range(self.count)]


def make_grid(rng: Range, *, step: int, span: int | None = None) -> Grid:
    """Aligned points inside [start, end]: the first multiple of step at or after start, the last at or
    before end (at least one point: end rounded up when the range holds no multiple)."""
    first = math.ceil(rng.start.timestamp() / step) * step
    last = math.floor(rng.end.timestamp() / step) * step
    last = max(last, first)
    return Grid(first=first, last=last, step=step, span=span or step)
