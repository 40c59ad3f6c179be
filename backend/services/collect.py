"""One collection cycle from Prometheus: cursor -> complete buckets -> range queries -> checked upsert.

The unit of atomicity is a chunk of buckets: its facts, rejections, pools and the cursor move are one
transaction, so a crash or an outage leaves the cursor where the last good chunk ended and the next cycle
back-fills from there. Buckets are only asked for once complete (end + settle <= now); a re-run rewrites
identical rows.

Two ways to count (`prometheus_increases`): `raw` (the default) reads every counter series' raw samples
over the chunk, plus a lookback of `scrape_max_gap_seconds` for the sample before its first bucket, and
stores the exact increases between consecutive samples, as the direct-scrape path does (restarts from
resets and `_created` changes, a gap closed by the samples on both sides); `increase` asks Prometheus'
increase() per bucket (extrapolated to the bucket's edges), for back ends that cannot return raw samples.
The rows say which (`pool_buckets.source`: RAW_SOURCE or INCREASE_SOURCE).
Chunk sizes: services.collect_chunks."""

from __future__ import annotations

import logging
import math
import re
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from backend.config import Settings
from backend.db import repositories as repo
from backend.db.session import session_scope
from backend.domain.families import families_of
from backend.domain.records import ESTIMATE_FIELDS, BucketRecord, PoolKey
from backend.domain.replicas import complete_coarse_ends
from backend.prom.assemble import (
    assemble,
    assemble_raw,
    config_labels,
    raw_estimates,
    replica_records,
    series_increases,
)
from backend.prom.client import PromClient
from backend.prom.queries import (
    REPLICA_FIELDS,
    PoolLabels,
    config_query,
    cycle_queries,
    estimate_queries,
    gauge_queries,
    names_selector,
    raw_queries,
    replica_queries,
)
from backend.services.collect_chunks import chunk_size, cursor_range, known_series, latest_complete_end
from backend.services.ingest import IngestResult, ts, write_records
from backend.services.replicas import write_replicas

log = logging.getLogger("specwatch.collect")
RAW_SOURCE, INCREASE_SOURCE = "prometheus", "prom-increase"  # pool_buckets.source of each way to count

Progress = Callable[[int, int], None]  # (buckets done, buckets total)


@dataclass
class CycleSummary:
    source: str
    window_start: datetime | None = None
    window_end: datetime | None = None
    buckets: int = 0
    pools: set = field(default_factory=set)
    rows_written: int = 0
    rejected: int = 0
    requests: int = 0
    bytes_read: int = 0
    chunks: int = 0
    duration: float = 0.0
    note: str = ""

    def as_dict(self) -> dict:
        return {"source": self.source, "window_start": self.window_start and self.window_start.isoformat(),
                "window_end": self.window_end and self.window_end.isoformat(), "buckets": self.buckets,
                "pools": len(self.pools), "rows_written": self.rows_written, "rejected": self.rejected,
                "requests": self.requests, "bytes_read": self.bytes_read, "chunks": self.chunks,
                "duration_s": round(self.duration, 3), "note": self.note}


def close_stale_runs(session: Session, *, now: datetime, limit: float) -> int:
    n = repo.close_stale_runs(session, started_before=now - timedelta(seconds=limit), now=now,
                              reason=f"abandoned: still running {limit:g}s after its start (its process died)")
    if n:
        log.warning("closed %d collection runs left running by a process that died", n)
    return n


@contextmanager
def recorded_run(factory: sessionmaker[Session], summary: CycleSummary, *, kind: str, now: datetime,
                 stale_run_seconds: float, client: PromClient | None = None) -> Iterator[None]:
    """Record the cycle in collection_runs (in transactions of its own, so a failure is recorded too).
    Runs left `running` by a killed process are closed first, once older than the task time limit
    (`abandoned`: no live task runs that long, Celery kills it), so every cycle is also the sweep."""
    started = time.monotonic()
    before = client.requests if client else 0
    bytes_before = client.bytes if client else 0
    with session_scope(factory) as session:
        close_stale_runs(session, now=now, limit=stale_run_seconds)
        run_id = repo.start_run(session, kind=kind, source=summary.source, now=now)
    error = None
    try:
        yield
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:2000]
        raise
    finally:
        summary.requests = (client.requests - before) if client else 0
        summary.bytes_read = (client.bytes - bytes_before) if client else 0
        summary.duration = time.monotonic() - started
        with session_scope(factory) as session:
            repo.finish_run(session, run_id, now=now, status="failed" if error else "ok", error=error,
                            window_start=summary.window_start, window_end=summary.window_end,
                            pools=len(summary.pools), rows_written=summary.rows_written,
                            rejected=summary.rejected, requests=summary.requests)


