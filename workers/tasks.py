"""Thin, named, idempotent tasks: JSON in, JSON out; the work lives in backend.services."""

from __future__ import annotations

from datetime import datetime

from celery import shared_task

from backend.prom.client import PromUnavailable
from backend.scrape.fetch import ScrapeUnavailable
from backend.services import collect, scrape
from workers import runtime

RETRY = runtime.retry_options(PromUnavailable, ScrapeUnavailable)


@shared_task(name="specwatch.metrics.collect", **RETRY)
def collect_metrics() -> dict:
    """Collect every complete bucket since the cursor from Prometheus (back-fills gaps). A shard worker
    collects its own shard (the pools whose model hashes to SPECWATCH_SHARD_INDEX, its own cursor); beat
    sends each shard's task to that shard's queue (workers.schedule.shard_queue)."""
    return collect.run_prometheus(runtime.session_factory(), runtime.prom_client(), runtime.settings(),
                                  now=runtime.utcnow()).as_dict()


@shared_task(name="specwatch.metrics.scrape", **RETRY)
def scrape_metrics() -> dict:
    """Scrape every vLLM target once, then finalise the buckets that are complete."""
    factory, s, now = runtime.session_factory(), runtime.settings(), runtime.utcnow()
    scraped = scrape.scrape_targets(factory, s, now=now)
    return {"scrape": scraped, "finalize": scrape.finalize(factory, s, now=now).as_dict()}


@shared_task(name="specwatch.metrics.backfill", **RETRY)
def backfill(since: str, until: str | None = None) -> dict:
    """Re-collect [since, until] from Prometheus (ISO-8601 timestamps)."""
    return collect.run_prometheus(runtime.session_factory(), runtime.prom_client(), runtime.settings(),
                                  now=runtime.utcnow(), since=datetime.fromisoformat(since),
                                  until=datetime.fromisoformat(until) if until else None,
                                  kind="backfill").as_dict()
