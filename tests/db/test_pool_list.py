"""backend.db.pool_list: the remembered list is the list as last read; an unchanged read keeps its PoolRows."""

from __future__ import annotations

from datetime import timedelta

from psycopg import RawCursor
from sqlalchemy import text

from backend.db import pool_list
from backend.db.session import driver
from tests.factories import make_pool


def _raw(db) -> list[tuple]:
    with driver(db) as conn:
        return RawCursor(conn).execute(pool_list.SQL, binary=True).fetchall()


def test_an_unchanged_list_keeps_its_rows_and_a_changed_row_is_read_anew(db, now) -> None:
    a = make_pool(db, traffic_class="chat", last_seen=now)
    make_pool(db, traffic_class="code", last_seen=now)
    db.flush()
    first = pool_list.read(db)
    assert [p.traffic_class for p in first] == ["chat", "code"] and pool_list.recent(db) is first
    assert pool_list.fresh(db, _raw(db)) is first  # same rows: the same PoolRows, not decoded again
    db.execute(text("UPDATE pools SET last_seen = :t WHERE id = :id"), {"t": now + timedelta(minutes=1), "id": a.id})
    changed = pool_list.fresh(db, _raw(db))
    assert changed is not first and changed[0].last_seen == now + timedelta(minutes=1)
    assert pool_list.recent(db) is changed
