"""Every SQL statement of the rollout tracker: tracks, measurements, the audit log, baseline snapshots,
and the alert history a weekly report needs. Nothing here commits; callers own the transaction."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select, text
from sqlalchemy.orm import Session

from backend.db.models_alerts import AlertStateRow, AlertTransition, OutboxMessage
from backend.db.models_rollout import BaselineSnapshot, RolloutEvent, RolloutMeasurement, RolloutTrack

EVAL_LOCK = 0x5FEC0A70  # advisory lock key: one rollout evaluation at a time


def try_eval_lock(session: Session) -> bool:
    """Transaction-scoped: an overlapping beat run skips instead of double-counting gate measurements."""
    return bool(session.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": EVAL_LOCK}).scalar())


def add(session: Session, row):
    session.add(row)
    session.flush()
    return row


# --- tracks ---------------------------------------------------------------------------------------------


def tracks(session: Session, *, model_name: str | None = None, for_update: bool = False) -> list[RolloutTrack]:
    stmt = select(RolloutTrack).order_by(RolloutTrack.model_name, RolloutTrack.scope)
    if model_name is not None:
        stmt = stmt.where(RolloutTrack.model_name == model_name)
    if for_update:
        stmt = stmt.with_for_update()
    return list(session.scalars(stmt))


def track(session: Session, model_name: str, scope: str, *, for_update: bool = False) -> RolloutTrack | None:
    stmt = select(RolloutTrack).where(RolloutTrack.model_name == model_name, RolloutTrack.scope == scope)
    if for_update:
        stmt = stmt.with_for_update()
    return session.scalar(stmt)


def track_by_id(session: Session, track_id: int) -> RolloutTrack | None:
    return session.get(RolloutTrack, track_id)


# --- audit and measurements -----------------------------------------------------------------------------


def events(session: Session, *, model_name: str | None = None, track_id: int | None = None,
           start: datetime | None = None, end: datetime | None = None, limit: int = 500) -> list[RolloutEvent]:
    """Newest first. `start`/`end` bound `at` as [start, end)."""
    stmt = select(RolloutEvent).order_by(RolloutEvent.at.desc(), RolloutEvent.id.desc()).limit(limit)
    if model_name is not None:
        stmt = stmt.join(RolloutTrack, RolloutTrack.id == RolloutEvent.track_id).where(
            RolloutTrack.model_name == model_name)
    if track_id is not None:
        stmt = stmt.where(RolloutEvent.track_id == track_id)
    if start is not None:
        stmt = stmt.where(RolloutEvent.at >= start)
    if end is not None:
        stmt = stmt.where(RolloutEvent.at < end)
    return list(session.scalars(stmt))


def stage_at(session: Session, track_id: int, at: datetime) -> RolloutEvent | None:
    """The last stage-setting event before `at` (what the track looked like then)."""
    return session.scalar(select(RolloutEvent).where(
        RolloutEvent.track_id == track_id, RolloutEvent.at < at, RolloutEvent.kind != "snapshot",
    ).order_by(RolloutEvent.at.desc(), RolloutEvent.id.desc()).limit(1))


def measurements(session: Session, *, track_id: int, limit: int = 200) -> list[RolloutMeasurement]:
    return list(session.scalars(select(RolloutMeasurement).where(RolloutMeasurement.track_id == track_id)
                                .order_by(RolloutMeasurement.at.desc(), RolloutMeasurement.id.desc()).limit(limit)))


# --- snapshots ------------------------------------------------------------------------------------------


def latest_snapshot(session: Session, model_name: str, traffic_class: str) -> BaselineSnapshot | None:
    return session.scalar(select(BaselineSnapshot).where(
        BaselineSnapshot.model_name == model_name, BaselineSnapshot.traffic_class == traffic_class,
    ).order_by(BaselineSnapshot.captured_at.desc(), BaselineSnapshot.id.desc()).limit(1))


def snapshots(session: Session, *, model_name: str | None = None) -> list[BaselineSnapshot]:
    stmt = select(BaselineSnapshot).order_by(BaselineSnapshot.model_name, BaselineSnapshot.traffic_class,
                                             BaselineSnapshot.captured_at.desc())
    if model_name is not None:
        stmt = stmt.where(BaselineSnapshot.model_name == model_name)
    return list(session.scalars(stmt))


# --- alerts (read-only, for the weekly report) ----------------------------------------------------------


def alert_history(session: Session, *, model_name: str, start: datetime,
                  end: datetime) -> list[tuple[AlertStateRow, list[AlertTransition]]]:
    """Alerts of a model that were firing at some point in [start, end): each with its transitions up to
    `end`, oldest first (enough to rebuild the firing intervals that overlap the window)."""
    states = list(session.scalars(select(AlertStateRow).where(
        AlertStateRow.labels["model"].astext == model_name,
        or_(AlertStateRow.firing_since.is_not(None), AlertStateRow.phase == "firing"),
    ).order_by(AlertStateRow.id)))
    out = []
    for st in states:
        trs = list(session.scalars(select(AlertTransition).where(
            AlertTransition.alert_id == st.id, AlertTransition.at < end,
        ).order_by(AlertTransition.at, AlertTransition.id)))
        if trs:
            out.append((st, trs))
    return out


def outbox_key_exists(session: Session, key: str) -> bool:
    return session.scalar(select(OutboxMessage.id).where(OutboxMessage.idempotency_key == key)) is not None
