"""The direct-scrape source: read each engine's /metrics (vLLM, llama.cpp, SGLang), keep raw samples, finalise complete buckets exactly.

scrape_targets() stores each target's parsed exposition (raw values and `_created` per series) in
raw_scrapes, in columns (backend.scrape.layout): one transaction per cycle. finalize() turns the raw
samples of complete buckets into exact increases (consecutive samples, resets from drops or `_created`
changes) and writes them like the Prometheus source does, then moves the "scrape" cursor. Both are safe to
re-run.

A scrape interval that straddles a bucket boundary is split between the two buckets in proportion to time
(domain.buckets), so a one-minute bucket holds its own minute. The run that writes the bucket before the
boundary needs the interval's later sample, scraped after the bucket's end: finalize() splits an interval
only when that sample is at most `split_lookahead` seconds past the boundary (the settle time less the
scrape deadline and a second: such a sample is stored by the time the bucket is complete), and reads raw
samples that far past its last bucket. Any run decides alike for the same two samples, so every count is
written once; an interval longer than that goes whole to the bucket of its later sample."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from backend.config import Settings
from backend.db import repositories as repo
from backend.db import scrape_repo
from backend.db.session import session_scope
from backend.domain.records import PoolKey
from backend.domain.replicas import complete_coarse_ends
from backend.gc_pause import gc_paused
from backend.scrape.assemble import PoolNaming, Scrape, assemble, config_labels, pools_in, replica_of_target
from backend.scrape.fetch import ScrapeUnavailable, fetch_all
from backend.scrape.layout import LAYOUTS, LayoutCache, build, digest_of, shape_json, values_of
from backend.scrape.parse import ExpositionError, ParsedScrape, parse, target_engine
from backend.services.collect import CycleSummary, _add, recorded_run
from backend.services.collect_chunks import cursor_range, plan_chunks
from backend.services.ingest import rejection_row, ts, write_records
from backend.services.replicas import write_replicas

log = logging.getLogger("specwatch.scrape")
CUT_RULES = {"deadline": "scrape_deadline", "too_large": "scrape_too_large"}


def redact(url: str) -> str:
    """A target URL without credentials or query string, safe for logs and rejection records."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def scrape_targets(factory: sessionmaker[Session], s: Settings, *, now: datetime) -> dict:
    """Fetch and store one raw scrape of every configured target. The result says how long each stage took
    (`seconds`: fetch, parse, store, wall clock; `cpu_seconds`: this process's CPU time in each), which
    `python -m benchmarks scrape` reports."""
    targets = {t.url: t.labels for t in s.scrape_targets}
    declared = {t.url: t.engine for t in s.scrape_targets}
    t0, c0 = time.perf_counter(), time.process_time()
    results = fetch_all(list(targets), timeout=s.scrape_timeout_seconds, max_bytes=s.scrape_max_body_bytes,
                        workers=s.scrape_concurrency)
    t1, c1 = time.perf_counter(), time.process_time()
    rows, rejections, errors = [], [], {}
    # the parse stage allocates ~1,000 acyclic objects a target; the collector cost ~25 % of the stage
    with gc_paused():
        for r in results:
            _parse_one(r, targets[r.url], s, now, rows, rejections, errors, engine=declared.get(r.url))
    failed = sum(1 for r in results if r.text is None)
    if results and failed == len(results):
        raise ScrapeUnavailable(f"none of {len(results)} targets answered")
    t2, c2 = time.perf_counter(), time.process_time()
    with session_scope(factory) as session:
        scrape_repo.add_raw_scrapes(session, rows, now=now)
        repo.record_rejections(session, rejections)
    seconds = {"fetch": t1 - t0, "parse": t2 - t1, "store": time.perf_counter() - t2}
    cpu = {"fetch": c1 - c0, "parse": c2 - c1, "store": time.process_time() - c2}
    return {"targets": len(results), "stored": len(rows), "failed": failed, "rejected": len(rejections),
            "errors": errors, "seconds": seconds, "cpu_seconds": cpu}


