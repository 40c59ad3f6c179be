"""Per-request acceptance: ingest a batch of records (one transaction), and what only per-request data shows
(α distribution per class, request- vs draft-token-weighted α, α against output length, the lowest requests,
reconciliation with the engine counters).

Ingest flow: parse + validate every record (refused ones are counted, never stored) -> labels against the
allowlist and the per-label cardinality limit within its window (past it: the whole batch is refused, 422) -> the sender's
distinct models within the window and the new pools against `max_pools` (past either: refused, 422) -> pools of
per-request sums (model x traffic class x the serving engine's spec mode, origin `requests`: the records
source of that pool, beside its engine counters; backend.domain.pool_rows) -> COPY the rows, keeping
only request ids not seen before -> add exactly those rows' counts to their buckets in `pool_buckets`.
A retried batch finds every id stored and adds nothing."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import repeat
from operator import is_not

import numpy as np
import orjson
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries
from backend.db import request_repo as repo
from backend.db.repositories import stored_pools
from backend.domain import per_request as pr
from backend.domain import per_request_batch as prb
from backend.domain.bands import BAND_EDGES
from backend.domain.records import PoolKey
from backend.gc_pause import gc_paused
from backend.services import load_bands
from backend.services.errors import InvalidParameter, UnknownModel
from backend.services.totals import group_rows
from backend.services.windows import Range

MAX_LISTED_REFUSALS = 100
QUANTILES = (0.1, 0.5, 0.9)
HIST_BINS = 20


class BatchRefused(InvalidParameter):
    """The whole batch is refused (422): unparseable, a label not allowed, a label past its limit."""

    code = "batch_refused"


class BatchTooLarge(ValueError):
    """More records or bytes than allowed (413)."""


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


def limits(settings: Settings, now: datetime) -> pr.RecordLimits:
    t = now.timestamp()
    return pr.RecordLimits(allowed_labels=frozenset(settings.requests_labels), max_id_length=200,
                           max_model_length=300, max_label_value_length=settings.requests_label_value_max_length,
                           oldest=t - settings.requests_retention_days * 86400,
                           newest=t + settings.requests_future_seconds)


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
        batch = prb.validate_batch(items, limits(settings, now))
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
    modes = spec_modes(session, items, batch, settings=settings, batch_mode=spec_mode)
    _check_labels(session, {pair for labels in label_sets for pair in labels}, settings, now)

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
    _check_room(session, keys, settings=settings, now=now, sender=sender)
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
        session, copy_payload(batch, [pool_ids[c] for c in codes.tolist()], label_sets, replicas(items, batch),
                              prompt_tokens(items, batch), running_requests(items, batch)),
        days=days, width=width, now=now)
    report.stored = stored
    report.duplicates += n - stored
    return report


def _kind(kind: tuple[str, bool]) -> str:
    engine, drafted = kind
    return engine if drafted else f"{engine} without draft tokens"


def _mixed_engines(key: tuple[str, str, str], kinds: list[tuple[str, bool]], stored: bool = False) -> str:
    """Why a batch is refused whose records of one pool report different counts: records of different engines,
    or SGLang records with and without draft tokens (servers of different versions). A pool's bucket sums add
    one kind of record, so none of them is a partial sum of reported and missing counts."""
    model, cls, mode = key
    where = "this pool already holds records of the other" if stored else "the batch mixes them"
    return (f"batch refused, nothing stored: model {model!r}, class {cls!r}, spec mode {mode!r} gets records of "
            f"{' and of '.join(map(_kind, kinds))} ({where}); they report different counts and a pool adds up one "
            "kind: give the others a spec mode of their own (spec_mode)")


def spec_modes(session: Session, items: list, batch: prb.ValidBatch, *, settings: Settings,
               batch_mode: str | None = None) -> list[str]:
    """The spec mode of the engine that served each valid record: the record's `spec_mode`, else the batch's
    (the X-Specwatch-Spec-Mode header), else the model's only spec mode among its engine pools. A bad name, or
    a model whose spec mode cannot be told (no engine pool reports it yet, or it runs several), refuses the
    batch (422) naming what to send."""
    if batch_mode is not None:
        _check_mode(batch_mode, "the X-Specwatch-Spec-Mode header", settings)
    given = _field(items, batch, "spec_mode")
    try:
        distinct = set(given)
    except TypeError:  # an object or a list: not a name
        distinct = None
    if distinct is None or not all(m is None or _mode_ok(m, settings) for m in distinct):
        j = next(j for j, m in enumerate(given) if m is not None and not _mode_ok(m, settings))
        _check_mode(given[j], f"record {batch.index[j]}: spec_mode", settings)
    if batch_mode is None and None not in distinct:
        return given
    need = sorted({m for m, g in zip(batch.model, given, strict=True) if g is None})
    known = repo.engine_spec_modes(session, need, baseline_mode=settings.baseline_mode) if batch_mode is None else {}
    default: dict[str, str] = {}
    for model in need if batch_mode is None else ():
        found = known.get(model, [])
        if len(found) != 1:
            why = (f"its engine pools run several spec modes ({', '.join(found)})" if found
                   else "no engine pool of it is collected yet")
            raise BatchRefused(f"model {model!r}: records name no spec_mode and {why}; send the spec mode of the "
                               "engine that served them as each record's spec_mode or the X-Specwatch-Spec-Mode "
                               "header")
        default[model] = found[0]
    return [g if g is not None else (batch_mode or default[m]) for g, m in zip(given, batch.model, strict=True)]


def _field(items: list, batch: prb.ValidBatch, name: str) -> list:
    """Each valid record's optional top-level field `name` (None where absent); valid records are dicts."""
    return list(map(dict.get, map(items.__getitem__, batch.index), repeat(name)))


