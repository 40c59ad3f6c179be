"""Pools' configuration history (table config_changes): record a change, list the changes of a window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from backend.db.models import Pool
from backend.db.models_config import CONFIG_FIELDS, ConfigChange

MAX_LISTED = 500


@dataclass(frozen=True)
class ChangeRow:
    id: int
    at: datetime
    pool_id: int
    model_name: str
    traffic_class: str
    spec_mode: str
    field: str
    old_value: str | None
    new_value: str | None
    source: str
    note: str | None
    by: str | None


def record(session: Session, *, pool_id: int, at: datetime, field: str, old: str | None, new: str | None,
           source: str, now: datetime, note: str | None = None, by: str | None = None) -> bool:
    """Store one change (the same pool, instant and field twice: kept once). True when it was new."""
    if field not in CONFIG_FIELDS:
        raise ValueError(f"field must be one of {', '.join(CONFIG_FIELDS)}, got {field!r}")
    res = session.execute(insert(ConfigChange).values(
        pool_id=pool_id, at=at, field=field, old_value=old, new_value=new, source=source, note=note, by=by,
        recorded_at=now).on_conflict_do_nothing(index_elements=["pool_id", "at", "field"]))
    return bool(res.rowcount)


_BEFORE = text("""
    SELECT p.id, p.model_name, p.traffic_class, p.spec_mode, p.last_seen, p.num_spec_tokens, p.drafter,
           p.vllm_version FROM pools p
    JOIN unnest(CAST(:m AS varchar[]), CAST(:c AS varchar[]), CAST(:s AS varchar[])) AS k(m, c, s)
      ON p.model_name = k.m AND p.traffic_class = k.c AND p.spec_mode = k.s
    WHERE p.origin = 'engine'
""")


@dataclass(frozen=True)
class StoredConfig:
    pool_id: int
    last_seen: datetime
    values: dict  # num_spec_tokens, drafter, vllm_version (None: unknown)


def current_config(session: Session, keys: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], StoredConfig]:
    """(model, class, spec mode) -> the stored engine pool's id, latest bucket end and current values."""
    if not keys:
        return {}
    rows = session.execute(_BEFORE, {"m": [k[0] for k in keys], "c": [k[1] for k in keys],
                                     "s": [k[2] for k in keys]})
    return {(m, c, s): StoredConfig(pid, last, {"num_spec_tokens": k, "drafter": d, "vllm_version": v})
            for pid, m, c, s, last, k, d, v in rows}


def changes(session: Session, *, start: datetime, end: datetime, model_name: str | None = None,
            limit: int = MAX_LISTED) -> list[ChangeRow]:
    """Changes with start <= at < end (of one model, or all), oldest first, at most `limit`."""
    stmt = (select(ConfigChange.id, ConfigChange.at, Pool.id, Pool.model_name, Pool.traffic_class, Pool.spec_mode,
                   ConfigChange.field, ConfigChange.old_value, ConfigChange.new_value, ConfigChange.source,
                   ConfigChange.note, ConfigChange.by)
            .join(Pool, Pool.id == ConfigChange.pool_id)
            .where(ConfigChange.at >= start, ConfigChange.at < end)
            .order_by(ConfigChange.at, Pool.model_name, Pool.traffic_class, Pool.spec_mode, ConfigChange.field)
            .limit(limit))
    if model_name is not None:
        stmt = stmt.where(Pool.model_name == model_name)
    return [ChangeRow(*r) for r in session.execute(stmt).all()]
