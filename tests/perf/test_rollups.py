"""Hourly rollups: reads routed to them give exactly the raw-bucket answers, across a partition (day)
boundary, with dirty hours, and after a late back-fill into an already rolled-up hour.

Values are integers (and quarters for _sum), so float sums are exact in any order and equality is `==`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries, rollups, routing, spec_series
from backend.db import repositories as repo
from backend.db.histogram_totals import histogram_totals
from backend.db.session import make_engine, make_sessionmaker, session_scope, tune
from backend.domain import gridsum
from backend.domain.bands import BAND_EDGES
from backend.domain.records import ConfigSeen, PoolKey, PoolSeen
from backend.services import rollup, series

MIDNIGHT = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)  # a partition boundary inside the data
BOUNDS = [0.01, 0.05, 0.1, 0.5]


def _rows(pool_id: int, layout: int, start: datetime, minutes: int, *, k: int | None, scale: int = 1) -> list[dict]:
    out = []
    for i in range(minutes):
        t = start + timedelta(minutes=i)
        v = (i * 7 + pool_id * 3) % 11 + 1
        h = [v, 2 * v, 3 * v, 4 * v, 5 * v]
        row = {"pool_id": pool_id, "bucket_start": t, "bucket_seconds": 60, "source": "prometheus",
               "collected_at": start, "est_weight_tokens": None, "est_verify_steps": None,
               "est_accepted_tokens": None, "est_draft_tokens": None,
               "generation_tokens": float(10 * v * scale), "prompt_tokens": None,
               "finished_requests": float(v % 3), "preemptions": None,
               "running_mean": None if i % 97 == 0 else float((i // 45) % 40 + 1),
               "restarts": 1 if i % 500 == 0 else None,
               "itl_layout_id": layout, "itl_buckets": [float(x * scale) for x in h], "itl_sum": v * 0.25 * scale,
               "itl_count": float(h[-1] * scale), "tpot_layout_id": None, "tpot_buckets": None, "tpot_sum": None,
               "tpot_count": None, "ttft_layout_id": None, "ttft_buckets": None, "ttft_sum": None, "ttft_count": None}
        if k:
            pp = [float(max(0, v - j) * scale) for j in range(k)]
            row |= {"drafts": float(v * scale), "draft_tokens": float(k * v * scale), "accepted_tokens": sum(pp),
                    "accepted_per_pos": None if i % 250 == 0 else pp}
        else:
            row |= {"drafts": None, "draft_tokens": None, "accepted_tokens": None, "accepted_per_pos": None}
        out.append(row)
    return out


@pytest.fixture
def factory(fresh_db_url: str):
    engine = make_engine(fresh_db_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def seeded(factory) -> dict:
    start = MIDNIGHT - timedelta(hours=30, minutes=13)
    with session_scope(factory) as s:
        ids = repo.upsert_pools(s, {PoolKey("m", "chat", "eagle3"): PoolSeen(start, start, 60, (ConfigSeen(start, 3),)),
                                    PoolKey("m", "chat", "off"): PoolSeen(start, start, 60)})
        layout = repo.layout_ids(s, [tuple(BOUNDS)])[tuple(BOUNDS)]
        spec, base = ids[PoolKey("m", "chat", "eagle3")], ids[PoolKey("m", "chat", "off")]
        repo.upsert_buckets(s, _rows(spec, layout, start, 60 * 55, k=3) + _rows(base, layout, start, 60 * 55, k=None))
    return {"ids": [spec, base], "spec": spec, "layout": layout, "start": start}


def _roll(factory) -> None:
    while True:
        with session_scope(factory) as s:
            if not rollup.maintain(s).more:
                return


def _answers(s: Session, ids: list[int], a: datetime, b: datetime) -> tuple:
    totals = queries.window_totals(s, pool_ids=ids, start=a, end=b, bucket_seconds=60, n_pos=3, band_edges=BAND_EDGES)
    totals = sorted(totals, key=lambda r: (r.pool_id, -1 if r.band_index is None else r.band_index))
    first, last = int(a.timestamp()) // 3600 * 3600 + 3600, int(b.timestamp()) // 3600 * 3600
    rolling = _series(s, ids, gridsum.TimeGrid(first, 3600, 6 * 3600, (last - first) // 3600 + 1))
    hourly = _series(s, ids, gridsum.TimeGrid(first, 7200, 7200, (last - first) // 7200 + 1))
    m0 = int(a.timestamp()) // 60 * 60 + 60
    minutes = (int(b.timestamp()) - m0) // 60 + 1
    per_minute = _series(s, ids, gridsum.TimeGrid(m0, 60, 60, minutes))  # per-bucket arrays of the hours
    odd = _series(s, ids, gridsum.TimeGrid(m0 // 300 * 300 + 300, 300, 17 * 60, minutes // 5))
    rolling = (rolling, per_minute, odd)
    bins = queries.histogram_bins(s, pool_ids=ids, families=("itl", "tpot"), start=a, end=b, bucket_seconds=60,
                                  bin_seconds=4 * 3600, n_counts=5)
    whole = [(t.pool_id, t.layout_id, t.counts.tolist(), t.sum, t.count, t.buckets)
             for t in histogram_totals(s, pool_ids=ids, family="itl", start=a, end=b, bucket_seconds=60,
                                     n_counts=len(BOUNDS) + 1)]
    assert whole
    bins = (bins, whole)
    lat = queries.latency_bins(s, pool_ids=ids, start=a, end=b, bucket_seconds=60, target_bins=12)
    # the time bins of the speedup check add up to the window's ITL and TPOT sums per pool and band
    for t in totals:
        mine = [x for x in lat if (x.pool_id, x.band_index) == (t.pool_id, t.band_index)]
        for f in ("itl_sum", "itl_count", "tpot_sum", "tpot_count"):
            assert sum(getattr(x, f) or 0 for x in mine) == pytest.approx(getattr(t, f) or 0, rel=1e-12)
    assert len({x.bin for x in lat}) >= 4
    lat = sorted((x.pool_id, -1 if x.band_index is None else x.band_index, x.bin, x.itl_sum, x.itl_count, x.tpot_sum,
                  x.tpot_count) for x in lat)
    return totals, rolling, hourly, bins, lat


def _series(s: Session, ids: list[int], grid: gridsum.TimeGrid) -> list:
    """Per pool: drafts, draft tokens, accepted tokens per grid point (None = nothing reported), as the
    acceptance series read them (backend.db.spec_series + backend.domain.gridsum). Read twice: as served
    (these short ranges flatten every packed row) and with every packed row one grain wide kept as a run
    (spec_series.MIN_RUN = 0), which must give the same answer."""
    out = _series_read(s, ids, grid)
    saved, spec_series.MIN_RUN = spec_series.MIN_RUN, 0
    try:
        assert _series_read(s, ids, grid) == out
    finally:
        spec_series.MIN_RUN = saved
    return out


def _series_read(s: Session, ids: list[int], grid: gridsum.TimeGrid) -> list:
    raw = spec_series.spec_counters(s, pool_ids=ids, a=grid.start, b=grid.last, bucket_seconds=60, grain=grid.grain)
    parts = series.grain_parts(raw, sorted(ids), grid, spec_series.COUNTERS)
    out = []
    for name in spec_series.COUNTERS:
        sums = gridsum.point_sums(parts[name], grid)
        out.append([[None if np.isnan(v) else float(v) for v in row] for row in sums])
    return out


def _routed_and_raw(factory, ids: list[int], a: datetime, b: datetime) -> tuple:
    with factory() as s:
        routed = _answers(s, ids, a, b)
        with routing.raw_only():
            return routed, _answers(s, ids, a, b)


def _check_equal(factory, ids, a, b) -> tuple:
    routed, raw = _routed_and_raw(factory, ids, a, b)
    assert routed == raw
    assert routed[0] and routed[1] and routed[3][0]["itl"]
    assert all(v is not None for v in routed[1][1][0][0][1:])  # the spec pool reported every minute
    return routed


RANGES = [
    (MIDNIGHT - timedelta(hours=29, minutes=47), MIDNIGHT + timedelta(hours=21, minutes=13, seconds=30)),
    (MIDNIGHT - timedelta(hours=5, minutes=1), MIDNIGHT + timedelta(hours=3)),
    (MIDNIGHT - timedelta(hours=2), MIDNIGHT + timedelta(hours=2)),
    # two whole UTC days (11-28 and 11-29) between partial ones: whole-hour reads take both from pool_spec_daily
    (MIDNIGHT - timedelta(hours=30, minutes=5), MIDNIGHT + timedelta(hours=24, minutes=40)),
]


@pytest.mark.parametrize("a,b", RANGES)
def test_rolled_up_answers_equal_raw_across_a_partition_boundary(factory, seeded, a, b) -> None:
    _check_equal(factory, seeded["ids"], a, b)  # nothing rolled up yet: every hour dirty, all raw
    _roll(factory)
    with factory() as s:
        assert rollups.dirty_count(s) == 0
        assert s.execute(text("SELECT count(*) FROM pool_buckets_hourly")).scalar_one() > 50
        assert {"pool_buckets_p20261128", "pool_buckets_p20261129"} <= {n for n, _ in rollups.partitions(s)}
    _check_equal(factory, seeded["ids"], a, b)
    with factory() as s:
        _assert_days_sum_their_hours(s)


def _assert_days_sum_their_hours(s: Session) -> int:
    """Every pool_spec_daily row holds exactly its day's pool_spec_hourly totals (NaN: no hour row or value)
    and, when all its hour rows pack per-bucket columns of one width, those columns back to back (NaN: no
    hour row or no value; NULL: no hour has the counter); every day with hour rows has a day row. Returns
    the number of day rows."""
    days = {(p, d): row for p, d, *row in s.execute(text(
        "SELECT pool_id, day_start, drafts_h, draft_tokens_h, accepted_h, bucket_seconds, "
        "drafts_at, draft_tokens_at, accepted_at FROM pool_spec_daily"))}
    want: dict = {}
    hours: dict = {}
    for p, h, w, *values in s.execute(text(
            "SELECT pool_id, hour_start, bucket_seconds, drafts, draft_tokens, accepted_tokens, "
            "drafts_at, draft_tokens_at, accepted_at FROM pool_spec_hourly")):
        day = h.replace(hour=0)
        slots = want.setdefault((p, day), np.full((3, 24), np.nan))
        slots[:, h.hour] = [np.nan if v is None else v for v in values[:3]]
        hours.setdefault((p, day), {})[h.hour] = (w, values[3:])
    assert days.keys() == want.keys()
    for key, (*packed, width, d_at, dt_at, a_at) in days.items():
        got = np.array([np.frombuffer(x, ">f8") for x in packed])
        np.testing.assert_array_equal(got, want[key])
        widths = {w for w, _ in hours[key].values()}
        assert width == (widths.pop() if len(widths) == 1 and 0 not in widths else 0)
        for j, col in enumerate((d_at, dt_at, a_at)):
            if width == 0 or all(v[j] is None for _, v in hours[key].values()):
                assert col is None
                continue
            nan_hour = np.full(3600 // width, np.nan)
            expect = np.concatenate([np.frombuffer(hours[key][i][1][j], ">f8")
                                     if i in hours[key] and hours[key][i][1][j] is not None else nan_hour
                                     for i in range(24)])
            np.testing.assert_array_equal(np.frombuffer(col, ">f8"), expect)
    return len(days)


def test_whole_days_are_read_from_the_daily_rows_unless_one_of_their_hours_is_dirty(factory, seeded) -> None:
    """Negative control for pool_spec_daily: a wrong day row shows in a whole-hour read, a dirty hour of that
    day sends the whole day back to its hours (exact again), and the next rollup run rebuilds the row."""
    _roll(factory)
    a, b = RANGES[3]
    day = MIDNIGHT - timedelta(days=1)
    with session_scope(factory) as s:
        assert _assert_days_sum_their_hours(s) == 2 * 4  # 2 pools x days 11-27 .. 11-30
        s.execute(text("UPDATE pool_spec_daily SET accepted_h = overlay(accepted_h PLACING float8send(12345.0) "
                       "FROM 5 * 8 + 1 FOR 8) WHERE day_start = :d AND pool_id = :p"), {"d": day, "p": seeded["spec"]})
    routed, raw = _routed_and_raw(factory, seeded["ids"], a, b)
    assert routed[1][0] != raw[1][0] and routed[2] != raw[2]  # rolling and 2-hour sums read the day row
    assert routed[1][1] == raw[1][1] and routed[0] == raw[0]  # per-minute arrays and window totals do not
    _dirty_day_reads_its_hours_until_rebuilt(factory, seeded, day, a, b)


def _dirty_day_reads_its_hours_until_rebuilt(factory, seeded: dict, day: datetime, a: datetime, b: datetime) -> None:
    """One bucket of another hour of a day with a corrupt day row, written again: the hour is dirty, the
    day row is not read (exact answers), and the next rollup run rebuilds it."""
    with session_scope(factory) as s:
        repo.upsert_buckets(s, _rows(seeded["spec"], seeded["layout"], day + timedelta(hours=20, minutes=7), 1, k=3))
        assert rollups.dirty_count(s) == 1
    _check_equal(factory, seeded["ids"], a, b)
    _roll(factory)
    _check_equal(factory, seeded["ids"], a, b)
    with factory() as s:
        _assert_days_sum_their_hours(s)


def test_per_bucket_reads_take_whole_days_from_the_day_rows_unless_one_of_their_hours_is_dirty(factory, seeded
                                                                                                ) -> None:
    """Negative control for pool_spec_daily's per-bucket columns: a wrong slot in a day row shows in a
    per-minute read of a range holding that whole day (and only there: the hour row is right), a dirty
    hour of the day sends the day back to its hours (exact again), and the rollup run rebuilds the row."""
    _roll(factory)
    a, b = RANGES[3]
    day = MIDNIGHT - timedelta(days=1)
    with session_scope(factory) as s:
        assert s.execute(text("SELECT count(*) FROM pool_spec_daily WHERE bucket_seconds = 60 "
                              "AND accepted_at IS NOT NULL")).scalar_one() == 4  # the spec pool's 4 days
        s.execute(text("UPDATE pool_spec_daily SET accepted_at = overlay(accepted_at PLACING float8send(12345.0) "
                       "FROM (5 * 60 + 7) * 8 + 1 FOR 8) WHERE day_start = :d AND pool_id = :p"),
                  {"d": day, "p": seeded["spec"]})
    routed, raw = _routed_and_raw(factory, seeded["ids"], a, b)
    assert routed[1][1] != raw[1][1] and routed[1][2] != raw[1][2]  # the per-minute and 5-minute grids
    assert routed[1][0] == raw[1][0] and routed[2] == raw[2]  # whole-hour sums read the hour totals
    minute = int((day + timedelta(hours=5, minutes=8)).timestamp())  # slot 5 * 60 + 7 ends at 05:08
    m0 = int(a.timestamp()) // 60 * 60 + 60
    assert routed[1][1][2][0][(minute - m0) // 60] == 12345.0  # accepted tokens of the spec pool
    _dirty_day_reads_its_hours_until_rebuilt(factory, seeded, day, a, b)


def test_rollup_retention_deletes_whole_days_of_hours_and_day_rows(factory, seeded) -> None:
    _roll(factory)
    with session_scope(factory) as s:
        rollups.delete_rollups_before(s, MIDNIGHT + timedelta(hours=5))  # inside 11-29: the day is kept whole
        assert s.execute(text("SELECT min(hour_start) FROM pool_spec_hourly")).scalar_one() == MIDNIGHT
        assert s.execute(text("SELECT min(hour_start) FROM pool_buckets_hourly")).scalar_one() == MIDNIGHT
        assert s.execute(text("SELECT min(day_start) FROM pool_spec_daily")).scalar_one() == MIDNIGHT
        assert _assert_days_sum_their_hours(s) == 2 * 2


def test_reads_do_use_the_rollups(factory, seeded) -> None:
    """Negative control: a (deliberately) wrong rollup row shows up in the routed answer."""
    _roll(factory)
    with session_scope(factory) as s:
        s.execute(text("UPDATE pool_buckets_hourly SET drafts = drafts + 1, itl_count = itl_count + 1 "
                       "WHERE hour_start = :h"), {"h": MIDNIGHT + timedelta(hours=2)})
        s.execute(text("UPDATE pool_spec_hourly SET drafts = drafts + 1, "
                       "drafts_at = overlay(drafts_at PLACING float8send(12345.0) FROM 6 * 8 + 1 FOR 8) "
                       "WHERE hour_start = :h"), {"h": MIDNIGHT + timedelta(hours=2)})
    routed, raw = _routed_and_raw(factory, seeded["ids"], *RANGES[0])
    assert raw[0] != routed[0]
    assert raw[3][1] != routed[3][1]  # whole-window histogram totals read the hour rows
    assert raw[1][0] != routed[1][0]  # hour totals
    assert raw[1][1] != routed[1][1]  # per-bucket arrays
    assert raw[1][2] != routed[1][2]


def test_late_backfill_into_a_rolled_up_hour(factory, seeded) -> None:
    _roll(factory)
    a, b = RANGES[0]
    before = _check_equal(factory, seeded["ids"], a, b)
    hour = MIDNIGHT - timedelta(hours=3)
    with session_scope(factory) as s:  # a back-fill rewrites 20 minutes of a rolled-up hour with other values
        repo.upsert_buckets(s, _rows(seeded["spec"], seeded["layout"], hour + timedelta(minutes=10), 20, k=3, scale=5))
        assert rollups.dirty_count(s) == 1
    during = _check_equal(factory, seeded["ids"], a, b)  # dirty hour read raw: still exact
    assert during != before
    _roll(factory)
    with factory() as s:
        assert rollups.dirty_count(s) == 0
    assert _check_equal(factory, seeded["ids"], a, b) == during


def _scan_loops(plan: dict) -> list[int]:
    """Executions of each Append over pool_buckets partitions in an EXPLAIN (ANALYZE, FORMAT JSON) plan."""
    out, kids = [], plan.get("Plans", [])
    if plan["Node Type"] == "Append" and any(k.get("Relation Name", "").startswith("pool_buckets_p") for k in kids):
        out.append(plan["Actual Loops"])
    return out + [n for k in kids for n in _scan_loops(k)]


def test_dirty_hours_are_read_one_scan_per_run_of_consecutive_hours(factory, seeded) -> None:
    """Dirty hours in runs (two consecutive hours across midnight, and single hours, in both pools) are
    exact, and the raw buckets are read once per run: 3 runs, 3 index-range scans. Joining the queue's rows
    to pool_buckets instead let the planner seq-scan every pool's buckets of the range and probe the queue
    per bucket (35-45 s for a 30-day summary of 4 pools while a back-fill waited for the rollup task)."""
    _roll(factory)
    a, b = MIDNIGHT - timedelta(hours=10), MIDNIGHT + timedelta(hours=10)  # whole hours: no edges
    before = _check_equal(factory, seeded["ids"], a, b)
    spec, base = seeded["spec"], seeded["ids"][1]
    with session_scope(factory) as s:  # rewritten with other values: the hours from -1 h, 0 h and +3 h; -5 h of base
        for pool, k, first, minutes in ((spec, 3, MIDNIGHT - timedelta(hours=1), 120),
                                        (spec, 3, MIDNIGHT + timedelta(hours=3, minutes=59), 1),
                                        (base, None, MIDNIGHT - timedelta(hours=4, minutes=30), 7)):
            repo.upsert_buckets(s, _rows(pool, seeded["layout"], first, minutes, k=k, scale=3))
        assert rollups.dirty_count(s) == 4
    during = _check_equal(factory, seeded["ids"], a, b)
    assert during != before
    with factory() as s:
        hours = routing.whole_hours(a.timestamp(), b.timestamp())
        src, params = routing.source("b.pool_id, 1 AS n", "b.pool_id, b.buckets", hours, width=60)
        tune(s)
        plan = s.execute(text("EXPLAIN (ANALYZE, FORMAT JSON) " + src), params | {"ids": seeded["ids"]}).scalar_one()
        assert _scan_loops(plan[0]["Plan"]) == [3]
        got = s.execute(text(f"SELECT pool_id, sum(n) FROM ({src}) AS x GROUP BY pool_id ORDER BY pool_id"),
                        params | {"ids": seeded["ids"]}).all()
        assert got == [(p, 20 * 60) for p in sorted(seeded["ids"])]  # every minute of both pools, none twice
    _roll(factory)
    assert _check_equal(factory, seeded["ids"], a, b) == during


def _two_minute_hour(factory, pool_id: int, hour: datetime) -> None:
    """Rewrite one hour of a pool as 2-minute buckets (a collector run with another width), then roll up."""
    with session_scope(factory) as s:
        s.execute(text("DELETE FROM pool_buckets WHERE pool_id = :p AND bucket_start >= :h AND bucket_start < :e "
                       "AND extract(minute FROM bucket_start)::int % 2 = 1"),
                  {"p": pool_id, "h": hour, "e": hour + timedelta(hours=1)})
        s.execute(text("UPDATE pool_buckets SET bucket_seconds = 120 WHERE pool_id = :p AND bucket_start >= :h "
                       "AND bucket_start < :e"), {"p": pool_id, "h": hour, "e": hour + timedelta(hours=1)})
    _roll(factory)


@pytest.mark.parametrize("a,b", [RANGES[2], RANGES[3]])
def test_an_hour_of_another_bucket_width_is_read_from_its_buckets(factory, seeded, a, b) -> None:
    """An hour whose buckets are 2 minutes wide (a collector run with another width): its pool_spec_hourly
    row packs 30 slots, not the 60 a 1-minute grain places, so per-bucket reads take that hour from its raw
    buckets (spec_raw_hours' per-bucket branch) and whole-hour reads its totals; both equal raw reads. Its
    day's row has no per-bucket columns (bucket_seconds 0), so where that day is whole in the range
    (RANGES[3]) a per-bucket read takes the day's other hours from their hour rows."""
    hour = MIDNIGHT + timedelta(hours=1)  # inside RANGES[2], and inside 11-29, a whole day of RANGES[3]
    _two_minute_hour(factory, seeded["spec"], hour)
    with factory() as s:
        assert rollups.dirty_count(s) == 0
        assert s.execute(text("SELECT bucket_seconds FROM pool_spec_hourly WHERE pool_id = :p AND hour_start = :h"),
                         {"p": seeded["spec"], "h": hour}).scalar_one() == 120
        assert s.execute(text("SELECT bucket_seconds, accepted_at IS NULL FROM pool_spec_daily "
                              "WHERE pool_id = :p AND day_start = :d"), {"p": seeded["spec"], "d": MIDNIGHT}).one() == (0, True)
        _assert_days_sum_their_hours(s)
    routed, raw = _routed_and_raw(factory, seeded["ids"], a, b)
    assert routed == raw
    drafts = routed[1][1][0][0]  # per minute, the spec pool
    assert drafts.count(None) == 30  # no bucket ends on that hour's odd minutes
    assert len(drafts) == (b - a) // timedelta(minutes=1)


def test_storage_task_creates_ahead_and_drops_by_retention(factory, seeded) -> None:
    s_ = Settings(_env_file=None, raw_retention_days=1, partitions_ahead_days=3)
    now = MIDNIGHT + timedelta(days=1, hours=5)
    _roll(factory)
    with session_scope(factory) as s:
        hourly_before = s.execute(text("SELECT count(*) FROM pool_buckets_hourly")).scalar_one()
        res = rollup.storage(s, settings=s_, now=now)
        assert "pool_buckets_p20261203" in {n for n, _ in rollups.partitions(s)}
        assert res.dropped and all(n < "pool_buckets_p20261129" for n in res.dropped)
        assert s.execute(text("SELECT min(bucket_start) FROM pool_buckets")).scalar_one() >= MIDNIGHT
        # rollups outlive the raw partitions; the drop marks nothing dirty
        assert s.execute(text("SELECT count(*) FROM pool_buckets_hourly")).scalar_one() == hourly_before
        assert rollups.dirty_count(s) == 0


def test_routed_reads_plan_only_the_partitions_of_their_range(factory, seeded, monkeypatch) -> None:
    """The raw branches of a routed read (edges, and the hours read raw because they are dirty) carry the
    range's constant bounds, so the planner keeps only the day partitions of the range: joined to the dirty
    queue alone, every partition of pool_buckets was planned (38 for a month of data, ~1.5 ms a read)."""
    _roll(factory)
    with session_scope(factory) as s:  # a dirty hour inside the range: the dirty branch is in the plan
        repo.upsert_buckets(s, _rows(seeded["spec"], seeded["layout"], MIDNIGHT + timedelta(hours=3, minutes=10), 5, k=3))
        assert rollups.dirty_count(s) == 1
    a, b = MIDNIGHT + timedelta(hours=1, minutes=30), MIDNIGHT + timedelta(hours=6, minutes=30)  # inside 11-29
    with factory() as s:
        assert len(rollups.partitions(s)) > 2
        hours = routing.whole_hours(a.timestamp(), b.timestamp(), min_hours=1)
        src, params = routing.select("b.pool_id", "b.pool_id", hours, width=60)
        captured: dict = {}
        monkeypatch.setattr(spec_series, "pipelined_rows",
                            lambda _s, sql, p, lead=None: captured.update(sql=sql, params=p) or (None, []))
        spec_series.spec_counters(s, pool_ids=seeded["ids"], a=int(a.timestamp()), b=int(b.timestamp()),
                                  bucket_seconds=60, grain=60)
        for sql, p in ((src, params | {"ids": seeded["ids"]}), (captured["sql"], captured["params"])):
            plan = "\n".join(r[0] for r in s.execute(text("EXPLAIN " + sql), p))
            assert set(re.findall(r"\bpool_buckets_p\d{8}\b", plan)) == {"pool_buckets_p20261129"}, plan


def test_series_reads_are_prepared_once_and_never_planned_again(factory, seeded) -> None:
    """spec_counters prepares its statement at the first execution and runs it on the generic plan from
    then on (tune(generic_plans=True)): Postgres would otherwise plan each of the first five executions
    per connection again, ~1.4 ms for a month-long routed read. Both reads still equal the raw answers.
    (Each _series reads twice: four executions of the one statement.)"""
    _roll(factory)
    a = RANGES[3][0]
    grid = gridsum.TimeGrid(int(a.timestamp()) // 3600 * 3600 + 7 * 3600, 3600, 6 * 3600, 40)  # 11-28 whole
    with factory() as s:
        first = _series(s, seeded["ids"], grid)
        again = _series(s, seeded["ids"], grid)
        stats = s.execute(text("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                               "WHERE statement LIKE '%pool_spec_daily%'")).all()
        with routing.raw_only():
            raw = _series(s, seeded["ids"], grid)
    assert first == again == raw
    assert stats == [(4, 0)]


def test_native_query_numbers_each_name_once() -> None:
    """`:name` -> `$n` in first-use order; a repeated name is one parameter; casts (`::`) stay."""
    sql, names = spec_series.native_query("SELECT :b::int + :a, :b, '\\x00'::bytea, x::text FROM t WHERE y = :a_1")
    assert sql == "SELECT $1::int + $2, $1, '\\x00'::bytea, x::text FROM t WHERE y = $3"
    assert names == ("b", "a", "a_1")


def test_binary_rows_tunes_its_own_transaction_in_one_round_trip(factory) -> None:
    """The tune settings ride in the read's pipeline: they hold for the statement (same transaction) and
    end with it; parameters bind by name whatever their order, a repeated name once."""
    with factory() as s:
        before = s.execute(text("SELECT current_setting('plan_cache_mode')")).scalar_one()
        s.commit()
        rows = spec_series.binary_rows(
            s, "SELECT current_setting('jit'), current_setting('plan_cache_mode'), "
               "current_setting('max_parallel_workers_per_gather'), :x::int * 10 + :y::int, :x::int", {"y": 3, "x": 4})
        assert rows == [("off", "force_generic_plan", "0", 43, 4)]
        s.commit()
        assert s.execute(text("SELECT current_setting('plan_cache_mode')")).scalar_one() == before == "auto"


def test_packed_rows_with_a_value_missing_for_a_slot_are_refused() -> None:
    """A packed row whose counter bytes do not hold one value per slot must not be read out of step."""
    ends = np.array([3600, 7200], ">i8").tobytes()
    good = np.array([1.0, 2.0], ">f8").tobytes()
    row = (spec_series.HOUR_TOTALS, 1, ends, good, good, good)
    out = spec_series._columns([row], 60, ("draft_tokens",), grain=3600)
    assert out.end.tolist() == [3600, 7200] and out.draft_tokens.tolist() == [1.0, 2.0]
    short = (spec_series.HOUR_TOTALS, 1, ends, good, good[:8], good)
    with pytest.raises(ValueError, match="3 values for 4 slots"):  # batched with the good row
        spec_series._columns([row, short], 60, ("draft_tokens",), grain=3600)


def test_migration_0010_builds_the_day_rows_per_bucket_columns_as_the_rollup_task_does(factory, seeded,
                                                                                         fresh_db_url) -> None:
    """Migration 0010 fills the new per-bucket columns of existing day rows from their hours: down to 0009
    (the columns dropped) and up again gives exactly the rows the rollup task wrote, 2-minute hour included."""
    from alembic import command

    from backend.schema_version import alembic_config

    hour = MIDNIGHT + timedelta(hours=1)  # a day whose hours differ in width: no per-bucket columns
    _two_minute_hour(factory, seeded["spec"], hour)
    day_rows = "SELECT * FROM pool_spec_daily ORDER BY pool_id, day_start"
    with factory() as s:
        written = s.execute(text(day_rows)).all()
    assert len(written) == 8 and [r.bucket_seconds for r in written].count(0) == 1
    assert sum(r.accepted_at is not None for r in written) == 3  # the spec pool's other days
    cfg = alembic_config(fresh_db_url)
    cfg.attributes["configure_logger"] = False
    factory.kw["bind"].dispose()  # the migration alters the table: no pooled connection may hold it
    command.downgrade(cfg, "0009")
    with factory() as s:
        assert "accepted_at" not in set(s.execute(text(day_rows)).keys())
    command.upgrade(cfg, "head")
    with factory() as s:
        assert s.execute(text(day_rows)).all() == written


def test_an_hour_is_rolled_up_once_it_has_ended(factory, seeded) -> None:
    """The task leaves the hour still filling (and any later one) queued: reads take it raw, exactly as
    before, and it is rolled up by the first run after it ends, not at every collection."""
    now = MIDNIGHT + timedelta(hours=2, minutes=30)

    def queued(s: Session) -> tuple:
        return s.execute(text("SELECT min(hour_start), count(*) FROM rollup_dirty")).one()

    with session_scope(factory) as s:
        first = rollup.maintain(s, now=now)
        assert first.taken > 0 and first.more is False  # nothing else may be taken yet: no busy loop
        assert queued(s)[0] == MIDNIGHT + timedelta(hours=2)
        waiting = queued(s)[1]
        assert rollup.maintain(s, now=now + timedelta(minutes=29)).taken == 0  # the hour has not ended
    _check_equal(factory, seeded["ids"], *RANGES[2])  # 02:00-03:00 and later read raw: the same answers
    with session_scope(factory) as s:
        assert rollup.maintain(s, now=MIDNIGHT + timedelta(hours=3)).taken == 2  # it ended: both pools' hour
        assert queued(s) == (MIDNIGHT + timedelta(hours=3), waiting - 2)
    _check_equal(factory, seeded["ids"], *RANGES[2])


@pytest.mark.parametrize("bin_seconds", [120, 480, 3600])
def test_histogram_bins_read_in_chunks_of_pools_equal_one_statement(factory, seeded, monkeypatch, bin_seconds) -> None:
    _roll(factory)
    ids = seeded["ids"]
    a, b = MIDNIGHT - timedelta(hours=7, minutes=3), MIDNIGHT + timedelta(hours=2)

    def read(chunk: int) -> dict:
        monkeypatch.setattr(queries, "HISTOGRAM_CHUNK", chunk)
        with factory() as s:
            return queries.histogram_bins(s, pool_ids=list(reversed(ids)), families=("itl", "tpot"), start=a, end=b,
                                          bucket_seconds=60, bin_seconds=bin_seconds, n_counts=5)

    whole, chunked = read(1000), read(1)
    assert chunked == whole
    assert {b.pool_id for b in whole["itl"]} == set(ids) and whole["tpot"] == []
    assert len(whole["itl"]) == 2 * len({b.bin_end for b in whole["itl"]}) > 10