def _mode_ok(mode: object, settings: Settings) -> bool:
    return (type(mode) is str and 0 < len(mode) <= 120 and bool(mode.strip()) and "\x00" not in mode
            and mode != settings.baseline_mode)


def _check_mode(mode: object, what: str, settings: Settings) -> None:
    if not isinstance(mode, str) or not mode.strip() or len(mode) > 120 or "\x00" in mode:
        raise BatchRefused(f"{what} must be a spec mode name (1 to 120 characters)")
    if mode == settings.baseline_mode:
        raise BatchRefused(f"{what} is {mode!r}, the baseline (no drafter): records of speculative decoding "
                           "come from a spec-decoding engine")


def _first_of_each(ids: list[str]) -> list[int] | None:
    """Positions of the first occurrence of each id, or None when no id repeats."""
    if len(set(ids)) == len(ids):
        return None
    first: dict[str, int] = {}
    for j, rid in enumerate(ids):
        first.setdefault(rid, j)
    return sorted(first.values())


def replicas(items: list, batch: prb.ValidBatch) -> list[str]:
    """Each valid record's `replica` (the engine replica that served it, where the gateway knows it) as COPY
    text, \\N where it has none; a replica that is not a short string refuses the batch (422)."""
    given = _field(items, batch, "replica")
    try:
        distinct = set(given)
    except TypeError:  # an object or a list: not a replica name
        distinct = None
    if distinct is None or not all(r is None or _replica_ok(r) for r in distinct):
        j = next(j for j, r in enumerate(given) if r is not None and not _replica_ok(r))
        raise BatchRefused(f"record {batch.index[j]}: replica must be a string of 1 to 200 characters")
    text = {r: "\\N" if r is None else repo.copy_text(r) for r in distinct}
    return list(map(text.__getitem__, given))


def prompt_tokens(items: list, batch: prb.ValidBatch) -> list[str]:
    """Each valid record's `prompt_tokens` (its context length, vLLM's usage.prompt_tokens) as COPY text, \\N
    where it has none; one that is not a count (an integer 0 .. 2^31-1) refuses the batch (422)."""
    given = _field(items, batch, "prompt_tokens")
    kinds = set(map(type, given))
    if kinds == {type(None)}:
        return ["\\N"] * len(given)
    counts = [g for g in given if g is not None]
    if not kinds <= {int, type(None)} or min(counts) < 0 or max(counts) > pr.MAX_COUNT:
        j = next(j for j, g in enumerate(given) if g is not None and not (type(g) is int and 0 <= g <= pr.MAX_COUNT))
        raise BatchRefused(f"record {batch.index[j]}: prompt_tokens must be a whole number of tokens "
                           f"(0 .. {pr.MAX_COUNT})")
    return ["\\N" if g is None else str(g) for g in given]


MAX_RUNNING_REQUESTS = 1_000_000  # far above any engine's max_num_seqs; a larger count is a unit mistake


