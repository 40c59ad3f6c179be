"""Seed simulated history: drive the vLLM fleet simulator on a fake clock and push its /metrics text
through the direct-scrape code path (parse -> exact per-bucket increases -> checks -> upsert).

For the demo (so a newcomer sees hours of data at once) and for tests that need realistic buckets
without waiting for wall-clock time. Nothing here is a shortcut around the collector: the same parser,
assembler, data-quality rules and writes run as for a live scrape."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from backend.config import Settings
from backend.db import repositories as repo
from backend.db.session import session_scope
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
    prev: Scrape | None = None
    total = (end - start) // width
    b = start
    while b < end:
        c_last = min(end - width, b + (chunk_buckets - 1) * width)
        scrapes = [prev] if prev else []
        t = clock.t + scrape_interval
        while t <= c_last + width:
            clock.t = t
            parsed = parse(sim.metrics().decode())
            scrapes.append(Scrape(TARGET, t, parsed.samples, parsed.created))
            summary.scrapes += 1
            t += scrape_interval
        records = assemble(scrapes, target_labels={}, width=width, first_bucket=b, last_bucket=c_last,
                           max_gap=s.scrape_max_gap_seconds, naming=naming,
                           dip_tolerance=s.counter_dip_tolerance)
        with session_scope(factory) as session:
            res = write_records(session, list(records.values()), width=width, source="scrape", now=ts(end),
                                max_pools=s.max_pools)
        summary.rows += res.rows
        summary.rejected += res.rejected
        summary.buckets += (c_last - b) // width + 1
        prev = scrapes[-1]
        b = c_last + width
        if progress:
            progress(summary.buckets, total)
    with session_scope(factory) as session:
        # live collection continues where the history ends
        for name in ("scrape", "prometheus"):
            repo.advance_cursor(session, name, ts(end), now=ts(end))
    summary.duration = time.monotonic() - started
    return summary
