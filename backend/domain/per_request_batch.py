"""Validate a whole batch of per-request records at once (columns and numpy), with exactly the rules of
`per_request.parse_record`. Pure: no I/O.

The usual record (summary metrics, counts as JSON integers, rates as floats, finish time in unix seconds)
is checked column-wise: its fields are gathered with C-level `itemgetter`/`map`, the arithmetic rules
(K range, histogram length, Σh = steps, Σj·h = accepted, accepted ≤ drafted ≤ K·steps, bounds, rates)
run as numpy vector operations. Any record that is not plainly valid there — any doubt, any unusual
shape (ISO finish time, `detailed` per-step lists, by-draft-length rows, a bad label) — goes through
`parse_record` itself, which gives the refusal rule or the record. So the batch path never accepts what
`parse_record` refuses, and the values it keeps are the ones `parse_record` would return."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import is_, is_not, itemgetter

import numpy as np

from backend.domain.per_request import (
    DEFAULT_ENGINE,
    MAX_COUNT,
    MAX_K,
    RATE_TOL,
    LabelRefused,
    RecordLimits,
    Refused,
    parse_record,
)

_TOP = itemgetter("request_id", "model", "finish_time", "output_tokens", "speculative_decoding")
_SPEC = itemgetter("num_spec_tokens", "num_spec_steps", "num_draft_tokens", "num_accepted_draft_tokens",
                   "acceptance_histogram")
_BY_LENGTH = "acceptance_histogram_by_draft_length"
_NO_LABELS = ()


@dataclass
class ValidBatch:
    """The valid records of a batch in body order, as columns; `refused` holds (index, item, Refused)."""

    index: list[int] = field(default_factory=list)
    request_id: list[str] = field(default_factory=list)
    model: list[str] = field(default_factory=list)
    labels: list[tuple[tuple[str, str], ...]] = field(default_factory=list)  # sorted (name, value)
    finish_us: list[int] = field(default_factory=list)  # unix microseconds
    output_tokens: list[int] = field(default_factory=list)
    k: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    draft_tokens: list[int] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)
    histogram: list[list[int] | None] = field(default_factory=list)  # None: the engine reports none
    engine: list[str] = field(default_factory=list)
    refused: list[tuple[int, object, Refused]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.index)


def finish_us(seconds: float) -> int:
    """Unix seconds -> whole microseconds (round half to even, as datetime.fromtimestamp does)."""
    return round(seconds * 1_000_000)


def validate_batch(items: Sequence[object], limits: RecordLimits) -> ValidBatch:
    """Every item validated; raises LabelRefused (the batch) at the first item whose labels are refused."""
    n = len(items)
    fast = _screen(items, limits)
    out = ValidBatch()
    fast_set = set(fast.index)
    slow = [i for i in range(n) if i not in fast_set] if len(fast_set) < n else []
    if not slow:
        return fast
    for i in slow:  # body order, so a LabelRefused names the same record as a record-by-record pass
        try:
            rec = parse_record(items[i], limits)
        except Refused as exc:
            out.refused.append((i, items[i], exc))
            continue
        except LabelRefused as exc:
            exc.index = i
            raise
        out.index.append(i)
        out.request_id.append(rec.request_id)
        out.model.append(rec.model)
        out.labels.append(rec.labels)
        out.finish_us.append(finish_us(rec.finish_time))
        out.output_tokens.append(rec.output_tokens)
        out.k.append(rec.spec.k)
        out.steps.append(rec.spec.steps)
        out.draft_tokens.append(rec.spec.draft_tokens)
        out.accepted.append(rec.spec.accepted)
        out.histogram.append(None if rec.spec.histogram is None else list(rec.spec.histogram))
        out.engine.append(rec.engine)
    if not fast.index:
        return out
    merged = ValidBatch(refused=out.refused)
    order = sorted(range(len(fast) + len(out)), key=lambda j: fast.index[j] if j < len(fast) else out.index[j - len(fast)])
    for name in ("index", "request_id", "model", "labels", "finish_us", "output_tokens", "k", "steps",
                 "draft_tokens", "accepted", "histogram", "engine"):
        both = getattr(fast, name) + getattr(out, name)
        setattr(merged, name, [both[j] for j in order])
    return merged


_FAST_SPEC_KEYS = frozenset(("num_spec_tokens", "num_spec_steps", "num_draft_tokens", "num_accepted_draft_tokens",
                             "acceptance_histogram", "mean_acceptance_length", "draft_acceptance_rate", _BY_LENGTH))
_NONE = type(None)


def _plain(item: object) -> bool:
    """The shape the column pass handles (types only, vLLM records); anything else goes to parse_record."""
    if type(item) is not dict or item.get("engine", DEFAULT_ENGINE) != DEFAULT_ENGINE:
        return False
    try:
        rid, model, fin, out, sd = _TOP(item)
        counts = _SPEC(sd)
    except (KeyError, TypeError):
        return False
    return (type(rid) is str and type(model) is str and type(fin) in (float, int) and type(out) is int
            and type(sd) is dict and _FAST_SPEC_KEYS.issuperset(sd)
            and all(type(c) is int for c in counts[:4]) and type(counts[4]) is list
            and all(type(v) is int for v in counts[4])
            and type(sd.get("mean_acceptance_length")) in (float, _NONE)
            and type(sd.get("draft_acceptance_rate")) in (float, _NONE)
            and type(item.get("labels")) in (dict, _NONE))


def _plain_batch(items: Sequence[object]) -> tuple[list, list] | None:
    """(top fields, spec fields) of every item when all have the plain shape (checked with C-level maps), else
    None."""
    try:
        top = list(map(_TOP, items))
        _, _, _, _, sds = cols = list(zip(*top, strict=True))
        specs = list(map(_SPEC, sds))
        k, steps, drafted, accepted, hists = list(zip(*specs, strict=True))
    except (KeyError, TypeError, ValueError):
        return None
    try:  # vLLM records only (an engine that is a list or an object: parse_record refuses it)
        vllm = set(map(dict.get, items, repeat("engine"))) <= {None, DEFAULT_ENGINE}
    except TypeError:
        return None
    if not (vllm and set(map(type, items)) == {dict} and set(map(type, chain(cols[0], cols[1]))) == {str}
            and set(map(type, cols[2])) <= {float, int} and set(map(type, sds)) == {dict}
            and set(map(type, chain(cols[3], k, steps, drafted, accepted))) == {int}
            and set(map(type, hists)) == {list} and set(map(type, chain.from_iterable(hists))) <= {int}
            and all(map(_FAST_SPEC_KEYS.issuperset, sds))
            and set(map(type, map(dict.get, sds, repeat("mean_acceptance_length")))) <= {float, _NONE}
            and set(map(type, map(dict.get, sds, repeat("draft_acceptance_rate")))) <= {float, _NONE}
            and set(map(type, map(dict.get, items, repeat("labels")))) <= {dict, _NONE}):
        return None
    return top, specs


def _label_keys(items: list, limits: RecordLimits) -> list:
    """Per item: its sorted label pairs when every label is allowed and valid, else None (the record goes to
    parse_record, which refuses it or the batch). Each distinct label object is checked once."""
    given = list(map(dict.get, items, repeat("labels")))
    if None in given:
        raw = [tuple(labels.items()) if labels else _NO_LABELS for labels in given]
    else:
        raw = list(map(tuple, map(dict.items, given)))
    try:
        distinct = set(raw)
    except TypeError:  # a label value that is a list or an object: not a string, so those records go one by one
        return [_label_key(key, limits) if _hashable(key) else None for key in raw]
    checked = {key: _label_key(key, limits) for key in distinct}
    return list(map(checked.__getitem__, raw))


def _hashable(key: tuple) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True


def _label_key(key: tuple, limits: RecordLimits) -> tuple | None:
    good = all(name in limits.allowed_labels and type(value) is str and value
               and len(value) <= limits.max_label_value_length and "\x00" not in value for name, value in key)
    return tuple(sorted(key)) if good else None


def _texts_ok(values: Sequence[str], limit: int) -> np.ndarray:
    """Per value: a non-empty, not blank string of at most `limit` characters without NUL."""
    n = len(values)
    lengths = list(map(len, values))
    if min(lengths) > 0 and max(lengths) <= limit and "\x00" not in "".join(values) and all(map(str.strip, values)):
        return np.ones(n, dtype=bool)
    return np.fromiter((0 < len(v) <= limit and "\x00" not in v and not v.isspace() for v in values),
                       dtype=bool, count=n)


def _by_length_ok(sds: Sequence[dict], k: list[int], hists: Sequence[list], n: int) -> np.ndarray:
    """Per record: no by-draft-length rows, or the usual single row for length K equal to the histogram (every
    step drafted K tokens). Other shapes: False (parse_record checks them); drafted = K x steps is left to
    the caller."""
    by = list(map(dict.get, sds, repeat(_BY_LENGTH)))
    has = np.fromiter(map(is_not, by, repeat(None)), dtype=bool, count=n)
    if not has.any():
        return np.ones(n, dtype=bool)
    ok = ~has
    rows = has.nonzero()[0].tolist()
    for i in rows:
        b = by[i]
        row = b.get(str(k[i])) if type(b) is dict and len(b) == 1 else None
        ok[i] = type(row) is list and row == hists[i] and all(type(v) is int for v in row)
    return ok


def _screen(items: Sequence[object], limits: RecordLimits) -> ValidBatch:
    """The records that pass every rule in the column pass, in body order (the others are left out)."""
    plain = _plain_batch(items)
    if plain is None:
        idx = [i for i, it in enumerate(items) if _plain(it)]
        picked = [items[i] for i in idx]
        plain = _plain_batch(picked) if picked else None
        if plain is None:
            return ValidBatch()
    else:
        idx = list(range(len(items)))
        picked = items
    top, specs = plain
    n = len(idx)
    rids, models, fins, outs, sds = zip(*top, strict=True)
    _, _, _, _, hists = zip(*specs, strict=True)
    labels = _label_keys(picked, limits)
    out = ValidBatch()
    ok = _texts_ok(rids, limits.max_id_length)
    model_ok = {m: bool(_texts_ok([m], limits.max_model_length)[0]) for m in set(models)}
    ok &= np.fromiter(map(model_ok.__getitem__, models), dtype=bool, count=n)
    ok &= np.fromiter(map(is_not, labels, repeat(None)), dtype=bool, count=n)
    try:
        fin = np.array(fins, dtype=np.float64)
        big = np.array([outs, *list(zip(*specs, strict=True))[:4]], dtype=np.int64)
    except OverflowError:  # an integer past 64 bits: the record-by-record pass says which and why
        return out
    ok &= np.isfinite(fin) & (fin >= limits.oldest) & (fin <= limits.newest)
    out_tok, k, steps, drafted, accepted = big
    ok &= (big >= 0).all(axis=0) & (big <= MAX_COUNT).all(axis=0)
    ok &= (k >= 1) & (k <= MAX_K) & (accepted <= drafted) & (drafted <= k * steps)
    by_ok = _by_length_ok(sds, big[1].tolist(), hists, n)
    ok &= by_ok & ((drafted == k * steps) | np.fromiter(map(is_, map(dict.get, sds, repeat(_BY_LENGTH)),
                                                               repeat(None)), dtype=bool, count=n))
    lengths = np.fromiter(map(len, hists), dtype=np.int64, count=n)
    ok &= lengths == k + 1
    for length in np.unique(lengths[ok]).tolist():
        rows = np.flatnonzero(ok & (lengths == length))
        try:
            if len(rows) == n:  # one K in the whole batch (the usual case)
                h = np.array(hists, dtype=np.int64)
            else:
                h = np.array([hists[r] for r in rows.tolist()], dtype=np.int64).reshape(len(rows), length)
        except OverflowError:
            ok[rows] = False
            continue
        good = (h >= 0).all(axis=1) & (h <= MAX_COUNT).all(axis=1)
        good &= (h.sum(axis=1) == steps[rows]) & (h @ np.arange(length, dtype=np.int64) == accepted[rows])
        ok[rows] = good
    for key, expected, defined in (
            ("mean_acceptance_length", 1 + accepted / np.maximum(steps, 1), steps > 0),
            ("draft_acceptance_rate", accepted / np.maximum(drafted, 1), drafted > 0)):
        value = np.array(list(map(dict.get, sds, repeat(key))), dtype=np.float64)  # absent: NaN
        present = np.fromiter(map(is_not, map(dict.get, sds, repeat(key)), repeat(None)), dtype=bool, count=n)
        close = np.abs(value - expected) <= RATE_TOL * np.maximum(1.0, np.abs(expected))
        ok &= ~(present & defined) | (np.isfinite(value) & close)
    keep = np.flatnonzero(ok)
    kept = keep.tolist()
    out.index = [idx[j] for j in kept] if len(kept) < len(idx) else idx
    out.request_id = [rids[j] for j in kept]
    out.model = [models[j] for j in kept]
    out.labels = [labels[j] for j in kept]
    out.finish_us = np.rint(fin[keep] * 1_000_000).astype(np.int64).tolist()
    out.output_tokens = out_tok[keep].tolist()
    out.k = k[keep].tolist()
    out.steps = steps[keep].tolist()
    out.draft_tokens = drafted[keep].tolist()
    out.accepted = accepted[keep].tolist()
    out.histogram = [hists[j] for j in kept]
    out.engine = [DEFAULT_ENGINE] * len(kept)
    return out
