"""Fetch vLLM /metrics endpoints concurrently (the direct-scrape source's only network code).

Every target is bounded: a total deadline per scrape (connect, headers and body together, not per read: a
body trickling one byte at a time is cut when the deadline passes) and a byte limit on the body (refused
from Content-Length when announced, cut while reading otherwise). Targets are fetched by a bounded pool of
threads and fetch_all returns at the deadline whatever a target does, so one target cannot hold the others
or the cycle. The pool shares one HTTP client (its connections kept alive between scrapes of a cycle): a
client of its own per target cost ~50 ms of CPU each (its TLS context), 50 s for 1,000 targets."""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
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
    kind: str = ""  # why it failed: deadline | too_large | http (empty on success)


class _Cut(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


HEADERS = {"Accept": "text/plain;version=0.0.4"}


def fetch_one(url: str, *, timeout: float, max_bytes: int, client: httpx.Client | None = None) -> FetchResult:
    """One scrape that gives up `timeout` seconds after it starts, or past `max_bytes` of body (on `client`,
    else on a client of its own)."""
    if client is None:
        with httpx.Client(headers=HEADERS) as own:
            return fetch_one(url, timeout=timeout, max_bytes=max_bytes, client=own)
    started = time.time()
    deadline = time.monotonic() + timeout

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Cut("deadline", "total scrape deadline passed")
        return remaining

    try:
        with client.stream("GET", url, timeout=left()) as resp:
            resp.raise_for_status()
            announced = resp.headers.get("content-length")
            if announced and announced.isdigit() and int(announced) > max_bytes:
                raise _Cut("too_large", f"body of {announced} bytes announced, over the {max_bytes}-byte limit")
            body = bytearray()
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise _Cut("too_large", f"body over the {max_bytes}-byte limit")
                left()
            left()
            return FetchResult(url, started, body.decode(resp.encoding or "utf-8", errors="replace"), None)
    except _Cut as exc:
        return FetchResult(url, started, None, str(exc), exc.kind)
    except httpx.TimeoutException as exc:  # a single read reached the time left: the deadline
        return FetchResult(url, started, None, f"total scrape deadline passed ({type(exc).__name__})", "deadline")
    except httpx.HTTPError as exc:
        return FetchResult(url, started, None, f"{type(exc).__name__}: {exc}"[:300], "http")


def fetch_all(urls: list[str], *, timeout: float, max_bytes: int, workers: int = 16) -> list[FetchResult]:
    """Scrape every URL, at most `workers` at once, each within `timeout` seconds of its start. Returns
    within timeout x the number of waves (ceil(urls / workers)) whatever the targets do: a scrape still
    running then (a read blocked past its deadline) is reported cut and left to end on its own timeout."""
    if not urls:
        return []
    started = time.time()
    workers = max(1, min(workers, len(urls)))
    client = httpx.Client(headers=HEADERS, limits=httpx.Limits(max_connections=workers,
                                                                max_keepalive_connections=workers))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scrape")
    futures = [pool.submit(fetch_one, url, timeout=timeout, max_bytes=max_bytes, client=client) for url in urls]
    _done, running = wait(futures, timeout=timeout * math.ceil(len(urls) / workers) + 1.0)
    pool.shutdown(wait=False, cancel_futures=True)
    if running:  # the client closes when the last cut scrape ends on its own timeout
        threading.Thread(target=lambda: (wait(running), client.close()), daemon=True).start()
    else:
        client.close()
    return [f.result() if f.done() and not f.cancelled() else
            FetchResult(url, started, None, "total scrape deadline passed", "deadline")
            for url, f in zip(urls, futures, strict=True)]
