"""The columnar-scrapes migration turns stored raw scrapes (JSON samples) into layouts and float64 columns
and back, losing nothing: a bucket finalised after the upgrade equals the one the JSON rows give."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
from alembic import command
from psycopg.types.json import Jsonb
from sqlalchemy import text

from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.scrape.assemble import PoolNaming, assemble
from backend.scrape.layout import LayoutCache
from backend.scrape.parse import parse
from backend.services.scrape import stored_scrapes
from tests.db.conftest import cfg_for
from tests.support import assemble_reference as reference
from tests.support.hostile import exposition

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NAMING = PoolNaming("traffic_class", "spec_mode", "default", "on")


def _json_rows() -> list[tuple]:
    rows = []
    for target, model in (("http://a/metrics", "model-a"), ("http://b/metrics", "model-b")):
        for k in range(6):
            p = parse(exposition(model, k + (3 if k >= 4 else 0), created=1000.0 + (k >= 4), klass="chat"))
            rows.append((target, T0 + timedelta(seconds=15 * k + (1 if model == "model-b" else 0)),
                         [list(x) for x in p.samples], [list(x) for x in p.created]))
    return rows


def test_raw_scrapes_survive_the_upgrade_and_the_downgrade(empty_db: str):
    db = empty_db
    cfg = cfg_for(db)
    command.upgrade(cfg, "2026_12_02_cheap_inserts")
    rows = _json_rows()
    libpq = db.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(libpq) as conn:
        for target, at, samples, created in rows:
            conn.execute("INSERT INTO raw_scrapes (target, scraped_at, samples, created) VALUES (%s, %s, %s, %s)",
                         (target, at, Jsonb(samples), Jsonb(created)))
    command.upgrade(cfg, "head")

    engine = make_engine(db)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            scrapes = stored_scrapes(session, since=T0 - timedelta(hours=1), until=T0 + timedelta(hours=1),
                                     layouts=LayoutCache())
            assert session.execute(text("SELECT count(*) FROM scrape_layouts")).scalar() == 2
    finally:
        engine.dispose()
    assert [(sc.target, sc.ts) for sc in scrapes] == [(t, at.timestamp()) for t, at, _s, _c in
                                                      sorted(rows, key=lambda r: r[1])]
    first = int(T0.timestamp()) // 60 * 60
    kw = {"target_labels": {}, "width": 60, "first_bucket": first - 60, "last_bucket": first + 60, "max_gap": 300,
          "naming": NAMING, "dip_tolerance": 0.1}
    ref = reference.assemble([reference.RefScrape(t, at.timestamp(), s, c) for t, at, s, c in rows], **kw)
    new = assemble(scrapes, **kw)
    assert new == ref and len(new) == 4
    # the restart (a new _created) between the 4th and 5th scrape of each target is seen after the upgrade
    assert sum(r.restarts or 0 for r in new.values()) == 2

    command.downgrade(cfg, "2026_12_02_cheap_inserts")
    with psycopg.connect(libpq) as conn:
        back = conn.execute("SELECT target, scraped_at, samples, created FROM raw_scrapes "
                            "ORDER BY scraped_at").fetchall()
    assert [(t, at, s, c) for t, at, s, c in back] == sorted(rows, key=lambda r: r[1])
