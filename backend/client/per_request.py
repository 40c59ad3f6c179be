"""Turn vLLM OpenAI-API responses into specwatch per-request records and post them.

vLLM (``--per-request-spec-decode-metrics summary|detailed``) puts the request's acceptance counts under
``metrics.speculative_decoding`` of a response; a streamed response carries them in its final chunk, the
one with ``usage`` (ask for it with ``stream_options={"include_usage": True}``). These helpers accept what
the caller has: a parsed JSON dict, an ``openai`` SDK object (extra fields are kept in ``model_extra``),
SSE lines (``data: {...}``) as str or bytes, or an iterable of stream chunks of any of those kinds.
Behind a gateway (LiteLLM, Envoy, any proxy that knows the route, tenant or replica), ``record_from_gateway``
fills the record's labels, ``spec_mode`` and ``replica`` from the gateway's response headers and the request's
metadata through a ``GatewayMapping`` (presets ``ENVOY`` and ``LITELLM``).
Standard library only. See docs/per-request.md.

    from backend.client.per_request import StreamRecorder, record_from_response, post_records

    resp = client.chat.completions.create(model=..., messages=..., extra_body={})
    rec = record_from_response(resp, labels={"traffic_class": "chat"})
    post_records("https://specwatch/api/v1/requests", token, [rec])
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime


def as_dict(obj: object) -> dict | None:
    """A response or chunk as a dict: dicts as they are, SDK objects via model_dump/to_dict, SSE lines and
    JSON text parsed; None for an SSE keep-alive, a comment or ``data: [DONE]``."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, (bytes, bytearray)):
        obj = obj.decode("utf-8")
    if isinstance(obj, str):
        line = obj.strip()
        if line.startswith("data:"):
            line = line[5:].strip()
        if not line or line == "[DONE]" or line.startswith(":"):
            return None
        return json.loads(line)
    for method in ("model_dump", "to_dict", "dict"):
        fn = getattr(obj, method, None)
        if callable(fn):
            out = fn()
            extra = getattr(obj, "model_extra", None) or {}
            return {**extra, **out} if isinstance(out, dict) else None
    raise TypeError(f"cannot read a response from {type(obj).__name__}")