def running_requests(items: list, batch: prb.ValidBatch) -> list[str]:
    """Each valid record's `running_requests` (the serving engine's vllm:num_requests_running when it finished,
    where the gateway knows it) as COPY text, \\N where it has none; one that is not a whole number 1 ..
    MAX_RUNNING_REQUESTS (the request itself was running) refuses the batch (422)."""
    given = _field(items, batch, "running_requests")
    kinds = set(map(type, given))
    if kinds == {type(None)}:
        return ["\\N"] * len(given)
    counts = [g for g in given if g is not None]
    if not kinds <= {int, type(None)} or min(counts) < 1 or max(counts) > MAX_RUNNING_REQUESTS:
        j = next(j for j, g in enumerate(given)
                 if g is not None and not (type(g) is int and 1 <= g <= MAX_RUNNING_REQUESTS))
        raise BatchRefused(f"record {batch.index[j]}: running_requests must be a whole number of running requests "
                           f"(1 .. {MAX_RUNNING_REQUESTS:,}; the request itself was running)")
    return ["\\N" if g is None else str(g) for g in given]


def _replica_ok(r: object) -> bool:
    return type(r) is str and 0 < len(r) <= 200 and "\x00" not in r and bool(r.strip())


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


def _check_labels(session: Session, pairs: set[tuple[str, str]], settings: Settings, now: datetime) -> None:
    """Values seen within requests_label_values_window_seconds are marked seen (one statement); the others
    (new, or last seen before the window) are added only while every label stays within
    requests_label_max_values distinct values in the window (under a lock, so concurrent batches cannot both
    pass the limit). Past it the whole batch is refused (BatchRefused: 422, nothing stored)."""
    if not pairs:
        return
    window = settings.requests_label_values_window_seconds
    since = now - timedelta(seconds=window)
    new = pairs - repo.touch_known_labels(session, pairs, now, since)
    if not new:
        return
    repo.lock_labels(session)
    counts = repo.label_counts(session, {name for name, _ in new}, since)
    for name, n in sorted(Counter(name for name, _ in new).items()):
        if counts.get(name, 0) + n > settings.requests_label_max_values:
            examples = sorted(v for k, v in new if k == name)[:5]
            raise BatchRefused(
                f"batch refused, nothing stored: label {name!r} would have {counts.get(name, 0) + n} distinct "
                f"values in the last {window:g} s, over the limit of {settings.requests_label_max_values} "
                "(SPECWATCH_REQUESTS_LABEL_MAX_VALUES per SPECWATCH_REQUESTS_LABEL_VALUES_WINDOW_SECONDS); new "
                f"values include {', '.join(map(repr, examples))}. A label with unbounded values (a user or "
                "request id) does not belong in labels")
    repo.add_label_values(session, new, now)


def _check_room(session: Session, keys: list[tuple[str, str, str]], *, settings: Settings, now: datetime,
                sender: str | None) -> None:
    """Refuse the whole batch (BatchRefused: 422, nothing stored) when it would take `sender` past
    requests_max_models_per_sender distinct models within requests_models_window_seconds, or the pools past
    max_pools (the limit collection obeys: a flood of model names must not flood every page). A batch that
    adds a model or a pool is checked again under a lock, so concurrent batches cannot both pass; one that
    adds neither takes no lock. The sender's models are then noted as seen now."""
    models = {key[0] for key in keys}
    cap, window = settings.requests_max_models_per_sender, settings.requests_models_window_seconds
    for locked in (False, True):
        if locked:
            repo.lock_senders(session)
        known = repo.sender_models(session, sender, now - timedelta(seconds=window)) if sender else models
        new = sorted(models - known)
        stored, total = stored_pools(session, [PoolKey(*key) for key in keys], origin="requests") if settings.max_pools > 0 else (
            {PoolKey(*key) for key in keys}, 0)
        new_pools = sorted(key for key in keys if PoolKey(*key) not in stored)
        if not new and not new_pools:
            break
        if not locked:
            continue
        if len(known) + len(new) > cap:
            raise BatchRefused(
                f"batch refused, nothing stored: it names {len(new)} model(s) this sender has not posted in the "
                f"last {window:g} s (e.g. {', '.join(map(repr, new[:3]))}), {len(known)} already; at most {cap} "
                "distinct models per sender and window (SPECWATCH_REQUESTS_MAX_MODELS_PER_SENDER per "
                "SPECWATCH_REQUESTS_MODELS_WINDOW_SECONDS). A model name is a served model, not a free-form value")
        if new_pools and total + len(new_pools) > settings.max_pools:
            raise BatchRefused(
                f"batch refused, nothing stored: it would add {len(new_pools)} pool(s) to the {total} stored, over "
                f"the limit of {settings.max_pools} pools (SPECWATCH_MAX_POOLS; e.g. {new_pools[0][0]!r})")
    if sender is not None:
        repo.note_sender_models(session, sender, models, now)