def pools_found(factory: sessionmaker[Session], s: Settings, *, since: datetime) -> set[PoolKey]:
    """The pools in the raw scrapes stored since `since` (a cycle's own scrape), named as the finalizer
    names them, even before two samples give them a bucket."""
    naming = PoolNaming(s.class_label, s.mode_label, s.default_class, s.default_mode)
    with session_scope(factory) as session:
        scrapes = stored_scrapes(session, since=since, until=datetime.now(since.tzinfo) + timedelta(days=1))
    return pools_in(scrapes, target_labels={t.url: t.labels for t in s.scrape_targets}, naming=naming)


def _parse_one(r, labels: dict, s: Settings, now: datetime, rows: list, rejections: list, errors: dict, *,
               engine: str | None = None) -> None:
    """One fetch result into a raw_scrapes row, or a rejection (a cut scrape, a malformed exposition, an
    exposition not of the target's declared engine, a llama.cpp target without a model_name label)."""
    key = PoolKey(f"(target {redact(r.url)})", labels.get(s.class_label, s.default_class),
                  labels.get(s.mode_label, s.default_mode))
    bucket = r.scraped_at - r.scraped_at % s.bucket_seconds  # a target's refusals: one row per bucket and rule
    if r.text is None:
        errors[redact(r.url)] = r.error
        log.warning("scrape of %s failed: %s", redact(r.url), r.error)
        if r.kind in CUT_RULES:  # a target that misbehaves (not one that is down) leaves a rejection row
            rejections.append(rejection_row(key, bucket, CUT_RULES[r.kind], r.error or "", source="scrape", now=now))
        return
    try:
        parsed = parse(r.text)
        target_engine(parsed, labels, engine)
        row = raw_row(r.url, r.scraped_at, parsed)
        LAYOUTS.checked(row["shape"], row["digest"])  # decoded once per shape
    except ExpositionError as exc:
        log.warning("rejected exposition from %s: %s", redact(r.url), exc)
        errors[redact(r.url)] = str(exc)[:300]
        rejections.append(rejection_row(key, bucket, exc.rule, str(exc), source="scrape", now=now))
        return
    rows.append(row)


def raw_row(target: str, at: float, parsed: ParsedScrape) -> dict:
    """A parsed scrape as scrape_repo.add_raw_scrapes stores it: its layout (shape and digest) and values."""
    shape = shape_json(parsed)
    values, created = values_of(parsed)
    return {"target": target, "scraped_at": ts(at), "shape": shape, "digest": digest_of(shape),
            "sample_values": values, "created_values": created}


def stored_scrapes(session: Session, *, since: datetime, until: datetime,
                   layouts: LayoutCache = LAYOUTS) -> list[Scrape]:
    """The raw scrapes in (since, until], in time order, with their layouts (decoded once a process)."""
    rows = scrape_repo.raw_scrape_rows(session, since=since, until=until)
    digests = scrape_repo.layout_digests(session, {r[2] for r in rows})
    by_id = {i: layouts.get(d) for i, d in digests.items()}
    missing = [i for i, lay in by_id.items() if lay is None]
    if missing:
        for i, (d, shape) in scrape_repo.layout_shapes(session, missing).items():
            by_id[i] = layouts.put(build(shape, d))
    return [Scrape(t, at, by_id[lid], np.frombuffer(v, "<f8"), np.frombuffer(c, "<f8"))
            for t, at, lid, v, c in rows]


def settle_of(s: Settings) -> float:
    """How long after its end the finalizer takes a bucket as complete: at least one scrape interval."""
    return max(s.settle_seconds, s.scrape_interval_seconds)


def split_lookahead(s: Settings) -> float:
    """How far past a bucket boundary an interval's later sample may lie for the interval to be split: the
    settle time less the scrape deadline (a sample is stored at most that long after its scrape started)
    and one second; 0 (nothing split) when the settle time is shorter than that."""
    return max(0.0, settle_of(s) - s.scrape_timeout_seconds - 1.0)


