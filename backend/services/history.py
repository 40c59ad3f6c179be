"""Seed simulated history: drive the vLLM fleet simulator on a fake clock and push its /metrics text
through the direct-scrape code path (parse -> exact per-bucket increases -> checks -> upsert), and the
per-request records of its per-request pools through the ingest of POST /api/v1/requests (the same
requests its counters count, so the requests page and reconciliation have history too).

For the demo (so a newcomer sees hours of data at once) and for tests that need realistic buckets
without waiting for wall-clock time. Nothing here is a shortcut around the collector: the same parser,
assembler, data-quality rules and writes run as for a live scrape."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from backend.config import Settings
from backend.db import repositories as repo
from backend.db.session import session_scope
from backend.domain.replicas import complete_coarse_ends
from backend.scrape.assemble import PoolNaming, Scrape, assemble
from backend.scrape.parse import parse
from backend.services.ingest import ts, write_records
from backend.sim.server import Simulator

TARGET = "simulator"


@dataclass
class SeedSummary:
    scenario: str
    start: float
    end: float
    scrapes: int = 0
    buckets: int = 0
    rows: int = 0
    rejected: int = 0
    requests: int = 0  # per-request records stored (scenarios whose pools report them, e.g. per-request)
    duration: float = 0.0


class _Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def seed_history(factory: sessionmaker[Session], s: Settings, *, scenario: str | Path | dict, seconds: int,
                 end: float, seed: int = 0, scrape_interval: float = 15.0, tick: float | None = None,
                 chunk_buckets: int = 60, progress: Callable[[int, int], None] | None = None) -> SeedSummary:
    """Simulate `seconds` of fleet history ending at `end` (unix s) and store every complete bucket."""
    started = time.monotonic()
    width = s.bucket_seconds
    end = int(end // width * width)
    start = end - int(seconds // width * width)
    clock = _Clock(start - scrape_interval)
    sim = Simulator(scenario, seed=seed, clock=clock, tick=tick, history_seconds=0, start=start - scrape_interval)
    naming = PoolNaming(s.class_label, s.mode_label, s.default_class, s.default_mode)
    summary = SeedSummary(scenario=sim.scenario.name, start=start, end=end)
    prev: list[Scrape] = []
    grain = s.replica_grain
    total = (end - start) // width
    b = start
    while b < end:
        c_last = min(end - width, b + (chunk_buckets - 1) * width)
        scrapes = list(prev)
        t = clock.t + scrape_interval
        # one sample past the chunk's end (but not past the history's): the interval straddling the end is
        # split between the buckets on both sides (domain.buckets), so both chunks need its later sample
        while t <= c_last + width or (clock.t <= c_last + width < end and t <= c_last + width + scrape_interval):
            clock.t = t
            parsed = parse(sim.metrics().decode())
            scrapes.append(Scrape.of(TARGET, t, parsed))
            summary.scrapes += 1
            t += scrape_interval
        records = assemble(scrapes, target_labels={}, width=width, first_bucket=b, last_bucket=c_last,
                           max_gap=s.scrape_max_gap_seconds, naming=naming,
                           dip_tolerance=s.counter_dip_tolerance)
        from backend.services.scrape import attach_config

        attach_config(records, scrapes, s, target_labels={}, naming=naming, first_bucket=b, last_bucket=c_last)
        requests = sim.request_records()  # the per-request records of the requests finished in this chunk
        with session_scope(factory) as session:
            res = write_records(session, list(records.values()), width=width, source="scrape", now=ts(end),
                                max_pools=s.max_pools)
            ends = [e for e in complete_coarse_ends(b + width, c_last + width, grain) if e - grain >= start] \
                if grain else []
            if ends:
                from backend.services.scrape import write_scraped_replicas

                write_scraped_replicas(session, scrapes, s, naming=naming, target_labels={}, ends=ends, now=ts(end))
            summary.requests += _ingest_requests(session, s, requests, now=ts(end))
        summary.rows += res.rows
        summary.rejected += res.rejected
        summary.buckets += (c_last - b) // width + 1
        # the next chunk's first coarse bucket may begin in this one: keep the samples it needs
        keep_from = c_last + width - grain - width if grain else c_last
        prev = [sc for sc in scrapes if sc.ts >= keep_from] or scrapes[-1:]
        b = c_last + width
        if progress:
            progress(summary.buckets, total)
    with session_scope(factory) as session:
        # live collection continues where the history ends
        for name in ("scrape", "prometheus"):
            repo.advance_cursor(session, name, ts(end), now=ts(end))
    summary.duration = time.monotonic() - started
    return summary


def _ingest_requests(session: Session, s: Settings, records: list[dict], *, now) -> int:
    """Store the simulator's per-request records as POST /api/v1/requests would (same validation, batches of
    requests_max_batch); returns how many were stored."""
    from backend.services import request_ingest

    stored = 0
    for i in range(0, len(records), s.requests_max_batch):
        stored += request_ingest.ingest(session, records[i:i + s.requests_max_batch], settings=s, now=now).stored
    return stored


def seeded_until(factory: sessionmaker[Session]) -> float | None:
    """Where stored history ends (the live cursor), or None for an empty database."""
    with session_scope(factory) as session:
        ends = [repo.get_cursor(session, name) for name in ("scrape", "prometheus")]
        if not repo.has_facts(session):
            return None
    ends = [e.timestamp() for e in ends if e is not None]
    return max(ends) if ends else None


def seed_to_now(factory: sessionmaker[Session], s: Settings, *, scenario: str | Path | dict, seconds: int,
                seed: int = 0, tick: float | None = None, clock: Callable[[], float] = time.time,
                sleep: Callable[[float], None] = time.sleep,
                progress: Callable[[int, int], None] | None = None) -> tuple[float, list[SeedSummary]]:
    """Seed history up to the last bucket boundary: the last `seconds` on an empty database, else the gap
    since the stored history ended (at most `seconds`). Seeding takes time, so it repeats for the buckets
    that completed meanwhile, and returns only early enough in a bucket that a live collection can start
    inside the next one (see handover). Returns (where history ends, the runs)."""
    width = s.bucket_seconds
    margin = min(10.0, width / 3)
    done = seeded_until(factory)
    runs: list[SeedSummary] = []
    while True:
        now = clock()
        end = int(now // width * width)
        start = end - seconds if done is None else max(done, end - seconds)
        if start >= end:
            if now - end <= width - margin:
                return float(end), runs
            sleep(width - (now - end) + 0.05)  # too close to the next boundary: let it pass, seed that bucket
            continue
        runs.append(seed_history(factory, s, scenario=scenario, seconds=int(end - start), end=end,
                                 seed=seed + len(runs), scrape_interval=width / 2, tick=tick,
                                 progress=progress if not runs else None))
        done = end


def handover(factory: sessionmaker[Session], s: Settings, *, start: float, now: float) -> dict:
    """The live simulator started at `start` (where the seeded history ends) with every counter at 0:
    store that state as the raw scrape at `start` of each target, then scrape them once now. The first
    live bucket after the seeded ones then has its exact increase (no null minute at the seam)."""
    from backend.db import scrape_repo
    from backend.scrape.parse import SAMPLE_FAMILY, ParsedScrape
    from backend.services.scrape import raw_row, scrape_targets

    result = scrape_targets(factory, s, now=ts(now))
    with session_scope(factory) as session:
        first: dict = {}
        for row in scrape_repo.raw_scrape_rows(session, since=ts(start), until=ts(now + 3600)):
            first.setdefault(row[0], row)
        shapes = scrape_repo.layout_shapes(session, {row[2] for row in first.values()})
        zero = []
        for target, _at, layout_id, _values, created in first.values():
            shape = json.loads(shapes[layout_id][1])
            parsed = ParsedScrape(
                samples=[(n, lb, 0.0) for n, lb in shape["series"] if SAMPLE_FAMILY[n].kind != "gauge"],
                created=[(b, lb, v) for (b, lb), v in zip(shape["created"], np.frombuffer(created, "<f8").tolist(),
                                                          strict=True)])
            zero.append(raw_row(target, start, parsed))
        scrape_repo.add_raw_scrapes(session, zero, now=ts(now))
    return result | {"zero_samples_at": start}
