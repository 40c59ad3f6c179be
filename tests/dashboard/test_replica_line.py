"""The overview's "updated" line says where its numbers were read when a read replica is configured."""

from __future__ import annotations

from datetime import UTC, datetime

from backend.schemas.common import ReadsRead
from dashboard import components as c

AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def test_the_line_gives_the_standbys_lag_or_the_fallback():
    plain = c.updated(AT, "last 1 h").children
    assert "standby" not in plain and "primary" not in plain
    lagging = c.updated(AT, "last 1 h", reads=ReadsRead(reads_from="standby", lag_seconds=12.4)).children
    assert lagging == plain + " · read from the standby, 12 s behind the primary"
    unknown = c.updated(AT, "last 1 h", reads=ReadsRead(reads_from="standby")).children
    assert unknown.endswith("read from the standby, lag unknown")
    down = c.updated(AT, "last 1 h", reads=ReadsRead(reads_from="primary", fallback="standby unreachable")).children
    assert down == plain + " · standby unavailable, read from the primary"