def _ts(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


# --- reads ----------------------------------------------------------------------------------------------


def _pools(session: Session, model: str) -> list:
    pools = queries.list_pools(session, model_name=model)
    if not pools:
        raise UnknownModel(model, queries.model_names(session))
    return pools


def parse_label_filter(values: list[str] | None, settings: Settings) -> dict[str, str]:
    out = {}
    for v in values or []:
        name, sep, value = v.partition("=")
        if not sep or name not in settings.requests_labels or not value:
            raise InvalidParameter(f"label={v!r}: expected name=value with name one of "
                                   f"{', '.join(settings.requests_labels)}")
        out[name] = value
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def distribution(session: Session, *, model: str, rng: Range, settings: Settings, traffic_class: str | None = None,
                 label_filter: dict[str, str] | None = None) -> dict:
    """Per class of the model's per-request pools: the α histogram, share below the threshold, P10/P50/P90,
    request-weighted vs draft-token-weighted α, α by output length, and both α with 95 % intervals by
    context-length band (powers of two of prompt_tokens; the last band, 131,072 and up, open-ended) over the
    requests that sent prompt_tokens and drafted; α and τ by concurrency band with the load-stability finding
    (services.load_bands)."""
    pools = [p for p in _pools(session, model) if p.origin == "requests"
             and (traffic_class is None or p.traffic_class == traffic_class)]
    ids = [p.id for p in pools]
    args = {"pool_ids": ids, "lo": rng.start, "hi": rng.end, "label_filter": label_filter}
    stats = {s.pool_id: s for s in repo.alpha_stats(session, threshold=settings.alpha_threshold,
                                                     quantiles=QUANTILES, **args)} if ids else {}
    hist = repo.alpha_histogram(session, bins=HIST_BINS, **args) if ids else {}
    by_len: dict[int, list] = {}
    for pid, band, n, d, a, mean in (repo.alpha_by_length(session, **args) if ids else []):
        by_len.setdefault(pid, []).append({
            "output_tokens_from": 2 ** band, "output_tokens_to": 2 ** (band + 1) - 1, "requests": n,
            "draft_token_weighted_alpha": _ratio(a, d), "request_weighted_alpha": mean})
    by_ctx = context_length_bands(session, pool_ids=ids, rng=rng, label_filter=label_filter)
    load = load_bands.groups_by_pool(session, settings=settings, **args)
    load_rules = load_bands.stored_rules(session) if load else []
    classes = []
    for p in sorted(pools, key=lambda p: p.traffic_class):
        s = stats.get(p.id)
        if s is None:
            continue
        target = {"model": p.model_name, "traffic_class": p.traffic_class, "spec_mode": p.spec_mode}
        params = load_bands.rule_params(load_bands.rule_for(load_rules, target), target,
                                        min_drafts=settings.min_drafts)
        classes.append({
            "traffic_class": p.traffic_class, "spec_mode": p.spec_mode, "num_spec_tokens": p.num_spec_tokens,
            "requests": s.requests, "requests_with_drafts": s.with_drafts, "drafts": s.steps,
            "draft_tokens": s.draft_tokens, "accepted_tokens": s.accepted, "output_tokens": s.output_tokens,
            "draft_token_weighted_alpha": _ratio(s.accepted, s.draft_tokens),
            "request_weighted_alpha": s.request_mean,
            "share_below_threshold": _ratio(s.below, s.with_drafts),
            "p10": s.quantiles[0], "p50": s.quantiles[1], "p90": s.quantiles[2],
            "histogram": {"bin_width": 1 / HIST_BINS, "counts": hist.get(p.id, [0] * HIST_BINS)},
            "by_output_length": by_len.get(p.id, []),
            "by_context_length": by_ctx.get(p.id, []),
            **load_bands.class_view(load.get(p.id, []), params),
        })
    return {"model_name": model, "window": {"start": rng.start, "end": rng.end}, "threshold": settings.alpha_threshold,
            "label_filter": label_filter or {}, "classes": classes}


CONTEXT_LABEL = "α by context length"  # the section's name on every surface (API docs, model page, report)


def context_length_bands(session: Session, *, pool_ids: list[int], rng: Range,
                         label_filter: dict[str, str] | None = None) -> dict[int, list[dict]]:
    """α by context-length band per records pool: the API's `by_context_length`, the model page's and the
    weekly report's section (one function for every surface). Band b holds prompt_tokens in [2^b, 2^(b+1))
    (the first from 0, the last, 131,072 and up, open-ended), over the requests that sent prompt_tokens and
    drafted; per band: requests, drafts (verify steps), draft and accepted tokens, the pooled
    (draft-token-weighted) α and the request-weighted α, each with its 95 % interval (request = unit).
    A pool without such requests has no entry."""
    out: dict[int, list[dict]] = {}
    if not pool_ids:
        return out
    for pid, band, n, d, a, saa, sdd, sad, mean, sd, steps in repo.alpha_by_context(
            session, pool_ids=pool_ids, lo=rng.start, hi=rng.end, label_filter=label_filter):
        pooled, lo, hi = pr.pooled_alpha_interval(n, a, d, saa, sdd, sad)
        weighted, wlo, whi = pr.mean_alpha_interval(n, mean, sd)
        top = band == repo.CONTEXT_TOP_BAND
        out.setdefault(pid, []).append({
            "prompt_tokens_from": 2 ** band if band else 0, "prompt_tokens_to": None if top else 2 ** (band + 1) - 1,
            "requests": n, "drafts": steps, "draft_tokens": d, "accepted_tokens": a,
            "draft_token_weighted_alpha": pooled, "draft_token_weighted_alpha_interval": [lo, hi],
            "request_weighted_alpha": weighted, "request_weighted_alpha_interval": [wlo, whi]})
    return out


def lowest_requests(session: Session, *, model: str, rng: Range, settings: Settings, limit: int,
                    min_draft_tokens: int, traffic_class: str | None = None,
                    label_filter: dict[str, str] | None = None) -> dict:
    """The lowest-acceptance requests: ids and labels (never prompt text), for drafter fine-tuning."""
    if not 1 <= limit <= settings.requests_export_max:
        raise InvalidParameter(f"limit must be 1 .. {settings.requests_export_max} (requests_export_max)")
    pools = {p.id: p for p in _pools(session, model) if p.origin == "requests"
             and (traffic_class is None or p.traffic_class == traffic_class)}
    rows = repo.lowest(session, pool_ids=list(pools), lo=rng.start, hi=rng.end, limit=limit,
                       min_draft_tokens=min_draft_tokens, label_filter=label_filter) if pools else []
    return {"model_name": model, "window": {"start": rng.start, "end": rng.end}, "requests": [
        {"request_id": rid, "traffic_class": pools[pid].traffic_class, "labels": labels, "finish_time": fin,
         "output_tokens": out, "drafts": steps, "draft_tokens": d, "accepted_tokens": a, "alpha": alpha,
         "replica": replica}
        for rid, pid, labels, fin, out, steps, d, a, alpha, replica in rows]}


def reconciliation(session: Session, *, model: str, rng: Range, settings: Settings) -> dict:
    """Per-request sums vs the engine counters of the same model and window (buckets ending in it), and the
    coverage: the share of the engine's drafts, draft tokens and accepted tokens seen per request. The engine
    side is every spec-decoding pool of the model collected from vLLM (baseline pools have no drafts).
    Each coverage is flagged on its own (`coverage_flags`: coverage -> flag or None, per_request.coverage_flag);
    `flags` lists every flag raised by any of them, plus the missing-data flags."""
    pools = _pools(session, model)
    spec = [p for p in pools if p.spec_mode != settings.baseline_mode]
    rows = queries.window_totals(session, pool_ids=[p.id for p in spec], start=rng.start, end=rng.end,
                                 bucket_seconds=settings.bucket_seconds, n_pos=1, band_edges=BAND_EDGES)
    per_pool = group_rows(rows)
    sums: dict[str, dict[str, float | None]] = {}
    for origin in ("engine", "requests"):
        t = [per_pool[p.id].all for p in spec if p.origin == origin and p.id in per_pool]
        sums[origin] = {name: _sum(getattr(x, name) for x in t) for name in ("drafts", "draft_tokens", "accepted_tokens")}
        sums[origin]["alpha"] = _ratio(sums[origin]["accepted_tokens"], sums[origin]["draft_tokens"])
    eng, req = sums["engine"], sums["requests"]
    cov = {name: pr.coverage(req[name], eng[name]) for name in pr.COVERAGES}
    cov_flags = {name: pr.coverage_flag(req[name], eng[name]) for name in pr.COVERAGES}
    flags = []
    if eng["drafts"] is None:
        flags.append("no_engine_counters")
    if req["drafts"] is None:
        flags.append("no_per_request_data")
    flags += [f for f in ("per_request_exceeds_engine", "partial_coverage") if f in cov_flags.values()]
    return {"model_name": model, "window": {"start": rng.start, "end": rng.end}, "engine": eng, "per_request": req,
            "coverage": cov, "coverage_flags": cov_flags, "flags": flags,
            "coverage_band": [float(pr.COVERAGE_LOW), float(pr.COVERAGE_HIGH)]}


def _sum(values) -> float | None:
    out = None
    for v in values:
        if v is not None:
            out = v if out is None else out + v
    return out
