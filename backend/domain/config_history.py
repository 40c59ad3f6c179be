"""A pool's configuration history from what collection saw (pure): which buckets changed its drafter, K or
vLLM version, and what the pool's current values become.

Only buckets at least as new as the pool's latest stored bucket count: re-collecting or back-filling an
older range (whatever K, drafter or version it ran then) records no change and never moves the current
value back. A value first seen for a pool (nothing stored yet) is set without a change."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from backend.domain.records import PoolSeen

FIELDS = ("num_spec_tokens", "drafter", "vllm_version")


class Change(NamedTuple):
    at: datetime  # the start of the first bucket that reported the new value
    field: str
    old: str
    new: str


def detect(stored: dict[str, str | int | None], last_seen: datetime | None,
           seen: PoolSeen) -> tuple[list[Change], dict[str, str | int]]:
    """(changes, new current values) of one pool. `stored` holds its current values (None: unknown),
    `last_seen` the end of its latest stored bucket (None: a new pool)."""
    width = timedelta(seconds=seen.width)
    current = dict(stored)
    changes: list[Change] = []
    updates: dict[str, str | int] = {}
    for obs in sorted(seen.config, key=lambda c: c.start):
        if last_seen is not None and obs.start + width < last_seen:
            continue  # older than what is stored: history, not news
        for name in FIELDS:
            value = getattr(obs, name)
            if value is None or value == current.get(name):
                continue
            if current.get(name) is not None:
                changes.append(Change(obs.start, name, str(current[name]), str(value)))
            current[name] = updates[name] = value
    return changes, updates