def run_prometheus(factory: sessionmaker[Session], client: PromClient, s: Settings, *, now: datetime,
                   since: datetime | None = None, until: datetime | None = None,
                   kind: str = "collect", progress: Progress | None = None) -> CycleSummary:
    """Collect complete buckets from the cursor (or [since, until] for a back-fill) up to now."""
    width = s.bucket_seconds
    raw = s.prometheus_increases == "raw"
    source = RAW_SOURCE if raw else INCREASE_SOURCE
    summary = CycleSummary(source="prometheus")
    cursor_name = shard_cursor(s)
    with session_scope(factory) as session:
        cursor = repo.get_cursor(session, cursor_name)
        series = known_series(session, raw=raw) if s.prometheus_max_samples > 0 else 0
    if since is not None:
        first_end = int(math.ceil(since.timestamp() / width) * width) + width
        last_end = latest_complete_end((until or now).timestamp(), width, 0 if until else s.settle_seconds)
        last_end = min(last_end, latest_complete_end(now.timestamp(), width, s.settle_seconds))
    else:
        first_end, last_end, summary.note = cursor_range(cursor, now=now.timestamp(), s=s)
    labels = PoolLabels(s.class_label, s.mode_label, s.extra_matchers)
    queries = cycle_queries(labels, width, s.engines)
    cap = min(s.backfill_chunk_buckets, s.prometheus_max_points)
    total = (last_end - first_end) // width + 1 if last_end >= first_end else 0
    with recorded_run(factory, summary, kind=kind, now=now, client=client,
                      stale_run_seconds=s.task_time_limit_seconds):
        c_first = first_end
        while c_first <= last_end:
            c_last = min(last_end, c_first + (chunk_size(s, series, cap) - 1) * width)
            chunk_labels = labels if s.shard_count <= 1 else shard_labels(client, s, labels, c_first, c_last)
            if raw:
                records, fine, ends, largest = _raw_chunk(client, s, chunk_labels, c_first, c_last)
            else:
                chunk_queries = [] if chunk_labels is None else queries if chunk_labels is labels else \
                    cycle_queries(chunk_labels, width, s.engines)
                answers = [(q, client.query_range(q.promql, c_first, c_last, width)) for q in chunk_queries]
                fine, ends = _replica_fine(client, s, chunk_labels, c_first, c_last)
                largest = max((len(a) for _, a in answers), default=0)
                records = assemble(answers, width=width, class_label=s.class_label, mode_label=s.mode_label,
                                   default_class=s.default_class, default_mode=s.default_mode)
            if chunk_labels is not None:
                _attach_config(client, s, chunk_labels, records, c_first, c_last)
            # a pool not stored yet shows up here: the next chunks are sized for it
            series = max(series, largest)
            # a back-fill moves the cursor only where it joins it, so it never jumps over a gap
            contiguous = cursor is None or c_first <= int(cursor.timestamp()) + width
            with session_scope(factory) as session:
                res = write_records(session, list(records.values()), width=width, source=source, now=now,
                                    max_pools=s.max_pools)
                write_replicas(session, fine, grain=s.replica_grain, ends=ends, source=source, now=now)
                if contiguous:
                    repo.advance_cursor(session, cursor_name, ts(c_last), now=now)
            if contiguous:
                cursor = ts(max(c_last, int(cursor.timestamp()) if cursor else c_last))
            _add(summary, res, records, c_first - width, c_last)
            summary.buckets += (c_last - c_first) // width + 1
            summary.chunks += 1
            if progress:
                progress(summary.buckets, total)
            c_first = c_last + width
    return summary


