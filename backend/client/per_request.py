"""Turn vLLM OpenAI-API responses into specwatch per-request records and post them.

vLLM (``--per-request-spec-decode-metrics summary|detailed``) puts the request's acceptance counts under
``metrics.speculative_decoding`` of a response; a streamed response carries them in its final chunk, the
one with ``usage`` (ask for it with ``stream_options={"include_usage": True}``). These helpers accept what
the caller has: a parsed JSON dict, an ``openai`` SDK object (extra fields are kept in ``model_extra``),
SSE lines (``data: {...}``) as str or bytes, or an iterable of stream chunks of any of those kinds.
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
               spec_mode: str | None = None) -> dict | None:
        if self.spec is None or not (request_id or self.id) or not self.model:
            return None
        return _record(request_id or self.id, self.model, labels, self.finished_at or time.time(),
                       (self.usage or {}).get("completion_tokens", 0), self.spec, spec_mode,
                       (self.usage or {}).get("prompt_tokens"))


def record_from_response(response: object, *, labels: Mapping[str, str] | None = None,
                         finish_time: float | None = None, request_id: str | None = None,
                         spec_mode: str | None = None) -> dict | None:
    """The ingest record of a non-streamed response (None when it carries no speculative_decoding).
    finish_time defaults to now, request_id to the response's id; spec_mode: the spec mode of the engine
    that served it (needed when the model's engine pools run several, or none is collected)."""
    data = as_dict(response) or {}
    spec = spec_decoding(data)
    if spec is None:
        return None
    usage = data.get("usage") or {}
    return _record(request_id or data.get("id"), data.get("model"), labels,
                   time.time() if finish_time is None else finish_time, usage.get("completion_tokens", 0), spec,
                   spec_mode, usage.get("prompt_tokens"))


def record_from_stream(chunks: Iterable[object], *, labels: Mapping[str, str] | None = None,
                       spec_mode: str | None = None) -> dict | None:
    """Consume a whole stream and return its record (use StreamRecorder to pass the chunks on as well)."""
    rec = StreamRecorder(chunks)
    for _ in rec:
        pass
    return rec.record(labels=labels, spec_mode=spec_mode)


def _record(request_id, model, labels, finish_time: float, output_tokens: int, spec: dict,
            spec_mode: str | None = None, prompt_tokens: int | None = None) -> dict:
    out = {"request_id": request_id, "model": model, "labels": dict(labels or {}),
           "finish_time": datetime.fromtimestamp(finish_time, UTC).isoformat(),
           "output_tokens": output_tokens, "speculative_decoding": spec}
    if spec_mode is not None:
        out["spec_mode"] = spec_mode
    if prompt_tokens is not None:  # the context length: α by context band
        out["prompt_tokens"] = prompt_tokens
    return out


def post_records(url: str, token: str, records: Iterable[dict], *, timeout: float = 10.0) -> dict:
    """POST records (as NDJSON) to specwatch's /api/v1/requests with an `ingest` token; returns its report.
    Safe to retry: records are idempotent by request id."""
    body = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records if r).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())
