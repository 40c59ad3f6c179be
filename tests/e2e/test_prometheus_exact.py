"""End to end, exact counts through Prometheus: the simulator serves bursty traffic, a real Prometheus scrapes
it every second, and the collector runs its cycles as the task does while, inside the run, the spec engine
restarts (counters to 0, `_created` changes) exactly on a bucket edge and Prometheus is stopped for
25 s. Over the run, every stored family sums to the exporter's own counter change, to the token.

The traffic comes in bursts (6 s of 16 running requests every 15 s), so the exporter is quiet at each
run edge and at the restart: the simulator's truth there is exactly what any scrape shows."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from backend.api.app import create_app
from backend.config import Settings
from backend.prom.client import PromClient, PromUnavailable
from backend.services.collect import run_prometheus
from backend.sim.server import start_in_thread
from tests.support import sim as simtruth
from tests.support.auth import bearer, make_token
from tests.support.stack import cursor_end, factory_for, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.prometheus]
WIDTH = 5
PERIOD, BURST = 15, 6  # a burst of BURST s every PERIOD s (offsets from the simulator's start)
QUIET = 10  # offset (mod PERIOD) of a bucket edge in the quiet part: 4 s after a burst, 5 s before the next
RESTART = QUIET + 3 * PERIOD  # the spec engine restarts exactly on a bucket edge, while quiet
OUTAGE = 25  # seconds Prometheus is down (several whole buckets without a sample)
MODEL = "m-bursty"
POOLS = {"chat-eagle3": ("chat", "eagle3"), "code-eagle3": ("code", "eagle3"), "chat-off": ("chat", "off")}
SCALARS = ("drafts", "draft_tokens", "accepted_tokens", "generation_tokens", "prompt_tokens", "finished_requests",
           "preemptions")
HISTS = ("itl", "tpot", "ttft")
COLUMNS = ", ".join((*SCALARS, "accepted_per_pos", *(f"{h}_{p}" for h in HISTS for p in ("buckets", "sum", "count")),
                     "restarts", "source"))


def scenario() -> dict:
    return simtruth.bursty_fleet(MODEL, period=PERIOD, burst=BURST,
                                 events=[{"pool": "chat-eagle3", "at": RESTART, "restart": True}])


def stored(url: str) -> dict[tuple[str, str, int], dict]:
    """{(class, mode, bucket start): {column: value}} of the model's rows."""
    eng = factory_for(url).kw["bind"]
    with eng.connect() as conn:
        rows = conn.execute(text(
            f"select p.traffic_class, p.spec_mode, extract(epoch from b.bucket_start)::bigint, {COLUMNS} "
            "from pool_buckets b join pools p on p.id = b.pool_id where p.model_name = :m"), {"m": MODEL}).all()
    names = [c.strip() for c in COLUMNS.split(",")]
    return {(r[0], r[1], r[2]): dict(zip(names, r[3:], strict=True)) for r in rows}


def runs(url: str) -> list[tuple]:
    eng = factory_for(url).kw["bind"]
    with eng.connect() as conn:
        return conn.execute(text("select status, error from collection_runs order by id")).all()


def add(a: list[float] | None, b: list[float] | None) -> list[float] | None:
    if b is None:
        return a
    return list(b) if a is None else [x + y for x, y in zip(a, b, strict=True)]


