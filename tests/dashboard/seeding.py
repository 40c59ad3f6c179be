"""Demo data for the dashboard tests, screenshots and benchmark: a small fleet of pools with per-minute
buckets written straight into a migrated database (COPY), ending at the current minute.

The shapes are chosen so that every state and chart has something to show: a healthy model with a
baseline (measured eps), a class with depth drift, a below-threshold model, a batch-heavy model whose
margin is negative, restarts (for the annotations) and a pool that stopped reporting hours ago.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from backend.db import snapshots
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.schemas.common import WindowRead
from backend.schemas.fleet import FleetRead, FleetRowRead, SparklineRead
from backend.schemas.summary import FreshnessRead
from tests.support.db import clone, drop_database, libpq

BOUNDS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]


@dataclass(frozen=True)
class PoolSpec:
    model: str
    traffic_class: str
    spec_mode: str = "eagle3"
    k: int | None = 3
    p0: float = 0.8            # conditional acceptance at position 0
    decay: float = 0.0         # conditional acceptance lost per position (depth drift)
    running: float = 12.0      # mean running requests (diurnal swing around it)
    step_ms: float = 30.0      # mean engine step time, ms (ITL is per step)
    drafts_per_min: int = 3000
    stop_hours: float = 0.0    # the pool stopped reporting this long ago
    restarts_every_h: float | None = None
    drafter: str | None = "eagle3-head"
    vllm_version: str = "0.22.0"
    incident_minutes: float = 0.0  # the last this many minutes accept at incident_p0 (an incident in progress)
    incident_p0: float = 0.3


DEMO_FLEET: tuple[PoolSpec, ...] = (
    PoolSpec("llama-3.1-70b", "chat", k=3, p0=0.86, decay=0.03, running=14, restarts_every_h=9),
    PoolSpec("llama-3.1-70b", "code", k=3, p0=0.80, decay=0.10, running=14),
    PoolSpec("llama-3.1-70b", "chat", spec_mode="off", k=None, running=14, step_ms=22, drafter=None),
    PoolSpec("llama-3.1-70b", "code", spec_mode="off", k=None, running=14, step_ms=22, drafter=None),
    PoolSpec("qwen2.5-32b", "chat", k=5, p0=0.78, decay=0.02, running=24),
    PoolSpec("qwen2.5-32b", "summarize", k=5, p0=0.64, decay=0.05, running=24),
    PoolSpec("qwen2.5-32b", "chat", spec_mode="off", k=None, running=24, step_ms=20, drafter=None),
    PoolSpec("mistral-7b", "chat", k=4, p0=0.42, decay=0.08, running=150, step_ms=45),
    PoolSpec("llama-3.1-8b", "rag", k=3, p0=0.75, running=6, stop_hours=3.0),
)


def _hist(rng: random.Random, total: float, center: float) -> list[float]:
    """Cumulative counts over BOUNDS (+Inf last) of `total` observations around `center` seconds."""
    per = [0.0] * (len(BOUNDS) + 1)
    for share, factor in ((0.55, 1.0), (0.3, 1.6), (0.12, 2.8), (0.03, 6.0)):
        x = center * factor * (0.8 + 0.4 * rng.random())
        idx = next((i for i, b in enumerate(BOUNDS) if x <= b), len(BOUNDS))
        per[idx] += round(total * share)
    out, acc = [], 0.0
    for c in per:
        acc += c
        out.append(acc)
    return out


def _rows(pool_id: int, spec: PoolSpec, layout: int, start: datetime, end: datetime, seed: int):
    rng = random.Random(seed)
    t = start
    while t < end:
        hours = (t - start).total_seconds() / 3600
        running = max(1.0, spec.running * (1 + 0.6 * math.sin(2 * math.pi * hours / 24)) * (0.9 + 0.2 * rng.random()))
        load_penalty = 0.12 if running > 32 else 0.0
        steps = spec.drafts_per_min * (0.8 + 0.4 * rng.random())
        restarts = None
        if spec.restarts_every_h and int(hours / spec.restarts_every_h) != int((hours + 1 / 60) / spec.restarts_every_h):
            restarts = 1
        p0 = spec.incident_p0 if (end - t).total_seconds() <= spec.incident_minutes * 60 else spec.p0
        if spec.k:
            n = round(steps)
            per_pos, prev = [], float(n)
            for i in range(spec.k):
                p = min(1.0, max(0.0, p0 - spec.decay * i - load_penalty + rng.gauss(0, 0.015)))
                prev = math.floor(prev * p)
                per_pos.append(prev)
            accepted = sum(per_pos)
            tau = 1 + accepted / n
            itl = _hist(rng, n, spec.step_ms / 1000 * (1 + 0.12 * spec.k))
            itl_sum = n * spec.step_ms / 1000 * (1 + 0.12 * spec.k)
            tokens = n * tau
            tpot_center = spec.step_ms / 1000 * (1 + 0.12 * spec.k) / tau
            drafts, draft_tokens = float(n), float(n * spec.k)
        else:
            per_pos = accepted = drafts = draft_tokens = None
            n = round(steps)
            itl = _hist(rng, n, spec.step_ms / 1000)
            itl_sum = n * spec.step_ms / 1000
            tokens = float(n)
            tpot_center = spec.step_ms / 1000
        requests = max(1.0, round(tokens / 250))
        tpot = _hist(rng, requests, tpot_center)
        yield (pool_id, t, 60, drafts, draft_tokens, None if accepted is None else float(accepted), per_pos,
               layout, itl, itl_sum, itl[-1], layout, tpot, requests * tpot_center, tpot[-1], tokens,
               requests, running, restarts, "prometheus", t + timedelta(seconds=90))
        t += timedelta(minutes=1)


COLUMNS = ("pool_id, bucket_start, bucket_seconds, drafts, draft_tokens, accepted_tokens, accepted_per_pos, "
           "itl_layout_id, itl_buckets, itl_sum, itl_count, tpot_layout_id, tpot_buckets, tpot_sum, tpot_count, "
           "generation_tokens, finished_requests, running_mean, restarts, source, collected_at")


def seed_demo(url: str, *, hours: float = 26.0, now: datetime | None = None,
              fleet: tuple[PoolSpec, ...] = DEMO_FLEET, seed: int = 7) -> datetime:
    """Fill a migrated, empty database; return the end of the newest bucket (the minute before `now`)."""
    now = now or datetime.now(UTC)
    end = now.replace(second=0, microsecond=0)
    start = end - timedelta(hours=hours)
    with psycopg.connect(libpq(url), autocommit=False) as conn:
        layout = conn.execute("INSERT INTO histogram_layouts (bounds) VALUES (%s) ON CONFLICT (bounds) DO UPDATE "
                              "SET bounds = EXCLUDED.bounds RETURNING id", (BOUNDS,)).fetchone()[0]
        for i, spec in enumerate(fleet):
            stop = end - timedelta(hours=spec.stop_hours)
            pid = conn.execute(
                "INSERT INTO pools (model_name, traffic_class, spec_mode, num_spec_tokens, drafter, vllm_version,"
                " first_seen, last_seen) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (spec.model, spec.traffic_class, spec.spec_mode, spec.k, spec.drafter, spec.vllm_version,
                 start, stop)).fetchone()[0]
            with conn.cursor().copy(f"COPY pool_buckets ({COLUMNS}) FROM STDIN") as copy:
                for row in _rows(pid, spec, layout, start, stop, seed * 1000 + i):
                    copy.write_row(row)
        conn.execute("ANALYZE pool_buckets")
        conn.commit()
    return end


@contextmanager
def demo_clone(pg_admin_url: str, pg_template: str, prefix: str, hours: float = 2.0) -> Iterator[str]:
    """A clone of the migrated template holding `hours` of the demo fleet (its URL), dropped afterwards."""
    name, url = clone(pg_admin_url, pg_template, prefix=prefix)
    try:
        seed_demo(url, hours=hours)
        yield url
    finally:
        drop_database(pg_admin_url, name)


def seed_empty_pool(url: str, model: str = "empty-model", traffic_class: str = "chat",
                    last_seen: datetime | None = None) -> datetime:
    """A pool that exists but has no buckets (it reported once, long ago)."""
    last_seen = last_seen or (datetime.now(UTC) - timedelta(hours=5)).replace(second=0, microsecond=0)
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        conn.execute("INSERT INTO pools (model_name, traffic_class, spec_mode, num_spec_tokens, first_seen, last_seen)"
                     " VALUES (%s, %s, 'eagle3', 3, %s, %s)", (model, traffic_class, last_seen, last_seen))
    return last_seen


# --- simulator history (the lead's seed_history: the real scrape -> assemble -> ingest path) ---------------

SIM_MODELS = {"steady": "llama-3.1-8b", "drift": "llama-3.1-70b", "long-context": "qwen2.5-32b"}


def demo_scenario(restart_every: int = 2400) -> dict:
    """The built-in scenarios side by side as one fleet: one model each, plus periodic restarts of one pool."""
    import yaml

    from backend.sim.scenario import __file__ as scen_file

    folder = Path(scen_file).parent / "scenarios"
    pools: list[dict] = []
    defaults: dict = {}
    for name, model in SIM_MODELS.items():
        doc = yaml.safe_load((folder / f"{name}.yaml").read_text())
        base = dict(doc.get("defaults") or {})
        defaults = defaults or {k: v for k, v in base.items() if k not in ("model", "concurrency")}
        for p in doc["pools"]:
            pool = {**p, "id": f"{name}-{p['id']}", "model": model}
            if "concurrency" not in pool and "concurrency" in base:
                pool["concurrency"] = base["concurrency"]
            pools.append(pool)
    events = [{"pool": "steady-chat-eagle3", "every": restart_every, "restart": True}]
    return {"description": "specwatch dashboard demo fleet", "tick": 0.1, "defaults": defaults, "pools": pools,
            "events": events}


def seed_sim(url: str, *, hours: float = 1.5, tick: float = 5.0, end: float | None = None) -> float:
    """Simulated history through the collector code (backend.services.history.seed_history); returns its end."""
    import time

    from backend.config import Settings
    from backend.db.session import make_engine, make_sessionmaker
    from backend.services.history import seed_history

    engine = make_engine(url)
    try:
        settings = Settings(_env_file=None, database_url=url)
        end = end or time.time()
        seed_history(make_sessionmaker(engine), settings, scenario=demo_scenario(), seconds=int(hours * 3600),
                     end=end, tick=tick)
    finally:
        engine.dispose()
    return end


# --- per-request records (the simulator's per-request generator, stored by the ingest of POST /requests) ---

def seed_requests(url: str, *, minutes: float = 40.0, now: datetime | None = None, seed: int = 3,
                  model: str = "m1", classes: tuple[str, str] = ("chat", "code")) -> int:
    """The per-request records of one simulated pool serving two classes (chat and code of model m1 unless
    told) over the last `minutes`, stored through the service behind POST /api/v1/requests; returns how many."""
    import copy

    from backend.config import Settings
    from backend.db.session import make_engine, make_sessionmaker, session_scope
    from backend.services import request_ingest
    from backend.sim.server import Simulator
    from tests.sim.test_per_request import TWO_CLASSES

    now = now or datetime.now(UTC)
    scenario = copy.deepcopy(TWO_CLASSES)
    scenario["pools"][0]["concurrency"] = 6
    scenario["pools"][0]["model"] = model
    for cls, name in zip(scenario["pools"][0]["per_request"]["classes"], classes, strict=True):
        cls["name"] = name
    end = now.timestamp() - 5
    sim = Simulator(scenario, seed=seed, clock=lambda: end, history_seconds=0, start=end - minutes * 60)
    records = sim.request_records()
    settings = Settings(_env_file=None, database_url=url)
    engine = make_engine(url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            stored = sum(request_ingest.ingest(session, records[i:i + 1000], settings=settings, now=now).stored
                         for i in range(0, len(records), 1000))
    finally:
        engine.dispose()
    return stored


# --- a large fleet for the paging tests and benchmarks/fleet_page_bench ------------------------------------

LARGE_CLASSES = ("chat", "code", "rag", "summarize")
LARGE_WINDOW = 3600
LARGE_STATES = ("healthy", "healthy", "healthy", "below-threshold", "negative-margin", "stale", "low-volume",
                "no-data")
LARGE_VERDICTS = ("better", "worse", "no-significant-change", "unresolved", "inconclusive", None)


def evaluate_rollout(url: str) -> None:
    """What the worker's periodic rollout evaluation does: a track per model and scope (the rollout page's rows)."""
    from backend.config import Settings
    from backend.services import rollout

    engine = make_engine(url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            rollout.evaluate(session, settings=Settings(_env_file=None, database_url=url), now=datetime.now(UTC),
                             window_seconds=3600)
    finally:
        engine.dispose()


def fill_pools(url: str, pools: int, now: datetime) -> None:
    """`pools` rows in `pools` (model-i x 4 classes, eagle3, K 3..6), in one INSERT ... SELECT."""
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pools (model_name, traffic_class, spec_mode, num_spec_tokens, first_seen, last_seen) "
            "SELECT 'model-' || (i / 4), (ARRAY['chat','code','rag','summarize'])[i %% 4 + 1], 'eagle3', 3 + i %% 4,"
            " %s, %s FROM generate_series(0, %s - 1) AS i", (now - timedelta(days=1), now, pools))


def fleet_body(pools: int, now: datetime, seed: int = 31) -> bytes:
    """The 1 h window's /fleet answer for the pools of `fill_pools` (each model's classes and its mix)."""
    rng = random.Random(seed)
    t = [now - timedelta(minutes=30 * (47 - i)) for i in range(48)]
    rows = []
    for m in range((pools + 3) // 4):
        classes = LARGE_CLASSES[:min(4, pools - 4 * m)]
        for cls in (*classes, "mixed") if len(classes) > 1 else classes:
            k = 3 + (4 * m + (LARGE_CLASSES.index(cls) if cls in LARGE_CLASSES else 0)) % 4
            rate = round(rng.uniform(0.05, 0.9), 4)
            be = round(rng.uniform(0.05, 0.2), 4)
            itl, tpot = rng.choice(LARGE_VERDICTS), rng.choice(LARGE_VERDICTS)
            rows.append(FleetRowRead(
                model_name=f"model-{m}", traffic_class=cls, spec_mode="eagle3", num_spec_tokens=k,
                state=rng.choice(LARGE_STATES), acceptance_rate=rate, mean_acceptance_length=1 + k * rate,
                seed_alpha=rate, break_even_alpha=be, margin=rate - be, eps_step_source="measured",
                estimated_speedup=(1 + k * rate) / 1.3, p99_itl_delta=rng.uniform(-0.01, 0.02),
                p99_itl_verdict=itl, p99_itl_reason=itl and f"P99 ITL {itl}", p99_tpot_delta=rng.uniform(-0.01, 0.01),
                p99_tpot_verdict=tpot, p99_tpot_reason=tpot and f"P99 TPOT {tpot}", concurrency_band="8-16",
                drafts=float(rng.randint(0, 200_000)),
                freshness=FreshnessRead(last_seen=now, age_seconds=30.0, stale=False),
                sparkline=SparklineRead(step_seconds=1800, t=t,
                                        acceptance_rate=[round(rng.uniform(0.05, 0.9), 4) for _ in t])))
    body = FleetRead(window=WindowRead(start=now - timedelta(seconds=LARGE_WINDOW), end=now, seconds=LARGE_WINDOW),
                     generated_at=now, alpha_threshold=0.55, rows=rows)
    return body.model_dump_json().encode()


def store_snapshot(url: str, body: bytes, now: datetime) -> None:
    engine = make_engine(url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            snapshots.put(session, LARGE_WINDOW, now, body)
    finally:
        engine.dispose()




def seed_large_fleet(url: str, pools: int, now: datetime) -> bytes:
    """`pools` pools and the 1 h window's fleet snapshot for them stamped `now` (rows synthesised with the
    real response model; computing them is the snapshot task's cost, not what paging tests measure)."""
    fill_pools(url, pools, now)
    body = fleet_body(pools, now)
    store_snapshot(url, body, now)
    return body
