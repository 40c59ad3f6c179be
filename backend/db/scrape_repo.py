"""The direct-scrape source's stored scrapes: layouts (shared, by digest) and columnar raw scrapes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from backend.db.models import RawScrape, ScrapeLayout
from backend.db.session import driver

# a layout's last_used is moved at most this often; one unused for longer than the raw retention plus this
# (so no raw scrape refers to it) is deleted with the raw scrapes
REFRESH = timedelta(minutes=10)


def layout_ids(session: Session, shapes: dict[bytes, str], *, now: datetime) -> dict[bytes, int]:
    """The id of each layout (digest -> shape text), stored if new; a stored one's last_used refreshed when
    older than REFRESH (so that pruning never deletes a layout a new scrape uses)."""
    if not shapes:
        return {}
    found = session.execute(text("SELECT digest, id, last_used FROM scrape_layouts WHERE digest = ANY(:d)"),
                            {"d": list(shapes)}).all()
    ids = {bytes(d): i for d, i, used in found if used >= now - REFRESH}
    stale = [i for d, i, used in found if used < now - REFRESH]
    if stale:  # locks the rows: a concurrent prune then sees the new last_used and keeps them
        for d, i in session.execute(text("UPDATE scrape_layouts SET last_used = :now WHERE id = ANY(:ids) "
                                         "RETURNING digest, id"), {"now": now, "ids": stale}):
            ids[bytes(d)] = i
    missing = [d for d in shapes if d not in ids]
    if missing:
        stmt = insert(ScrapeLayout).values([{"digest": d, "shape": shapes[d], "last_used": now} for d in missing])
        stmt = stmt.on_conflict_do_update(index_elements=["digest"], set_={"last_used": stmt.excluded.last_used})
        for d, i in session.execute(stmt.returning(ScrapeLayout.digest, ScrapeLayout.id)):
            ids[bytes(d)] = i
    return ids


def add_raw_scrapes(session: Session, rows: Sequence[dict], *, now: datetime) -> None:
    """Store scrapes: dicts of target, scraped_at, digest, shape, sample_values, created_values (bytes)."""
    if not rows:
        return
    ids = layout_ids(session, {r["digest"]: r["shape"] for r in rows}, now=now)
    session.execute(insert(RawScrape).values([
        {"target": r["target"], "scraped_at": r["scraped_at"], "layout_id": ids[r["digest"]],
         "sample_values": r["sample_values"], "created_values": r["created_values"]} for r in rows
    ]).on_conflict_do_nothing())


def raw_scrape_rows(session: Session, *, since: datetime, until: datetime) -> list[tuple]:
    """(target, scraped_at as unix seconds, layout id, sample values, created values) of the scrapes in
    (since, until], in time order. Read in binary through the driver: a fleet's finalize reads thousands of
    rows a minute, and SQLAlchemy's row handling and the hex text of bytea cost more than the rest."""
    with driver(session) as conn:
        cur = conn.cursor(binary=True)
        cur.execute("SELECT target, extract(epoch FROM scraped_at)::float8, layout_id, sample_values, "
                    "created_values FROM raw_scrapes WHERE scraped_at > %s AND scraped_at <= %s "
                    "ORDER BY scraped_at", (since, until))
        return cur.fetchall()


def layout_digests(session: Session, ids: Iterable[int]) -> dict[int, bytes]:
    return {i: bytes(d) for i, d in session.execute(
        text("SELECT id, digest FROM scrape_layouts WHERE id = ANY(:ids)"), {"ids": list(ids)})}


def layout_shapes(session: Session, ids: Iterable[int]) -> dict[int, tuple[bytes, str]]:
    return {i: (bytes(d), s) for i, d, s in session.execute(
        text("SELECT id, digest, shape FROM scrape_layouts WHERE id = ANY(:ids)"), {"ids": list(ids)})}


def prune_raw_scrapes(session: Session, *, before: datetime) -> int:
    """Delete the raw scrapes before `before`, and the layouts no scrape uses that were last used before it."""
    n = session.execute(text("DELETE FROM raw_scrapes WHERE scraped_at < :b"), {"b": before}).rowcount or 0
    session.execute(text("DELETE FROM scrape_layouts l WHERE l.last_used < :b AND NOT EXISTS "
                         "(SELECT 1 FROM raw_scrapes r WHERE r.layout_id = l.id)"), {"b": before - REFRESH})
    return n
