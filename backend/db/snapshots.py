"""Fleet snapshots: the precomputed /fleet bodies, one per window length."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from backend.db.models_perf import FleetSnapshot


def get(session: Session, window_seconds: int) -> FleetSnapshot | None:
    return session.scalar(select(FleetSnapshot).where(FleetSnapshot.window_seconds == window_seconds))


def version(session: Session, window_seconds: int) -> tuple[datetime, str] | None:
    """(when the window's snapshot was computed, its row version: Postgres' xmin, new on every write) without
    reading the body; None when there is none."""
    row = session.execute(text("SELECT generated_at, xmin::text FROM fleet_snapshots WHERE window_seconds = :w"),
                          {"w": window_seconds}).first()
    return None if row is None else (row[0], row[1])


def generated(session: Session) -> dict[int, datetime]:
    """When each stored window's snapshot was computed (window seconds -> generated_at)."""
    rows = session.execute(select(FleetSnapshot.window_seconds, FleetSnapshot.generated_at))
    return {int(w): at for w, at in rows}


def put(session: Session, window_seconds: int, generated_at: datetime, body: bytes, *,
        future_after: datetime | None = None) -> None:
    """Upsert; an older snapshot never replaces a newer one (overlapping task runs), except one stamped
    after `future_after` (a clock that ran ahead: it would otherwise block every later run until then)."""
    stmt = insert(FleetSnapshot).values(window_seconds=window_seconds, generated_at=generated_at, body=body)
    newer = FleetSnapshot.generated_at < stmt.excluded.generated_at
    session.execute(stmt.on_conflict_do_update(
        index_elements=[FleetSnapshot.window_seconds],
        set_={"generated_at": stmt.excluded.generated_at, "body": stmt.excluded.body},
        where=newer if future_after is None else or_(newer, FleetSnapshot.generated_at > future_after)))