def spec_decoding(response: object) -> dict | None:
    """``metrics.speculative_decoding`` of one (non-streamed) response or one chunk; None when absent
    (the server runs without the flag, speculative decoding is off, or n > 1)."""
    data = as_dict(response)
    metrics = (data or {}).get("metrics") or {}
    found = metrics.get("speculative_decoding") if isinstance(metrics, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else None


class StreamRecorder:
    """Wrap a stream: iterate it as usual (chunks pass through unchanged) and read the final chunk's
    ``speculative_decoding``, ``usage``, ``id`` and ``model`` afterwards (``record(...)``)."""

    def __init__(self, chunks: Iterable[object]):
        self._chunks = chunks
        self.id: str | None = None
        self.model: str | None = None
        self.usage: dict | None = None
        self.spec: dict | None = None
        self.finished_at: float | None = None

    def __iter__(self) -> Iterator[object]:
        for chunk in self._chunks:
            self.observe(chunk)
            yield chunk
        self.finished_at = time.time()

    def observe(self, chunk: object) -> None:
        data = as_dict(chunk)
        if not data:
            return
        self.id = data.get("id") or self.id
        self.model = data.get("model") or self.model
        if data.get("usage"):
            self.usage = dict(data["usage"])
        found = spec_decoding(data)
        if found is not None:
            self.spec = found

    def record(self, *, labels: Mapping[str, str] | None = None, request_id: str | None = None,
               spec_mode: str | None = None, running_requests: int | None = None) -> dict | None:
        if self.spec is None or not (request_id or self.id) or not self.model:
            return None
        return _record(request_id or self.id, self.model, labels, self.finished_at or time.time(),
                       (self.usage or {}).get("completion_tokens", 0), self.spec, spec_mode,
                       (self.usage or {}).get("prompt_tokens"), running_requests)


def record_from_response(response: object, *, labels: Mapping[str, str] | None = None,
                         finish_time: float | None = None, request_id: str | None = None,
                         spec_mode: str | None = None, running_requests: int | None = None) -> dict | None:
    """The ingest record of a non-streamed response (None when it carries no speculative_decoding).
    finish_time defaults to now, request_id to the response's id; spec_mode: the spec mode of the engine
    that served it (needed when the model's engine pools run several, or none is collected);
    running_requests: that engine's vllm:num_requests_running when the request finished, where the caller
    knows it (α by concurrency band; without it the engine pool's mean of that minute is used)."""
    data = as_dict(response) or {}
    spec = spec_decoding(data)
    if spec is None:
        return None
    usage = data.get("usage") or {}
    return _record(request_id or data.get("id"), data.get("model"), labels,
                   time.time() if finish_time is None else finish_time, usage.get("completion_tokens", 0), spec,
                   spec_mode, usage.get("prompt_tokens"), running_requests)


def record_from_stream(chunks: Iterable[object], *, labels: Mapping[str, str] | None = None,
                       spec_mode: str | None = None, running_requests: int | None = None) -> dict | None:
    """Consume a whole stream and return its record (use StreamRecorder to pass the chunks on as well)."""
    rec = StreamRecorder(chunks)
    for _ in rec:
        pass
    return rec.record(labels=labels, spec_mode=spec_mode, running_requests=running_requests)


# --- behind a gateway -------------------------------------------------------------------------------------

FIELDS = ("spec_mode", "replica")  # record fields a gateway may fill besides labels
DEFAULT_LABELS = ("traffic_class", "tenant", "route")  # the server's default SPECWATCH_REQUESTS_LABELS


class GatewayValueError(ValueError):
    """A gateway header or metadata value that cannot go into a record (too long, not text, control
    characters, or one header sent twice with different values). Nothing is built from it."""


@dataclass(frozen=True)
class GatewayMapping:
    """Where a gateway puts a record's labels and fields. ``headers``: response (or request) header name,
    any case -> target; ``metadata``: key of the request's ``metadata`` object -> target; ``tags``: tag
    prefix -> target, for ``"name:value"`` tags (LiteLLM's ``metadata.tags`` and ``x-litellm-tags``). A target
    is a label in ``allowed_labels`` (keep it equal to the server's SPECWATCH_REQUESTS_LABELS) or one of
    ``spec_mode`` and ``replica``. Values longer than ``max_value_length`` (the server's
    SPECWATCH_REQUESTS_LABEL_VALUE_MAX_LENGTH) raise GatewayValueError; absent or blank ones are skipped."""

    headers: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    allowed_labels: frozenset[str] = frozenset(DEFAULT_LABELS)
    max_value_length: int = 120

    def __post_init__(self) -> None:
        object.__setattr__(self, "headers", {k.lower(): v for k, v in self.headers.items()})
        object.__setattr__(self, "allowed_labels", frozenset(self.allowed_labels))
        if not 1 <= self.max_value_length <= 200:
            raise ValueError("max_value_length must be 1 .. 200 (a replica name is at most 200 characters)")
        for kind in ("headers", "metadata", "tags"):
            for source, target in getattr(self, kind).items():
                if target not in self.allowed_labels and target not in FIELDS:
                    raise ValueError(f"{kind}[{source!r}] -> {target!r}: a target is one of the allowed labels "
                                     f"({', '.join(sorted(self.allowed_labels))}) or {' or '.join(FIELDS)}")


# Envoy (or any proxy) whose route sets these request headers and echoes them on the response
# (request_headers_to_add / response_headers_to_add with %REQ(...)%)
ENVOY = GatewayMapping(headers={
    "x-specwatch-traffic-class": "traffic_class", "x-specwatch-tenant": "tenant", "x-specwatch-route": "route",
    "x-specwatch-spec-mode": "spec_mode", "x-specwatch-replica": "replica"})

# LiteLLM proxy: labels from the request body's "metadata" (plain keys, or "name:value" tags); the
# deployment that served the request from the x-litellm-model-id response header (its model_info.id)
LITELLM = GatewayMapping(
    metadata={"traffic_class": "traffic_class", "tenant": "tenant", "route": "route", "spec_mode": "spec_mode"},
    tags={"traffic_class": "traffic_class", "tenant": "tenant", "route": "route"},
    headers={"x-litellm-model-id": "replica"})


def _header_items(headers: object) -> Iterable[tuple[str, str]]:
    """Pairs from a dict, an http.client / email message, httpx or requests headers, or a list of pairs."""
    if headers is None:
        return ()
    multi = getattr(headers, "multi_items", None)  # httpx.Headers: every value of a repeated header
    if callable(multi):
        return multi()
    items = getattr(headers, "items", None)
    return items() if callable(items) else headers


def _value(raw: object, where: str, limit: int) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, bytes):
        raw = raw.decode("latin-1")
    if not isinstance(raw, str):
        raise GatewayValueError(f"{where}: expected text, got {type(raw).__name__}")
    value = raw.strip()
    if not value:
        return None
    if len(value) > limit:
        raise GatewayValueError(f"{where}: {len(value)} characters, at most {limit} (max_value_length)")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise GatewayValueError(f"{where}: control characters are not allowed")
    return value