def _raw_chunk(client: PromClient, s: Settings, labels: PoolLabels | None, c_first: int, c_last: int):
    """(pool records, replica records, coarse ends, largest answer) of one chunk on the raw path: every
    counter series' samples from `raw_lookback` before the chunk to its end (one request per family part,
    plus one for the `_created` series), their exact increases per bucket, summed per pool (and per
    replica for the coarse buckets that complete in the chunk, from the same samples); the gauges by
    avg_over_time as on the increase() path."""
    width, grain = s.bucket_seconds, s.replica_grain
    if labels is None:
        return {}, [], [], 0
    ends = complete_coarse_ends(c_first, c_last, grain) if grain else []
    first_bucket = min(c_first, ends[0] - grain + width) - width if ends else c_first - width
    start = first_bucket - s.scrape_max_gap_seconds
    answers = [(q, client.query_raw(q.selector, c_last, math.ceil(c_last - start)))
               for q in raw_queries(labels, s.engines) + estimate_queries(labels, s.engines)]
    gauges = [(q, client.query_range(q.promql, c_first, c_last, width))
              for q in gauge_queries(labels, width, s.engines)]
    largest = max((len(a) for _, a in answers + gauges), default=0)
    incs = series_increases(answers, width=width, first_bucket=first_bucket, last_bucket=c_last - width,
                            max_gap=s.scrape_max_gap_seconds, dip_tolerance=s.counter_dip_tolerance)
    naming = {"class_label": s.class_label, "mode_label": s.mode_label, "default_class": s.default_class,
              "default_mode": s.default_mode}
    records = assemble_raw(incs, first_bucket=c_first - width, last_bucket=c_last - width, **naming)
    for key, rec in assemble(gauges, width=width, **naming).items():
        got = records.get(key)
        if got is None:
            records[key] = rec
        else:
            got.running_mean = rec.running_mean
    if any(q.part == "gauge" for q, _series in answers):
        estimates = raw_estimates(answers, width=width, first_bucket=c_first - width, last_bucket=c_last - width,
                                  max_gap=s.scrape_max_gap_seconds, **naming)
        for (pool, b), parts in estimates.items():
            rec = records.get((pool, b))
            if rec is None:
                rec = records[(pool, b)] = BucketRecord(pool=pool, bucket_start=b, engine="sglang")
            for name, value in zip(ESTIMATE_FIELDS, (parts.weight_tokens, parts.verify_steps, parts.accepted_tokens,
                                                     parts.draft_tokens), strict=True):
                setattr(rec, name, value)
    fine = []
    if ends:
        by = (s.replica_instance_label, s.replica_engine_label)
        fine = replica_records(assemble_raw(incs, first_bucket=ends[0] - grain, last_bucket=ends[-1] - width,
                                            replica_labels=by, fields=REPLICA_FIELDS, **naming))
    return records, fine, ends, largest


def _attach_config(client: PromClient, s: Settings, labels: PoolLabels, records: dict, c_first: int,
                   c_last: int) -> None:
    """Set each record's drafter and vLLM version from the labels the deployment sets (one range query)."""
    names = (s.drafter_label, s.vllm_version_label)
    configs = config_labels(client.query_range(config_query(labels, names), c_first, c_last, s.bucket_seconds),
                            width=s.bucket_seconds, names=names, class_label=s.class_label,
                            mode_label=s.mode_label, default_class=s.default_class, default_mode=s.default_mode)
    for (key, b), rec in records.items():
        rec.drafter, rec.vllm_version = configs.get((key, b), (None, None))