def finalize(factory: sessionmaker[Session], s: Settings, *, now: datetime) -> CycleSummary:
    """Write every complete bucket since the scrape cursor from the stored raw samples."""
    width = s.bucket_seconds
    summary = CycleSummary(source="scrape")
    naming = PoolNaming(s.class_label, s.mode_label, s.default_class, s.default_mode)
    target_labels = {t.url: t.labels for t in s.scrape_targets}
    with session_scope(factory) as session:
        cursor = repo.get_cursor(session, "scrape")
    # the raw samples start with the first scrape: never reach back further than the retention
    first_end, last_end, summary.note = cursor_range(cursor, now=now.timestamp(), s=s.model_copy(
        update={"settle_seconds": settle_of(s),
                "max_gap_seconds": min(s.max_gap_seconds, s.raw_retention_seconds)}))
    with recorded_run(factory, summary, kind="collect", now=now, stale_run_seconds=s.task_time_limit_seconds):
        for c_first, c_last in plan_chunks(first_end, last_end, width, s.backfill_chunk_buckets):
            _finalize_chunk(factory, s, summary, c_first, c_last, naming=naming, target_labels=target_labels,
                            now=now)
    return summary


def _finalize_chunk(factory, s: Settings, summary: CycleSummary, c_first: int, c_last: int, *,
                    naming: PoolNaming, target_labels: dict, now: datetime) -> None:
    width = s.bucket_seconds
    ends = complete_coarse_ends(c_first, c_last, s.replica_grain) if s.replica_grain else []
    first = min(c_first, ends[0] - s.replica_grain + width) if ends else c_first  # whole coarse buckets
    ahead = split_lookahead(s)
    with session_scope(factory) as session:
        scrapes = stored_scrapes(session, since=ts(first - width - s.scrape_max_gap_seconds),
                                 until=ts(c_last + ahead))
        records = assemble(scrapes, target_labels=target_labels, width=width, first_bucket=c_first - width,
                           last_bucket=c_last - width, max_gap=s.scrape_max_gap_seconds, naming=naming,
                           dip_tolerance=s.counter_dip_tolerance, split_within=ahead)
        attach_config(records, scrapes, s, target_labels=target_labels, naming=naming,
                      first_bucket=c_first - width, last_bucket=c_last - width)
        res = write_records(session, list(records.values()), width=width, source="scrape", now=now,
                            max_pools=s.max_pools)
        if ends:
            write_scraped_replicas(session, scrapes, s, naming=naming, target_labels=target_labels, ends=ends,
                                   now=now)
        repo.advance_cursor(session, "scrape", ts(c_last), now=now)
        scrape_repo.prune_raw_scrapes(session, before=ts(c_last) - timedelta(seconds=s.raw_retention_seconds))
    _add(summary, res, records, c_first - width, c_last)
    summary.buckets += (c_last - c_first) // width + 1
    summary.chunks += 1


def attach_config(records: dict, scrapes: list[Scrape], s: Settings, *, target_labels: dict, naming: PoolNaming,
                  first_bucket: int, last_bucket: int) -> None:
    """Set each record's drafter and vLLM version from the labels the deployment sets (target or series)."""
    configs = config_labels(scrapes, target_labels=target_labels, naming=naming, width=s.bucket_seconds,
                            first_bucket=first_bucket, last_bucket=last_bucket,
                            names=(s.drafter_label, s.vllm_version_label))
    for (key, b), rec in records.items():
        rec.drafter, rec.vllm_version = configs.get((key, b), (None, None))


REPLICA_OF = replica_of_target(redact)  # one function, so that assemble keeps each target's plan


def write_scraped_replicas(session: Session, scrapes: list[Scrape], s: Settings, *, naming: PoolNaming,
                           target_labels: dict, ends: list[int], now: datetime) -> int:
    """The replica rows of the coarse buckets ending at `ends`, from the same raw samples: a target is a
    replica (with its engines); its target labels other than the pool's are its version labels."""
    grain, width = s.replica_grain, s.bucket_seconds
    origins: dict = {}
    fine = assemble(scrapes, target_labels=target_labels, width=width, first_bucket=ends[0] - grain,
                    last_bucket=ends[-1] - width, max_gap=s.scrape_max_gap_seconds, naming=naming,
                    dip_tolerance=s.counter_dip_tolerance, split_within=split_lookahead(s),
                    replica_of=REPLICA_OF, origins=origins)
    labels = {key[1]: {k: v for k, v in target_labels.get(target, {}).items()
                       if k not in (s.class_label, s.mode_label, "instance")} for key, target in origins.items()}
    return write_replicas(session, [(key[1], rec) for (key, _b), rec in fine.items()], grain=grain, ends=ends,
                          source="scrape", now=now, labels=labels)