def gateway_fields(mapping: GatewayMapping, *, headers: object = None,
                   metadata: Mapping | None = None) -> dict[str, object]:
    """The labels, spec_mode and replica a gateway's headers and the request's metadata carry, as
    ``{"labels": {...}, "spec_mode": str | None, "replica": str | None}``. Sources in order (a later one
    wins): metadata tags, metadata keys, headers."""
    found: dict[str, str] = {}
    limit = mapping.max_value_length
    metadata = metadata or {}
    tags = metadata.get("tags") or []
    if isinstance(tags, str):
        tags = tags.split(",")
    header_tags = [v for k, v in _header_items(headers) if k.lower() == "x-litellm-tags"]
    for tag in [*tags, *(t for v in header_tags for t in str(v).split(","))]:
        name, sep, rest = str(tag).strip().partition(":")
        if sep and name in mapping.tags:
            value = _value(rest, f"tag {name!r}", limit)
            if value is not None:
                found[mapping.tags[name]] = value
    for key, target in mapping.metadata.items():
        value = _value(metadata.get(key), f"metadata[{key!r}]", limit)
        if value is not None:
            found[target] = value
    seen: dict[str, str] = {}
    for name, raw in _header_items(headers):
        target = mapping.headers.get(name.lower())
        if target is None:
            continue
        value = _value(raw, f"header {name.lower()}", limit)
        if value is None:
            continue
        if seen.get(name.lower(), value) != value:
            raise GatewayValueError(f"header {name.lower()}: sent twice with different values")
        seen[name.lower()] = found[target] = value
    return {"labels": {k: v for k, v in found.items() if k not in FIELDS},
            "spec_mode": found.get("spec_mode"), "replica": found.get("replica")}


def record_from_gateway(response: object, *, mapping: GatewayMapping = ENVOY, headers: object = None,
                        request_body: Mapping | None = None, labels: Mapping[str, str] | None = None,
                        finish_time: float | None = None, request_id: str | None = None,
                        running_requests: int | None = None) -> dict | None:
    """The record of a response that came through a gateway: a response (as record_from_response takes)
    or a consumed StreamRecorder, its headers (the gateway's response headers; request headers work
    too), and the request body sent (its ``metadata`` or ``litellm_metadata``). Labels given here win over
    the mapped ones. None when the response carries no speculative_decoding."""
    body = request_body or {}
    metadata = body.get("metadata") or body.get("litellm_metadata") or {}
    if not isinstance(metadata, Mapping):
        raise GatewayValueError("request metadata must be an object")
    got = gateway_fields(mapping, headers=headers, metadata=metadata)
    merged = {**got["labels"], **(labels or {})}
    if isinstance(response, StreamRecorder):
        rec = response.record(labels=merged, request_id=request_id, spec_mode=got["spec_mode"],
                              running_requests=running_requests)
    else:
        rec = record_from_response(response, labels=merged, finish_time=finish_time, request_id=request_id,
                                   spec_mode=got["spec_mode"], running_requests=running_requests)
    if rec is not None and got["replica"] is not None:
        rec["replica"] = got["replica"]
    return rec


MAX_RUNNING_REQUESTS = 1_000_000  # as the server bounds it


def _record(request_id, model, labels, finish_time: float, output_tokens: int, spec: dict,
            spec_mode: str | None = None, prompt_tokens: int | None = None,
            running_requests: int | None = None) -> dict:
    if running_requests is not None and (type(running_requests) is not int
                                         or not 1 <= running_requests <= MAX_RUNNING_REQUESTS):
        raise ValueError(f"running_requests must be a whole number 1 .. {MAX_RUNNING_REQUESTS:,} (the engine's "
                         f"running requests when this one finished), got {running_requests!r}")
    out = {"request_id": request_id, "model": model, "labels": dict(labels or {}),
           "finish_time": datetime.fromtimestamp(finish_time, UTC).isoformat(),
           "output_tokens": output_tokens, "speculative_decoding": spec}
    if spec_mode is not None:
        out["spec_mode"] = spec_mode
    if prompt_tokens is not None:  # the context length: α by context band
        out["prompt_tokens"] = prompt_tokens
    if running_requests is not None:  # the engine's load: α by concurrency band
        out["running_requests"] = running_requests
    return out


def ndjson(records: Iterable[dict | None]) -> bytes:
    """The body post_records sends: one record per line (None entries, responses without a record, skipped)."""
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records if r).encode()


def post_records(url: str, token: str, records: Iterable[dict], *, timeout: float = 10.0) -> dict:
    """POST records (as NDJSON) to specwatch's /api/v1/requests with an `ingest` token; returns its report.
    Safe to retry: records are idempotent by request id."""
    body = ndjson(records)
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())
