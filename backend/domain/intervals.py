"""Time spans: the total covered by possibly overlapping spans (each instant counted once)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime


def covered_seconds(spans: Iterable[tuple[datetime, datetime]]) -> float:
    """Seconds inside at least one [start, end) span: two alerts firing over the same 8 minutes are 8
    minutes in alert, not 16. Empty or inverted spans count nothing."""
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted((a, b) for a, b in spans if b > a):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += (cur_end - cur_start).total_seconds()
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += (cur_end - cur_start).total_seconds()
    return total
