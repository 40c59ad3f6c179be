"""What refuses a per-request batch (422 or 413): its records' optional fields (spec mode, replica, prompt
and running counts, as COPY text), label cardinality, and the sender's models and the pools past their limits."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from itertools import repeat

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import request_repo as repo
from backend.db.repositories import stored_pools
from backend.domain import per_request as pr
from backend.domain import per_request_batch as prb
from backend.domain.records import PoolKey
from backend.services.errors import InvalidParameter


class BatchRefused(InvalidParameter):
    """The whole batch is refused (422): unparseable, a label not allowed, a label past its limit."""

    code = "batch_refused"


class BatchTooLarge(ValueError):
    """More records or bytes than allowed (413)."""


def limits(settings: Settings, now: datetime) -> pr.RecordLimits:
    t = now.timestamp()
    return pr.RecordLimits(allowed_labels=frozenset(settings.requests_labels), max_id_length=200,
                           max_model_length=300, max_label_value_length=settings.requests_label_value_max_length,
                           oldest=t - settings.requests_retention_days * 86400,
                           newest=t + settings.requests_future_seconds)


def spec_modes(session: Session, items: list, batch: prb.ValidBatch, *, settings: Settings,
               batch_mode: str | None = None) -> list[str]:
    """The spec mode of the engine that served each valid record: the record's `spec_mode`, else the batch's
    (the X-Specwatch-Spec-Mode header), else the model's only spec mode among its engine pools. A bad name, or
    a model whose spec mode cannot be told (no engine pool reports it yet, or it runs several), refuses the
    batch (422) naming what to send."""
    if batch_mode is not None:
        _check_mode(batch_mode, "the X-Specwatch-Spec-Mode header", settings)
    given = _field(items, batch, "spec_mode")
    j = _first_bad(given, lambda m: _mode_ok(m, settings))
    if j is not None:
        _check_mode(given[j], f"record {batch.index[j]}: spec_mode", settings)
    if batch_mode is None and None not in given:
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


def _first_bad(given: list, ok) -> int | None:
    """The position of the first value that is present and not `ok`; None: every one is absent or ok."""
    try:
        if all(v is None or ok(v) for v in set(given)):
            return None
    except TypeError:  # an object or a list among them: not a name
        pass
    return next(j for j, v in enumerate(given) if v is not None and not ok(v))


def _mode_ok(mode: object, settings: Settings) -> bool:
    return (type(mode) is str and 0 < len(mode) <= 120 and bool(mode.strip()) and "\x00" not in mode
            and mode != settings.baseline_mode)


def _check_mode(mode: object, what: str, settings: Settings) -> None:
    if not isinstance(mode, str) or not mode.strip() or len(mode) > 120 or "\x00" in mode:
        raise BatchRefused(f"{what} must be a spec mode name (1 to 120 characters)")
    if mode == settings.baseline_mode:
        raise BatchRefused(f"{what} is {mode!r}, the baseline (no drafter): records of speculative decoding "
                           "come from a spec-decoding engine")


def replicas(items: list, batch: prb.ValidBatch) -> list[str]:
    """Each valid record's `replica` (the engine replica that served it, where the gateway knows it) as COPY
    text, \\N where it has none; a replica that is not a short string refuses the batch (422)."""
    given = _field(items, batch, "replica")
    j = _first_bad(given, _replica_ok)
    if j is not None:
        raise BatchRefused(f"record {batch.index[j]}: replica must be a string of 1 to 200 characters")
    text = {r: "\\N" if r is None else repo.copy_text(r) for r in set(given)}
    return list(map(text.__getitem__, given))


def _counts(items: list, batch: prb.ValidBatch, name: str, low: int, high: int, what: str) -> list[str]:
    """Each valid record's optional count `name` as COPY text, \\N where it has none; one that is not a whole
    number low .. high refuses the batch (422): "record i: `name` must be `what`"."""
    given = _field(items, batch, name)
    kinds = set(map(type, given))
    if kinds == {type(None)}:
        return ["\\N"] * len(given)
    counts = [g for g in given if g is not None]
    if not kinds <= {int, type(None)} or min(counts) < low or max(counts) > high:
        j = next(j for j, g in enumerate(given) if g is not None and not (type(g) is int and low <= g <= high))
        raise BatchRefused(f"record {batch.index[j]}: {name} must be {what}")
    return ["\\N" if g is None else str(g) for g in given]


def prompt_tokens(items: list, batch: prb.ValidBatch) -> list[str]:
    """Each valid record's `prompt_tokens` (its context length, vLLM's usage.prompt_tokens): a count 0 .. 2^31-1."""
    return _counts(items, batch, "prompt_tokens", 0, pr.MAX_COUNT, f"a whole number of tokens (0 .. {pr.MAX_COUNT})")


MAX_RUNNING_REQUESTS = 1_000_000  # far above any engine's max_num_seqs; a larger count is a unit mistake


def running_requests(items: list, batch: prb.ValidBatch) -> list[str]:
    """Each valid record's `running_requests` (the serving engine's vllm:num_requests_running when it finished,
    where the gateway knows it): 1 .. MAX_RUNNING_REQUESTS (the request itself was running)."""
    return _counts(items, batch, "running_requests", 1, MAX_RUNNING_REQUESTS, "a whole number of running requests "
                   f"(1 .. {MAX_RUNNING_REQUESTS:,}; the request itself was running)")


def _replica_ok(r: object) -> bool:
    return type(r) is str and 0 < len(r) <= 200 and "\x00" not in r and bool(r.strip())


def check_labels(session: Session, pairs: set[tuple[str, str]], settings: Settings, now: datetime) -> None:
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


def check_room(session: Session, keys: list[tuple[str, str, str]], *, settings: Settings, now: datetime,
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
