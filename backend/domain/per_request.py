"""Per-request acceptance records (vLLM `metrics.speculative_decoding`, and what llama.cpp and SGLang report per
response): parsing, the impossible-data rules, per-position counts (the statistics only per-request data can give:
domain.request_stats). Pure: no I/O.

The object as vLLM sends it (``--per-request-spec-decode-metrics summary|detailed``)::

    {"num_spec_tokens": K, "num_spec_steps": N, "num_draft_tokens": D, "num_accepted_draft_tokens": A,
     "acceptance_histogram": [h_0 .. h_K], "mean_acceptance_length": τ, "draft_acceptance_rate": r,
     "acceptance_histogram_by_draft_length": {"k": [.. k + 1 ..]},        # optional
     "per_step_accepted": [..], "per_step_drafted": [..]}                   # detailed only

h_j counts verify steps that accepted exactly j draft tokens (bonus token excluded), so N = Σ h_j and
A = Σ j·h_j. Summed over requests, N, D and A are the engine counters `num_drafts`, `num_draft_tokens`
and `num_accepted_tokens`; the per-position counter P_i (position label i = 0 .. K-1: drafts whose first
i+1 tokens were all accepted, spec-math §3) is P_i = Σ_{j ≥ i+1} h_j, so Σ_i P_i = A.

Rules (a record breaking one is refused whole; nothing of it is stored): the table in docs/per-request.md
and, for llama.cpp and SGLang, the list below it; each raised as a Refused with its rule name.

A record's `engine` (default "vllm") says which engine's counts it carries. The other two engines report less
per response; what a response does not carry stays None (stored NULL), never 0:

- "llamacpp" (llama-server's `timings.draft_n` / `timings.draft_n_accepted`): num_draft_tokens and
  num_accepted_draft_tokens are required, num_spec_tokens (the request's `speculative.n_max`) optional. The
  number of drafts (verify steps) and the histogram are not reported: α is exact, τ is not exposed.
- "sglang" (`meta_info.spec_verify_ct` and the accepted tokens: `spec_accept_token_num` /
  `spec_num_correct_drafts`, or on older servers `completion_tokens - spec_verify_ct - 1`): num_spec_steps and
  num_accepted_draft_tokens are required; num_draft_tokens (`spec_draft_token_num` /
  `spec_num_proposed_drafts`: verify steps x (speculative_num_draft_tokens - 1)) and num_spec_tokens optional.
  τ is exact; α only when the server reports its draft tokens (a tree draft's per-step count is not in the
  older responses). No histogram.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

MAX_K = 64
MAX_COUNT = 2**31 - 1
ENGINES = ("vllm", "llamacpp", "sglang")
DEFAULT_ENGINE = "vllm"
_REQUIRED = frozenset(("num_spec_tokens", "num_spec_steps", "num_draft_tokens", "num_accepted_draft_tokens",
                       "acceptance_histogram"))
RATE_TOL = 1e-6


class Refused(ValueError):
    """A record breaking a rule: `rule` names it, the message says what was wrong."""

    def __init__(self, rule: str, detail: str):
        super().__init__(detail)
        self.rule = rule
        self.detail = detail


@dataclass(slots=True)
class SpecStats:
    """The validated counts of one request; None where its engine does not report the count."""

    k: int | None
    steps: int | None
    draft_tokens: int | None
    accepted: int
    histogram: list[int] | None  # length k + 1

    @property
    def alpha(self) -> float | None:
        """Draft acceptance rate A / D of this request; None when it drafted nothing or D is not reported."""
        return self.accepted / self.draft_tokens if self.draft_tokens else None

    @property
    def tau(self) -> float | None:
        """Mean acceptance length 1 + A / N of this request; None without drafts or when N is not reported."""
        return 1 + self.accepted / self.steps if self.steps else None

    def accepted_per_pos(self) -> list[int] | None:
        return accepted_per_position(self.histogram) if self.histogram is not None else None


def accepted_per_position(histogram: Sequence[int]) -> list[int]:
    """P_i for positions i = 0 .. K-1 from an acceptance histogram h_0 .. h_K: P_i = Σ_{j ≥ i+1} h_j."""
    out = [0] * (len(histogram) - 1)
    running = 0
    for i in range(len(histogram) - 1, 0, -1):
        running += histogram[i]
        out[i - 1] = running
    return out


def _count(value: object, name: str) -> int:
    if type(value) is int and 0 <= value <= MAX_COUNT:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refused("not_integer", f"{name} must be a number, got {type(value).__name__}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Refused("not_finite", f"{name} is {value}")
        if not value.is_integer():
            raise Refused("not_integer", f"{name} must be a whole number, got {value}")
        value = int(value)
    if value < 0:
        raise Refused("negative", f"{name} is negative ({value})")
    if value > MAX_COUNT:
        raise Refused("too_large", f"{name} is {value}, above {MAX_COUNT}")
    return value


def _counts(values: object, name: str) -> list[int]:
    if not isinstance(values, list):
        raise Refused("not_integer", f"{name} must be a list of counts")
    if all(type(v) is int and 0 <= v <= MAX_COUNT for v in values):  # the usual case, without a call per element
        return values
    return [_count(v, f"{name}[{i}]") for i, v in enumerate(values)]


def _rate(obj: Mapping, name: str, expected: float | None) -> None:
    value = obj.get(name)
    if value is None or expected is None:
        return
    if type(value) is float and math.isfinite(value) and abs(value - expected) <= RATE_TOL * max(1.0, abs(expected)):
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refused("rate_mismatch", f"{name} must be a number")
    if not math.isfinite(value):
        raise Refused("not_finite", f"{name} is {value}")
    if abs(value - expected) > RATE_TOL * max(1.0, abs(expected)):
        raise Refused("rate_mismatch", f"{name} is {value} but the counts give {expected}")


def parse_spec(obj: object) -> SpecStats:
    """Validate one `speculative_decoding` object; raises Refused naming the first broken rule."""
    if not isinstance(obj, dict):
        raise Refused("missing_speculative_decoding", "speculative_decoding must be an object (null: the request "
                      "had n > 1 or the server runs without --per-request-spec-decode-metrics)")
    missing = _REQUIRED.difference(obj)
    if missing:
        raise Refused("missing_field", f"speculative_decoding.{min(missing)} is missing")
    k = _count(obj["num_spec_tokens"], "num_spec_tokens")
    steps = _count(obj["num_spec_steps"], "num_spec_steps")
    drafted = _count(obj["num_draft_tokens"], "num_draft_tokens")
    accepted = _count(obj["num_accepted_draft_tokens"], "num_accepted_draft_tokens")
    hist = _counts(obj["acceptance_histogram"], "acceptance_histogram")
    if not 1 <= k <= MAX_K:
        raise Refused("k_invalid", f"num_spec_tokens must be 1 .. {MAX_K}, got {k}")
    if len(hist) != k + 1:
        raise Refused("k_mismatch", f"acceptance_histogram has {len(hist)} entries, num_spec_tokens {k} needs {k + 1}")
    if sum(hist) != steps:
        raise Refused("histogram_sum_mismatch", f"acceptance_histogram sums to {sum(hist)}, num_spec_steps is {steps}")
    weighted = sum(map(int.__mul__, range(k + 1), hist))
    if weighted != accepted:
        raise Refused("histogram_accepted_mismatch",
                      f"acceptance_histogram gives {weighted} accepted tokens, num_accepted_draft_tokens is {accepted}")
    if accepted > drafted:
        raise Refused("accepted_gt_drafted", f"num_accepted_draft_tokens {accepted} > num_draft_tokens {drafted}")
    if drafted > k * steps:
        raise Refused("drafted_gt_k_steps", f"num_draft_tokens {drafted} > num_spec_tokens x num_spec_steps "
                      f"({k} x {steps})")
    by_len = obj.get("acceptance_histogram_by_draft_length")
    if by_len is not None:
        _check_by_length(by_len, hist, k, drafted)
    if obj.get("per_step_accepted") is not None or obj.get("per_step_drafted") is not None:
        _check_per_step(obj, k, steps, drafted, accepted)
    _rate(obj, "mean_acceptance_length", 1 + accepted / steps if steps else None)
    _rate(obj, "draft_acceptance_rate", accepted / drafted if drafted else None)
    return SpecStats(k, steps, drafted, accepted, hist)


_ENGINE_FIELDS = {
    "llamacpp": (("num_draft_tokens", "num_accepted_draft_tokens"), ("num_spec_tokens",)),
    "sglang": (("num_spec_steps", "num_accepted_draft_tokens"), ("num_draft_tokens", "num_spec_tokens")),
}
_VLLM_ONLY = ("num_spec_steps", "num_draft_tokens", "acceptance_histogram", "acceptance_histogram_by_draft_length",
              "per_step_accepted", "per_step_drafted")


def parse_engine_spec(obj: object, engine: str, output_tokens: int) -> SpecStats:
    """Validate the counts of a llama.cpp or SGLang record (see the module's docstring); raises Refused."""
    if engine == DEFAULT_ENGINE:
        return parse_spec(obj)
    if not isinstance(obj, dict):
        raise Refused("missing_speculative_decoding", f"speculative_decoding must be an object (engine {engine})")
    required, optional = _ENGINE_FIELDS[engine]
    for name in required:
        if obj.get(name) is None:
            raise Refused("missing_field", f"speculative_decoding.{name} is missing (engine {engine})")
    for name in _VLLM_ONLY:
        if obj.get(name) is not None and name not in required + optional:
            raise Refused("field_not_for_engine", f"speculative_decoding.{name}: engine {engine} does not report it")
    got = {name: _count(obj[name], name) for name in required + optional if obj.get(name) is not None}
    k, steps, drafted = got.get("num_spec_tokens"), got.get("num_spec_steps"), got.get("num_draft_tokens")
    accepted = got["num_accepted_draft_tokens"]
    if k is not None and not 1 <= k <= MAX_K:
        raise Refused("k_invalid", f"num_spec_tokens must be 1 .. {MAX_K}, got {k}")
    if drafted is not None and accepted > drafted:
        raise Refused("accepted_gt_drafted", f"num_accepted_draft_tokens {accepted} > num_draft_tokens {drafted}")
    if steps is not None and k is not None:
        if drafted is not None and drafted > k * steps:
            raise Refused("drafted_gt_k_steps", f"num_draft_tokens {drafted} > num_spec_tokens x num_spec_steps "
                          f"({k} x {steps})")
        if accepted > k * steps:
            raise Refused("accepted_gt_k_steps", f"num_accepted_draft_tokens {accepted} > num_spec_tokens x "
                          f"num_spec_steps ({k} x {steps})")
    if steps == 0 and accepted > 0:
        raise Refused("accepted_without_drafts", f"num_accepted_draft_tokens {accepted} without a verify step "
                      "(num_spec_steps 0)")
    if steps is not None and steps > output_tokens:
        raise Refused("steps_gt_output", f"num_spec_steps {steps} > output_tokens {output_tokens}: each verify step "
                      "gives at least one output token")
    _rate(obj, "mean_acceptance_length", 1 + accepted / steps if steps else None)
    _rate(obj, "draft_acceptance_rate", accepted / drafted if drafted else None)
    return SpecStats(k, steps, drafted, accepted, None)


def _check_by_length(by_len: object, hist: list[int], k: int, drafted: int) -> None:
    if not isinstance(by_len, Mapping):
        raise Refused("by_draft_length_mismatch", "acceptance_histogram_by_draft_length must be an object")
    total = [0] * (k + 1)
    tokens = 0
    for key, row in by_len.items():
        try:
            length = int(key)
        except (TypeError, ValueError):
            raise Refused("by_draft_length_mismatch", f"draft length key {key!r} is not an integer") from None
        if not 0 <= length <= k:
            raise Refused("k_mismatch", f"draft length {length} is outside 0 .. num_spec_tokens ({k})")
        counts = _counts(row, f"acceptance_histogram_by_draft_length[{key}]")
        if len(counts) != length + 1:
            raise Refused("by_draft_length_mismatch", f"row {key} has {len(counts)} entries, needs {length + 1}")
        for j, c in enumerate(counts):
            total[j] += c
        tokens += length * sum(counts)
    if total != hist:
        raise Refused("by_draft_length_mismatch", f"rows by draft length add up to {total}, the histogram is {hist}")
    if tokens != drafted:
        raise Refused("by_draft_length_mismatch", f"rows by draft length drafted {tokens} tokens, "
                      f"num_draft_tokens is {drafted}")


def _check_per_step(obj: Mapping, k: int, steps: int, drafted: int, accepted: int) -> None:
    acc = _counts(obj.get("per_step_accepted"), "per_step_accepted")
    dra = _counts(obj.get("per_step_drafted"), "per_step_drafted")
    if len(acc) != steps or len(dra) != steps:
        raise Refused("per_step_mismatch", f"per-step lists have {len(acc)} and {len(dra)} entries, "
                      f"num_spec_steps is {steps}")
    if sum(acc) != accepted or sum(dra) != drafted:
        raise Refused("per_step_mismatch", f"per-step lists sum to {sum(acc)} accepted / {sum(dra)} drafted, "
                      f"the totals are {accepted} / {drafted}")
    for i, (a, d) in enumerate(zip(acc, dra, strict=True)):
        if a > d:
            raise Refused("per_step_mismatch", f"step {i} accepted {a} of {d} drafted")
        if d > k:
            raise Refused("k_mismatch", f"step {i} drafted {d} > num_spec_tokens {k}")


# --- one ingest record --------------------------------------------------------------------------------


class LabelRefused(ValueError):
    """A label outside the configured allowlist or past its cardinality limit: the whole batch is refused.
    `index` is the record's position in the batch when known."""

    index: int | None = None


@dataclass(slots=True)
class RequestRecord:
    request_id: str
    model: str
    labels: tuple[tuple[str, str], ...]  # sorted (name, value)
    finish_time: float  # unix seconds
    output_tokens: int
    spec: SpecStats
    engine: str = DEFAULT_ENGINE

    def label(self, name: str) -> str | None:
        return next((v for k, v in self.labels if k == name), None)


@dataclass(frozen=True)
class RecordLimits:
    allowed_labels: frozenset[str]
    max_id_length: int
    max_model_length: int
    max_label_value_length: int
    oldest: float  # unix seconds: an older finish_time is refused (outside the retention)
    newest: float  # unix seconds: a later one is refused (a clock far ahead)


def _text(obj: Mapping, name: str, limit: int) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value.strip():
        raise Refused("missing_field", f"{name} must be a non-empty string")
    if len(value) > limit:
        raise Refused("too_long", f"{name} is longer than {limit} characters")
    if "\x00" in value:
        raise Refused("bad_text", f"{name} contains a NUL character")
    return value


def _finish_time(value: object) -> float:
    if isinstance(value, bool):
        value = None
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:  # an integer past any float
            raise Refused("not_finite", "finish_time is out of range") from None
        if not math.isfinite(seconds):
            raise Refused("not_finite", f"finish_time is {value}")
        return seconds
    if isinstance(value, str):
        try:
            t = datetime.fromisoformat(value)
        except ValueError:
            raise Refused("bad_time", f"finish_time {value[:40]!r} is not ISO 8601 or unix seconds") from None
        if t.tzinfo is None:
            raise Refused("bad_time", "finish_time needs a time zone (e.g. a trailing Z)")
        return t.timestamp()
    raise Refused("missing_field", "finish_time must be ISO 8601 with a time zone or unix seconds")


def parse_record(obj: object, limits: RecordLimits) -> RequestRecord:
    """One ingest record; raises Refused (this record only) or LabelRefused (an unknown label: the batch)."""
    if not isinstance(obj, dict):
        raise Refused("not_an_object", "each record must be a JSON object")
    request_id = _text(obj, "request_id", limits.max_id_length)
    model = _text(obj, "model", limits.max_model_length)
    raw_labels = obj.get("labels") or {}
    if not isinstance(raw_labels, dict):
        raise Refused("bad_labels", "labels must be an object of strings")
    labels = []
    for name, value in raw_labels.items():
        if name not in limits.allowed_labels:
            raise LabelRefused(f"label {name!r} is not allowed (allowed: {', '.join(sorted(limits.allowed_labels))}; "
                               "setting SPECWATCH_REQUESTS_LABELS)")
        if not isinstance(value, str) or not value:
            raise Refused("bad_labels", f"label {name} must be a non-empty string")
        if len(value) > limits.max_label_value_length:
            raise Refused("too_long", f"label {name} is longer than {limits.max_label_value_length} characters")
        if "\x00" in value:
            raise Refused("bad_text", f"label {name} contains a NUL character")
        labels.append((name, value))
    finish = _finish_time(obj.get("finish_time"))
    if finish < limits.oldest:
        raise Refused("too_old", "finish_time is older than the per-request retention")
    if finish > limits.newest:
        raise Refused("in_future", "finish_time is in the future")
    output_tokens = _count(obj.get("output_tokens"), "output_tokens")
    engine = obj.get("engine")
    if engine is None:
        engine = DEFAULT_ENGINE
    elif engine not in ENGINES:
        shown = repr(engine[:40]) if isinstance(engine, str) else type(engine).__name__
        raise Refused("unknown_engine", f"engine {shown} is not one of {', '.join(ENGINES)}")
    spec = parse_engine_spec(obj.get("speculative_decoding"), engine, output_tokens)
    return RequestRecord(request_id, model, tuple(sorted(labels)), finish, output_tokens, spec, engine)
