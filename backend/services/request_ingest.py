"""Ingest a batch of per-request records in one transaction.

Flow: parse + validate every record (refused ones are counted, never stored) -> labels against the
allowlist and the per-label cardinality limit within its window (past it: the whole batch is refused, 422) -> the sender's
distinct models within the window and the new pools against `max_pools` (past either: refused, 422) -> pools of
per-request sums (model x traffic class x the serving engine's spec mode, origin `requests`: the records
source of that pool, beside its engine counters; backend.domain.pool_rows) -> COPY the rows, keeping
only request ids not seen before -> add exactly those rows' counts to their buckets in `pool_buckets`.
A retried batch finds every id stored and adds nothing. The checks that refuse a batch: services.request_checks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import repeat
from operator import is_not

import numpy as np
import orjson
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import request_repo as repo
from backend.domain import per_request as pr
from backend.domain import per_request_batch as prb
from backend.gc_pause import gc_paused
from backend.services import request_checks as chk
from backend.services.request_checks import BatchRefused, BatchTooLarge

MAX_LISTED_REFUSALS = 100


@dataclass
class IngestReport:
    received: int = 0
    stored: int = 0
    duplicates: int = 0
    refused: int = 0
    refused_by_rule: dict[str, int] = field(default_factory=dict)
    refusals: list[dict] = field(default_factory=list)  # the first MAX_LISTED_REFUSALS
    pools: int = 0
    buckets: int = 0

    def as_dict(self) -> dict:
        return {"received": self.received, "stored": self.stored, "duplicates": self.duplicates,
                "refused": self.refused, "refused_by_rule": dict(sorted(self.refused_by_rule.items())),
                "refusals": self.refusals, "refusals_truncated": self.refused > len(self.refusals),
                "pools": self.pools, "buckets": self.buckets}


def parse_body(body: bytes, *, max_records: int) -> list:
    """A JSON array of records, or NDJSON (one record per line; blank lines skipped). NaN and Infinity
    (which some JSON writers emit) are read as such, so the record is refused by rule, not the batch."""
    stripped = body.lstrip()
    if not stripped:
        raise BatchRefused("empty body: send a JSON array of records or NDJSON")
    if stripped.startswith(b"["):
        items = _loads(stripped, "body")
    else:
        items = []
        for n, line in enumerate(stripped.splitlines(), 1):
            if line.strip():
                if len(items) >= max_records:
                    raise BatchTooLarge(f"more than {max_records} records in one batch (requests_max_batch)")
                items.append(_loads(line, f"NDJSON line {n}"))
    if not isinstance(items, list):
        raise BatchRefused("body must be a JSON array of records or NDJSON")
    if len(items) > max_records:
        raise BatchTooLarge(f"{len(items)} records in one batch; at most {max_records} (requests_max_batch)")
    return items


def _loads(data: bytes, what: str):
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if b"NaN" in data or b"Infinity" in data:  # not JSON, but Python's json and others write it
            try:
                return json.loads(data)
            except ValueError:
                pass
        raise BatchRefused(f"{what} is not valid JSON (UTF-8): {exc}") from None


def ingest_body(session: Session, body: bytes, *, settings: Settings, now: datetime,
                sender: str | None = None, spec_mode: str | None = None) -> IngestReport:
    """POST /requests after authentication: parse the body, validate, store (raises BatchRefused,
    BatchTooLarge). `sender` (token:<id> or user:<name>) is who posts: the distinct-models cap counts per
    sender. `spec_mode`: the X-Specwatch-Spec-Mode header (records without their own)."""
    # a batch of 1,000 records makes ~10,000 acyclic containers (the JSON's dicts and lists, their columns)
    with gc_paused():
        items = parse_body(body, max_records=settings.requests_max_batch)
        return ingest(session, items, settings=settings, now=now, sender=sender, spec_mode=spec_mode)


def ingest(session: Session, items: list, *, settings: Settings, now: datetime,
           sender: str | None = None, spec_mode: str | None = None) -> IngestReport:
    report = IngestReport(received=len(items))
    try:
        batch = prb.validate_batch(items, chk.limits(settings, now))
    except pr.LabelRefused as exc:
        raise BatchRefused(f"record {exc.index}: {exc}") from None
    for index, item, exc in batch.refused:
        report.refused += 1
        report.refused_by_rule[exc.rule] = report.refused_by_rule.get(exc.rule, 0) + 1
        if len(report.refusals) < MAX_LISTED_REFUSALS:
            rid = item.get("request_id") if isinstance(item, dict) else None
            report.refusals.append({"index": index, "request_id": rid if isinstance(rid, str) else None,
                                    "rule": exc.rule, "detail": exc.detail})
    keep = _first_of_each(batch.request_id)
    if keep is not None:  # an id repeated inside the batch: its first valid record counts
        report.duplicates += len(batch) - len(keep)
        for name in ("index", "request_id", "model", "labels", "finish_us", "output_tokens", "k", "steps", "draft_tokens",
                     "accepted", "histogram", "engine"):
            column = getattr(batch, name)
            setattr(batch, name, [column[j] for j in keep])
    n = len(batch.request_id)
    if n == 0:
        return report
    label_sets = set(batch.labels)
    modes = chk.spec_modes(session, items, batch, settings=settings, batch_mode=spec_mode)
    chk.check_labels(session, {pair for labels in label_sets for pair in labels}, settings, now)

    # pools: model x traffic class x the serving engine's spec mode (origin requests: the records source of
    # that pool), with the span of buckets and the K they saw
    width = settings.bucket_seconds
    cls_label, default_class = settings.requests_class_label, settings.default_class
    key_code: dict[tuple[str, str, str], int] = {}
    code_of: dict[tuple, int] = {}
    engine_of: dict[tuple[str, str, str], tuple[str, bool]] = {}  # pool key -> (engine, reports draft tokens)
    kinds = zip(batch.model, batch.labels, modes, batch.engine, map(is_not, batch.draft_tokens, repeat(None)),
                strict=True)
    for model, labels, mode, engine, drafted in set(kinds):
        key = (model, dict(labels).get(cls_label) or default_class, mode)
        if engine_of.setdefault(key, (engine, drafted)) != (engine, drafted):
            raise BatchRefused(_mixed_engines(key, sorted({(engine, drafted), engine_of[key]})))
        code_of[(model, labels, mode)] = key_code.setdefault(key, len(key_code))
    keys = list(key_code)
    chk.check_room(session, keys, settings=settings, now=now, sender=sender)
    codes = np.fromiter(map(code_of.__getitem__, zip(batch.model, batch.labels, modes, strict=True)),
                        dtype=np.int64, count=n)
    w_us = width * 1_000_000
    starts = (np.array(batch.finish_us, dtype=np.int64) - 1) // w_us * w_us  # bucket (start, start + w]
    first = np.full(len(keys), np.iinfo(np.int64).max)
    last = np.full(len(keys), np.iinfo(np.int64).min)
    top_k = np.zeros(len(keys), dtype=np.int64)
    np.minimum.at(first, codes, starts)
    np.maximum.at(last, codes, starts)
    np.maximum.at(top_k, codes, np.array([k or 0 for k in batch.k], dtype=np.int64))  # K not reported: 0 -> None
    pools = repo.upsert_request_pools(session, {
        key: (_ts(int(first[c]) / 1e6), _ts(int(last[c]) / 1e6 + width), int(top_k[c]) or None)
        for c, key in enumerate(keys)}, engines={key: engine_of[key][0] for key in keys})
    pool_ids = [pools[key][0] for key in keys]
    stored_engines = repo.claim_pool_engines(session, {pool_ids[c]: engine_of[key] for c, key in enumerate(keys)})
    for c, key in enumerate(keys):
        if tuple(stored_engines[pool_ids[c]]) != engine_of[key]:
            raise BatchRefused(_mixed_engines(key, sorted({engine_of[key], stored_engines[pool_ids[c]]}), stored=True))
    days = {_ts(d * 86400).date() for d in np.unique(starts // 86_400_000_000).tolist()}
    stored, report.buckets, report.pools = repo.insert_and_add(
        session, copy_payload(batch, [pool_ids[c] for c in codes.tolist()], label_sets, chk.replicas(items, batch),
                              chk.prompt_tokens(items, batch), chk.running_requests(items, batch)),
        days=days, width=width, now=now)
    report.stored = stored
    report.duplicates += n - stored
    return report


def _mixed_engines(key: tuple[str, str, str], kinds: list[tuple[str, bool]], stored: bool = False) -> str:
    """Why a batch is refused whose records of one pool report different counts: records of different engines,
    or SGLang records with and without draft tokens (servers of different versions). A pool's bucket sums add
    one kind of record, so none of them is a partial sum of reported and missing counts."""
    model, cls, mode = key
    where = "this pool already holds records of the other" if stored else "the batch mixes them"
    named = " and of ".join(e if d else f"{e} without draft tokens" for e, d in kinds)
    return (f"batch refused, nothing stored: model {model!r}, class {cls!r}, spec mode {mode!r} gets records of "
            f"{named} ({where}); they report different counts and a pool adds up one "
            "kind: give the others a spec mode of their own (spec_mode)")


def _first_of_each(ids: list[str]) -> list[int] | None:
    """Positions of the first occurrence of each id, or None when no id repeats."""
    if len(set(ids)) == len(ids):
        return None
    first: dict[str, int] = {}
    for j, rid in enumerate(ids):
        first.setdefault(rid, j)
    return sorted(first.values())


def copy_payload(batch: prb.ValidBatch, pool_ids: list[int], label_sets: set, replica: list[str],
                 prompt: list[str], running: list[str] | None = None) -> str:
    """The batch as COPY text rows in request_repo.COPY_COLUMNS order (`replica`, `prompt`, `running`: COPY
    text, from replicas, prompt_tokens and running_requests; `running` None: none sent)."""
    if running is None:
        running = ["\\N"] * len(batch.request_id)
    labels_text = {labels: repo.copy_text(orjson.dumps(dict(labels)).decode()) for labels in label_sets}
    ids = list(map(repo.copy_text, batch.request_id))
    return "".join([
        f"{rid}\t{pid}\t{fin}\t{labels_text[labels]}\t{out}\t{_n(k)}\t{_n(steps)}\t{_n(drafted)}\t{acc}\t"
        f"{'{' + str(hist)[1:-1] + '}' if hist is not None else NULL}\t{rep}\t{ptok}\t{run}\t{engine}\n"
        for rid, pid, fin, labels, out, k, steps, drafted, acc, hist, rep, ptok, run, engine in zip(
            ids, pool_ids, batch.finish_us, batch.labels, batch.output_tokens, batch.k, batch.steps,
            batch.draft_tokens, batch.accepted, batch.histogram, replica, prompt, running, batch.engine, strict=True)])


NULL = "\\N"  # COPY text's NULL


def _n(value: int | None) -> str:
    return NULL if value is None else str(value)


def _ts(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
