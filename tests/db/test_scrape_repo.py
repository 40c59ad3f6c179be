"""Stored scrape layouts: one row per shape, reused by digest, kept while a scrape refers to them or one was
stored lately, deleted once neither holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from backend.db import scrape_repo
from backend.db.session import session_scope
from backend.scrape.parse import parse
from backend.services.scrape import raw_row
from tests.support.hostile import exposition
from tests.support.stack import factory_for

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _layouts(factory) -> dict[bytes, datetime]:
    with factory() as session:
        return {bytes(d): used for d, used in session.execute(text("select digest, last_used from scrape_layouts"))}


def test_a_layout_reused_after_a_long_pause_is_refreshed_and_survives_the_prune(fresh_db_url):
    factory = factory_for(fresh_db_url)
    row_a = raw_row("http://a/metrics", T0.timestamp(), parse(exposition("model-a", 1)))
    row_b = raw_row("http://b/metrics", T0.timestamp(), parse(exposition("model-b", 1)))
    with session_scope(factory) as session:
        scrape_repo.add_raw_scrapes(session, [row_a, row_b], now=T0)
    assert _layouts(factory) == {row_a["digest"]: T0, row_b["digest"]: T0}
    # within REFRESH the stored time stays (no write per scrape)
    later = T0 + scrape_repo.REFRESH / 2
    with session_scope(factory) as session:
        scrape_repo.add_raw_scrapes(session, [raw_row("http://a/metrics", later.timestamp(),
                                                      parse(exposition("model-a", 2)))], now=later)
    assert _layouts(factory)[row_a["digest"]] == T0
    # two hours on: the raw rows are gone; target a scrapes again just before the prune, b does not
    back = T0 + timedelta(hours=2)
    with session_scope(factory) as session:
        session.execute(text("delete from raw_scrapes"))
        scrape_repo.add_raw_scrapes(session, [raw_row("http://a/metrics", back.timestamp(),
                                                      parse(exposition("model-a", 3)))], now=back)
    with session_scope(factory) as session:
        scrape_repo.prune_raw_scrapes(session, before=back - timedelta(hours=1))
    assert _layouts(factory) == {row_a["digest"]: back}
    with factory() as session:
        assert session.execute(text("select count(*) from raw_scrapes")).scalar() == 1
