"""Direct scrape, single minutes: a scrape interval straddling a minute boundary is split between the two
buckets in proportion to time, through the real finalizer (stored raw scrapes, two runs, real Postgres),
and the buckets of the run still add up exactly to the counter's change."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import text

from backend.config import Settings
from backend.db import scrape_repo
from backend.db.session import session_scope
from backend.scrape.parse import ParsedScrape
from backend.services import scrape
from tests.support.stack import factory_for

DRAFTS = "vllm:spec_decode_num_drafts_total"
TARGET = "http://vllm-a:8000/metrics"


def _store(url: str, samples: list[tuple[float, float]]) -> None:
    rows = [scrape.raw_row(TARGET, t, ParsedScrape([(DRAFTS, {"model_name": "m"}, v)], [])) for t, v in samples]
    with session_scope(factory_for(url)) as session:
        scrape_repo.add_raw_scrapes(session, rows, now=datetime.now(UTC))


def _drafts(url: str) -> dict[float, float]:
    with factory_for(url)() as session:
        return {r[0]: r[1] for r in session.execute(text(
            "select extract(epoch from b.bucket_start)::float8, b.drafts from pool_buckets b "
            "order by b.bucket_start"))}


def test_straddling_intervals_split_in_proportion_across_two_finalize_runs(fresh_db_url):
    # scrapes every 15 s at 10, 25, 40, 55 s past minute M: 30 drafts an interval (2 a second); the intervals
    # (55, 70], (115, 130] and (175, 190] straddle a minute, 5 s before it and 10 s after
    m = int(datetime.now(UTC).timestamp()) // 60 * 60 - 600
    samples = [(m + 10 + 15 * i, 1000.0 + 30 * i) for i in range(14)]  # m+10 .. m+205
    _store(fresh_db_url, samples)
    s = Settings(database_url=fresh_db_url, source="scrape", bucket_seconds=60, settle_seconds=30,
                 scrape_interval_seconds=15, scrape_timeout_seconds=10, initial_lookback_seconds=60,
                 scrape_targets=[{"url": TARGET, "labels": {}}])
    assert scrape.split_lookahead(s) == 19.0  # 30 s settle - 10 s deadline - 1 s: a 10 s overhang is split
    at = lambda t: datetime.fromtimestamp(t, UTC)
    # run 1 finalizes (m, m+60]: its 90 from three whole intervals and 10 of the straddling (55, 70]
    scrape.finalize(factory_for(fresh_db_url), s, now=at(m + 60 + 30))
    assert _drafts(fresh_db_url) == {m: 90.0 + 10.0}
    # run 2 finalizes (m+60, m+180]: each minute 20 (the rest of its first interval) + 90 + 10
    scrape.finalize(factory_for(fresh_db_url), s, now=at(m + 180 + 30))
    got = _drafts(fresh_db_url)
    assert got == {m: 100.0, m + 60: 20.0 + 90.0 + 10.0, m + 120: 20.0 + 90.0 + 10.0}  # 2 a second: the truth
    # the run telescopes: counter at m+190 less counter at m+10, less the 20 of (175, 190] after m+180
    assert sum(got.values()) == (samples[12][1] - samples[0][1]) - 20.0
    # before the split, the whole of each straddling interval went to the later minute: 90, 120, 120
    assert got[m] != 90.0


def test_an_interval_past_the_lookahead_goes_whole_to_the_later_bucket(fresh_db_url):
    # a 40 s interval whose later sample is 30 s past the boundary (> 19 s): not split, as before
    m = int(datetime.now(UTC).timestamp()) // 60 * 60 - 600
    _store(fresh_db_url, [(m + 20, 0.0), (m + 50, 60.0), (m + 90, 140.0), (m + 110, 180.0)])
    s = Settings(database_url=fresh_db_url, source="scrape", bucket_seconds=60, settle_seconds=30,
                 scrape_interval_seconds=15, scrape_timeout_seconds=10, initial_lookback_seconds=60,
                 scrape_targets=[{"url": TARGET, "labels": {}}])
    factory = factory_for(fresh_db_url)
    scrape.finalize(factory, s, now=datetime.fromtimestamp(m + 60 + 30, UTC))
    scrape.finalize(factory, s, now=datetime.fromtimestamp(m + 120 + 30, UTC))
    assert _drafts(fresh_db_url) == {m: 60.0, m + 60: 80.0 + 40.0}
    assert scrape.split_lookahead(s) == 19.0
