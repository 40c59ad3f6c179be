"""Fetch vLLM /metrics endpoints concurrently (the direct-scrape source's only network code)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx


class ScrapeUnavailable(Exception):
    """Every target failed to answer: transient."""


@dataclass(frozen=True)
class FetchResult:
    url: str
    scraped_at: float  # unix seconds at the start of the request, as Prometheus stamps a scrape
    text: str | None
    error: str | None


def fetch_all(urls: list[str], *, timeout: float, workers: int = 16) -> list[FetchResult]:
    with httpx.Client(timeout=timeout, headers={"Accept": "text/plain;version=0.0.4"}) as client:

        def one(url: str) -> FetchResult:
            started = time.time()
            try:
                resp = client.get(url)
                resp.raise_for_status()
                return FetchResult(url, started, resp.text, None)
            except httpx.HTTPError as exc:
                return FetchResult(url, started, None, f"{type(exc).__name__}: {exc}"[:300])

        if not urls:
            return []
        with ThreadPoolExecutor(max_workers=min(workers, len(urls))) as pool:
            return list(pool.map(one, urls))
