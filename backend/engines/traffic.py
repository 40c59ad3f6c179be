"""A small, steady traffic driver for a local vLLM (`specwatch demo --engine vllm-cpu`), so its counters move.

`python -m backend.engines.traffic --url http://127.0.0.1:8100 [--ingest-url URL] [--rate 4] [--concurrency 2]`

Sends short greedy requests with repetitive prompts (so ngram speculation gets drafts accepted): completions,
chat completions and streamed completions in turn, about `--rate` a second, `--concurrency` at a time, until
stopped. With `--ingest-url` (specwatch's /api/v1/requests) and an ingest token in SPECWATCH_INGEST_TOKEN,
each response also becomes a per-request record (backend.client.per_request), posted in small batches.
Standard library only."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import urllib.error
from concurrent.futures import ThreadPoolExecutor

from backend.client.per_request import post_records, record_from_response, record_from_stream
from backend.engines.process import post_json
from backend.engines.vllm_cpu import chat_body, completion_body, post_stream

KINDS = ("completions", "chat", "stream")


def one(url: str, i: int, traffic_class: str = "chat") -> dict | None:
    """Request number i (its kind by i) and its per-request record (None without speculative metrics)."""
    kind = KINDS[i % len(KINDS)]
    labels = {"traffic_class": traffic_class}
    if kind == "completions":
        return record_from_response(post_json(f"{url}/v1/completions", completion_body(i)), labels=labels)
    if kind == "chat":
        return record_from_response(post_json(f"{url}/v1/chat/completions", chat_body(i)), labels=labels)
    body = {**completion_body(i), "stream_options": {"include_usage": True}}
    return record_from_stream(post_stream(f"{url}/v1/completions", body), labels=labels)


def drive(url: str, *, rate: float, concurrency: int, ingest_url: str | None, token: str | None,
          stop: threading.Event, batch: int = 20, log=print) -> int:
    """Send requests until `stop` is set; returns how many were answered."""
    pending: list[dict] = []
    lock = threading.Lock()
    sent = [0, 0]  # answered, failed

    def task(i: int) -> None:
        try:
            rec = one(url, i)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            sent[1] += 1
            if sent[1] % 50 == 1:
                log(f"traffic: request failed ({exc}); going on")
            return
        sent[0] += 1
        if rec is not None and ingest_url and token:
            with lock:
                pending.append(rec)
                ready = pending[:] if len(pending) >= batch else []
                if ready:
                    pending.clear()
            if ready:
                try:
                    post_records(ingest_url, token, ready)
                except (urllib.error.URLError, OSError) as exc:
                    log(f"traffic: posting {len(ready)} records failed ({exc})")

    i = 0
    with ThreadPoolExecutor(concurrency) as pool:
        while not stop.is_set():
            pool.submit(task, i)
            i += 1
            stop.wait(1.0 / rate)
    return sent[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m backend.engines.traffic", description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True, help="the vLLM server, e.g. http://127.0.0.1:8100")
    p.add_argument("--ingest-url", help="specwatch's /api/v1/requests (token: SPECWATCH_INGEST_TOKEN)")
    p.add_argument("--rate", type=float, default=4.0, help="requests per second (default 4)")
    p.add_argument("--concurrency", type=int, default=2)
    args = p.parse_args(argv)
    if args.rate <= 0 or args.concurrency < 1:
        p.error("--rate must be > 0 and --concurrency >= 1")
    stop = threading.Event()
    token = os.environ.get("SPECWATCH_INGEST_TOKEN")
    print(f"traffic: ~{args.rate:g} requests/s to {args.url}"
          + (f", records to {args.ingest_url}" if args.ingest_url and token else ""), flush=True)
    try:
        drive(args.url, rate=args.rate, concurrency=args.concurrency, ingest_url=args.ingest_url, token=token,
              stop=stop, log=lambda m: print(m, flush=True))
    except KeyboardInterrupt:
        stop.set()
    return 0


if __name__ == "__main__":
    time.sleep(0)
    sys.exit(main())