def _replica_fine(client: PromClient, s: Settings, labels: PoolLabels | None, c_first: int, c_last: int):
    """The per-replica collection buckets of the coarse buckets that complete in this chunk (all of each,
    reaching back before the chunk where needed), and those coarse ends. 10 range queries, whatever the
    number of replicas; none when no coarse bucket completes."""
    grain, width = s.replica_grain, s.bucket_seconds
    ends = complete_coarse_ends(c_first, c_last, grain) if grain and labels is not None else []
    if not ends:
        return [], []
    by = (s.replica_instance_label, s.replica_engine_label)
    answers = [(q, client.query_range(q.promql, ends[0] - grain + width, ends[-1], width))
               for q in replica_queries(labels, width, by, s.engines)]
    records = assemble(answers, width=width, class_label=s.class_label, mode_label=s.mode_label,
                       default_class=s.default_class, default_mode=s.default_mode, replica_labels=by)
    return replica_records(records), ends


def _add(summary: CycleSummary, res: IngestResult, records: dict, first_start: int, last_end: int) -> None:
    summary.rows_written += res.rows
    summary.rejected += res.rejected
    summary.pools.update(rec.pool for rec in records.values())
    if summary.window_start is None:
        summary.window_start = ts(first_start)
    summary.window_end = ts(last_end)


_RE_SPECIAL = re.compile(r"[\\.+*?()|\[\]{}^$-]")  # RE2 metacharacters, escaped literally


def shard_cursor(s: Settings) -> str:
    return "prometheus" if s.shard_count <= 1 else f"prometheus/shard-{s.shard_index}-of-{s.shard_count}"


def shard_of(model_name: str, shard_count: int) -> int:
    """A pool's shard: a stable hash of its model name (so every pool of a model, all its families and all
    its buckets are collected by exactly one shard)."""
    return zlib.crc32(model_name.encode()) % shard_count


def pools_in_prometheus(client: PromClient, s: Settings, *, now: datetime) -> set[PoolKey]:
    """The pools whose vLLM series Prometheus holds now (the last bucket and a few scrapes before it), named
    as a cycle names them, whether or not a complete bucket was collected from them yet: what
    `specwatch collect --once` reports as found. One request, so it also tells whether Prometheus answers."""
    labels = PoolLabels(s.class_label, s.mode_label, s.extra_matchers)
    seconds = int(max(s.bucket_seconds, 4 * s.prometheus_scrape_interval_seconds))
    series = client.query_raw(output_counters(labels, s.engines), now.timestamp(), seconds)
    return {PoolKey(x.labels["model_name"], x.labels.get(s.class_label) or s.default_class,
                    x.labels.get(s.mode_label) or s.default_mode) for x in series if x.labels.get("model_name")}


def output_counters(labels: PoolLabels, engines: tuple[str, ...]) -> str:
    """A selector for the output-token counter (the restart series) of each engine in `engines`, in one
    request: every pool of every engine has one, labelled with `model_name` (vLLM's and SGLang's own label;
    for llama.cpp the target label the scrape config adds, as every llama.cpp query needs)."""
    names = sorted(f.metric for f in families_of(engines) if f.field == "generation_tokens")
    return labels.selector(names[0]) if len(names) == 1 else names_selector(labels, names)


def shard_labels(client: PromClient, s: Settings, labels: PoolLabels, first_end: int, last_end: int
                 ) -> PoolLabels | None:
    """This shard's pool labels for one chunk: the model names seen in the chunk (one label-values request on
    every configured engine's output-token counter, output_counters: not on a `_created` series, which
    llama.cpp never writes) that hash to this shard, as a `model_name=~` matcher added to every query of every
    engine (None: no queries). A series without `model_name` (a llama.cpp target whose scrape config adds
    none) belongs to no pool and no shard, as without sharding."""
    seen = client.label_values("model_name", output_counters(labels, s.engines), first_end - s.bucket_seconds,
                               last_end)
    mine = [m for m in seen if shard_of(m, s.shard_count) == s.shard_index]
    if not mine:
        return None
    regex = "^(?:" + "|".join(_RE_SPECIAL.sub(r"\\\g<0>", m) for m in mine) + ")$"
    matcher = 'model_name=~"' + regex.replace("\\", "\\\\").replace('"', '\\"') + '"'
    extra = f"{labels.extra_matchers},{matcher}" if labels.extra_matchers else matcher
    return PoolLabels(labels.class_label, labels.mode_label, extra)
