"""The demo's history: seeded up to now before the URLs are printed, then bridged to live collection (the
demo scrapes the live targets itself until the worker's scrapes have started)."""

from __future__ import annotations

import os
import sys
import time

import typer


def progress(label: str):
    """A line per tenth of the work (the demo's output is read in terminals and in logs alike)."""
    shown = [-1]

    def report(done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        if tenth > shown[0]:
            shown[0] = tenth
            typer.echo(f"{label} {tenth * 10:3d}% ({done}/{total} buckets)")
            sys.stdout.flush()
    return report


def settings_and_factory(env: dict[str, str], factory: bool = True):
    """The settings the children will read (from their environment), and a session factory."""
    from backend.config import Settings
    from backend.db.session import make_engine, make_sessionmaker

    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        s = Settings()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return s, (make_sessionmaker(make_engine(s.database_url)) if factory else None)


def seed(factory, settings, *, scenario: str, hours: float, tick: float) -> float:
    """Seed the history up to now (the gap since the last run on a reused database); where it ends."""
    from backend.services.history import seed_to_now

    if hours <= 0:
        return float(int(time.time() // settings.bucket_seconds * settings.bucket_seconds))
    typer.echo(f"history:    seeding up to {hours:g} h of simulated traffic before the URLs are printed")
    sys.stdout.flush()
    end, runs = seed_to_now(factory, settings, scenario=scenario, seconds=int(hours * 3600), tick=tick,
                            progress=progress("history:   "))
    buckets, requests = sum(r.buckets for r in runs), sum(r.requests for r in runs)
    typer.echo(f"history:    {buckets} buckets seeded" + (f" with {requests} per-request records" if requests else "")
               + f", history ends {time.strftime('%H:%M:%S', time.localtime(end))}"
               if runs else "history:    already up to date")
    return end




class Bridge:
    """Until the worker's scrapes have started, the demo scrapes the live targets itself (every scrape
    interval, through the collector's code), so the first live buckets get their samples where they belong
    rather than in whichever bucket the worker's first scrape lands. Extra samples change no total."""

    def __init__(self, factory, settings, until: float):
        self.factory, self.settings, self.until, self.next = factory, settings, until, 0.0

    def tick(self) -> None:
        now = time.time()
        if now >= self.until or now < self.next:
            return
        from datetime import UTC, datetime

        from backend.scrape.fetch import ScrapeUnavailable
        from backend.services.scrape import scrape_targets as store_scrape

        self.next = now + self.settings.scrape_interval_seconds
        try:
            store_scrape(self.factory, self.settings, now=datetime.fromtimestamp(now, UTC))
        except ScrapeUnavailable:
            pass  # the simulator's own death is reported by check_children