def test_stored_sums_equal_the_exporter_change_across_a_restart_and_a_prometheus_outage(
        prometheus_factory, fresh_db_url):
    start = math.floor(time.time() / PERIOD) * PERIOD  # bucket edges fall on offsets that are multiples of 5
    sim = start_in_thread(scenario(), seed=3, start=start)
    prom = prometheus_factory([{"target": sim.url, "metrics_path": "/metrics"}], scrape_interval="1s")
    s = Settings(_env_file=None, database_url=fresh_db_url, prometheus_url=prom.url, bucket_seconds=WIDTH,
                 settle_seconds=2, initial_lookback_seconds=120, replica_bucket_seconds=0)
    factory = factory_for(fresh_db_url)
    failed = []

    def cycle() -> None:
        try:
            run_prometheus(factory, PromClient(prom.url, timeout=10), s, now=datetime.now(UTC))
        except PromUnavailable as exc:  # the outage: recorded as a failed run, the cursor stays
            failed.append(str(exc))

    def collect_until(t: float) -> None:
        while time.time() < t:
            cycle()
            time.sleep(1.0)

    try:
        prom.wait_for_samples("vllm:generation_tokens_total", min_series=4)
        # the run starts on the first quiet edge with a sample before it
        first_edge = start + QUIET + PERIOD * math.ceil((time.time() + 1 - start - QUIET) / PERIOD)
        restart = start + RESTART
        assert first_edge < restart, "Prometheus came up after the restart: the run would not include it"
        collect_until(restart + 2 * PERIOD)
        prom.stop()
        down = time.time()
        collect_until(down + OUTAGE)  # the cycles fail on the outage
        prom.start()
        back = time.time()
        last_edge = start + QUIET + PERIOD * math.ceil((back + 2 * PERIOD - start - QUIET) / PERIOD)
        collect_until(last_edge + s.settle_seconds + 1)

        def caught_up() -> bool:
            cycle()
            return (cursor_end(fresh_db_url) or 0) >= last_edge

        wait_until(caught_up, 300, "the collector to catch up with the run's last edge",
                   seen=lambda: cursor_end(fresh_db_url))
        truth_a, truth_b = simtruth.truth(sim.url, first_edge), simtruth.truth(sim.url, last_edge)
        # the exporter is quiet around both edges (from 2 s before, so the last scrape before each edge saw
        # these very values, to 1 s after): its counters are the same throughout
        quiet = [simtruth.truth(sim.url, t) for edge in (first_edge, last_edge) for t in (edge - 2, edge + 1)]
    finally:
        sim.stop()

    assert failed and any(st == "failed" and "PromUnavailable" in (e or "") for st, e in runs(fresh_db_url))
    rows = stored(fresh_db_url)
    assert {r["source"] for r in rows.values()} == {"prometheus"}
    in_run = {k: v for k, v in rows.items() if first_edge <= k[2] < last_edge}

    for pool_id, (klass, mode) in POOLS.items():
        key = (MODEL, klass, mode)
        a = truth_a[key]["cumulative_since_start"]
        b = truth_b[key]["cumulative_since_start"]
        assert [q[key]["cumulative_since_start"] for q in quiet] == [a, a, b, b], \
            f"{pool_id}: the exporter was not quiet around a run edge"
        mine = [v for k, v in sorted(in_run.items()) if k[:2] == (klass, mode)]
        assert mine, pool_id
        for field in SCALARS:
            want = None if a[field] is None else b[field] - a[field]
            got = None if all(v[field] is None for v in mine) else sum(v[field] or 0.0 for v in mine)
            assert got == want, (pool_id, field, got, want)
        if a["accepted_per_pos"] is not None:
            got_pos = None
            for v in mine:
                got_pos = add(got_pos, v["accepted_per_pos"])
            assert got_pos == [y - x for x, y in zip(a["accepted_per_pos"], b["accepted_per_pos"], strict=True)]
        for h in HISTS:
            got_b = None
            for v in mine:
                got_b = add(got_b, v[f"{h}_buckets"])
            assert got_b == [y - x for x, y in zip(a[h]["buckets"], b[h]["buckets"], strict=True)], (pool_id, h)
            assert sum(v[f"{h}_count"] for v in mine) == b[h]["count"] - a[h]["count"], (pool_id, h)
            assert sum(v[f"{h}_sum"] for v in mine) == pytest.approx(b[h]["sum"] - a[h]["sum"], rel=1e-9)
        # restarts: exactly the one of the chat spec engine, in the bucket after the edge it happened on
        restarts = {k[2]: v["restarts"] for k, v in in_run.items() if k[:2] == (klass, mode) and v["restarts"]}
        assert restarts == ({restart: 1} if pool_id == "chat-eagle3" else {}), (pool_id, restarts)

    # the outage: buckets without a sample are absent (never 0), and counts grew meanwhile
    gap = [k for k in range(int(down) // WIDTH * WIDTH + WIDTH, int(back) - 2 * WIDTH, WIDTH)]
    assert gap and not any(k[2] in gap for k in in_run)

    # Prometheus' increase() over the same buckets: extrapolated, and blind to what the outage hid
    key = (MODEL, "code", "eagle3")
    truth_drafts = truth_b[key]["cumulative_since_start"]["drafts"] - truth_a[key]["cumulative_since_start"]["drafts"]
    extrapolated = sum(float(r["value"][1]) for b in range(first_edge, last_edge, WIDTH) for r in prom.query(
        f'sum(increase(vllm:spec_decode_num_drafts_total{{model_name="{MODEL}",traffic_class="code"}}[{WIDTH}s]))',
        at=b + WIDTH))
    assert extrapolated < 0.9 * truth_drafts, (extrapolated, truth_drafts)

    # the restart is annotated on the model's charts
    with TestClient(create_app(Settings(_env_file=None, database_url=fresh_db_url)),
                    headers=bearer(make_token(fresh_db_url))) as api:
        notes = api.get("/api/v1/annotations", params={"model": MODEL, "start": datetime.fromtimestamp(
            first_edge, UTC).isoformat(), "end": datetime.fromtimestamp(last_edge, UTC).isoformat()})
        assert notes.status_code == 200, notes.text
        got = [(n["t"], n["traffic_class"], n["spec_mode"], n["text"]) for n in notes.json()["annotations"]]
        pools = {(p["traffic_class"], p["spec_mode"]): p for p in api.get("/api/v1/pools").json()["pools"]
                 if p["model_name"] == MODEL}
    assert [(datetime.fromisoformat(t).timestamp(), c, m, x) for t, c, m, x in got] == \
        [(restart + WIDTH, "chat", "eagle3", "chat/eagle3: 1 restart(s)")]
    assert {(p["collected_by"], p["counts"]) for p in pools.values()} == {("prometheus", "exact")}
