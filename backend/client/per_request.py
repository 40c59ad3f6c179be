"""Turn vLLM, llama.cpp and SGLang responses into specwatch per-request records and post them.

vLLM (``--per-request-spec-decode-metrics summary|detailed``) puts the request's acceptance counts under
``metrics.speculative_decoding`` of a response; a streamed response carries them in its final chunk, the
one with ``usage`` (ask for it with ``stream_options={"include_usage": True}``). These helpers accept what
the caller has: a parsed JSON dict, an ``openai`` SDK object (extra fields are kept in ``model_extra``),
SSE lines (``data: {...}``) as str or bytes, or an iterable of stream chunks of any of those kinds.
llama.cpp (llama-server: ``timings.draft_n`` / ``draft_n_accepted``) and SGLang (native /generate:
``meta_info.spec_verify_ct`` and its accepted tokens) report fewer counts per response; the same functions
read them, detecting the engine from the shape or told it (``engine=``), see ``engine_counts``.
Behind a gateway: backend.client.gateway.
Standard library only. See docs/per-request.md (how to call them, from an SDK response to post_records)."""

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


ENGINES = ("vllm", "llamacpp", "sglang")


def spec_decoding(response: object) -> dict | None:
    """``metrics.speculative_decoding`` of one (non-streamed) vLLM response or one chunk; None when absent
    (the server runs without the flag, speculative decoding is off, or n > 1)."""
    data = as_dict(response)
    metrics = (data or {}).get("metrics") or {}
    found = metrics.get("speculative_decoding") if isinstance(metrics, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else None


def _sub(data: Mapping, key: str) -> Mapping:
    found = data.get(key)
    return found if isinstance(found, Mapping) else {}


def detect_engine(response: object) -> str | None:
    """Which engine's per-request counts a response (or chunk) carries: "vllm" (``metrics.speculative_decoding``),
    "llamacpp" (``timings.draft_n``; llama-server sends timings with draft counts only when the request drafted)
    or "sglang" (``meta_info.spec_verify_ct``, SGLang's native /generate); None when it carries none."""
    data = as_dict(response) or {}
    if spec_decoding(data) is not None:
        return "vllm"
    if "draft_n" in _sub(data, "timings"):
        return "llamacpp"
    if "spec_verify_ct" in _sub(data, "meta_info"):
        return "sglang"
    return None


def _first(mapping: Mapping, *names: str):
    return next((mapping[n] for n in names if mapping.get(n) is not None), None)


def engine_counts(response: object, engine: str) -> dict | None:
    """The record's ``speculative_decoding`` object from `engine`'s response shape (None when the response
    does not carry that engine's counts). Only what the engine reports goes in; the server stores the rest
    as NULL, never 0:

    - vllm: ``metrics.speculative_decoding`` as it is.
    - llamacpp: ``timings.draft_n`` -> num_draft_tokens, ``timings.draft_n_accepted`` ->
      num_accepted_draft_tokens; ``generation_settings["speculative.n_max"]`` (native /completion) ->
      num_spec_tokens. No number of drafts: τ is not known per request.
    - sglang: ``meta_info.spec_verify_ct`` -> num_spec_steps; accepted tokens from ``spec_num_correct_drafts`` /
      ``spec_accepted_drafts`` / ``spec_accept_token_num`` (whichever the server version sends), else
      ``completion_tokens - spec_verify_ct - 1`` (servers that send only the verify count: each verify step
      gives its accepted tokens and one more, the first token comes from prefill; 0 without verify steps;
      exact unless the request's last step was cut at its stop); draft tokens from ``spec_num_proposed_drafts`` /
      ``spec_proposed_drafts`` / ``spec_draft_token_num`` when sent (verify steps x
      (speculative_num_draft_tokens - 1)), else none: α is not known per request."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    data = as_dict(response) or {}
    if engine == "vllm":
        return spec_decoding(data)
    if engine == "llamacpp":
        t = _sub(data, "timings")
        if t.get("draft_n") is None:
            return None
        out = {"num_draft_tokens": t["draft_n"], "num_accepted_draft_tokens": t.get("draft_n_accepted")}
        k = _sub(data, "generation_settings").get("speculative.n_max")
        if k is not None:
            out["num_spec_tokens"] = k
        return out
    meta = _sub(data, "meta_info")
    steps = meta.get("spec_verify_ct")
    if steps is None:
        return None
    accepted = _first(meta, "spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
    if accepted is None:  # the first output token comes from prefill, not from a verify step
        completion = _output_tokens(data, "sglang")
        ok = isinstance(completion, int) and isinstance(steps, int)
        accepted = (completion - steps - 1 if steps else 0) if ok else None
    out = {"num_spec_steps": steps, "num_accepted_draft_tokens": accepted}
    drafted = _first(meta, "spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
    if drafted is not None:
        out["num_draft_tokens"] = drafted
    return out


def _output_tokens(data: Mapping, engine: str):
    usage = _sub(data, "usage")
    if engine == "sglang":  # native /generate: meta_info; OpenAI-compatible routes: usage
        return _first(_sub(data, "meta_info"), "completion_tokens") or usage.get("completion_tokens")
    if engine == "llamacpp":  # OpenAI-compatible routes: usage; native /completion: tokens_predicted
        return _first(usage, "completion_tokens") or _first(data, "tokens_predicted") or _first(
            _sub(data, "timings"), "predicted_n")
    return usage.get("completion_tokens", 0)


def _prompt_tokens(data: Mapping, engine: str):
    usage = _sub(data, "usage")
    if usage.get("prompt_tokens") is not None:
        return usage["prompt_tokens"]
    if engine == "sglang":
        return _sub(data, "meta_info").get("prompt_tokens")
    if engine == "llamacpp":
        return data.get("tokens_evaluated")
    return None


def _request_id(data: Mapping, engine: str):
    if engine == "sglang":
        return data.get("id") or _sub(data, "meta_info").get("id")
    return data.get("id")


class StreamRecorder:
    """Wrap a stream: iterate it as usual (chunks pass through unchanged) and read the final chunk's
    counts (any engine's), ``usage``, ``id`` and ``model`` afterwards (``record(...)``). Streams: vLLM's and
    llama.cpp's OpenAI-compatible ones (the counts come in the final chunk; llama.cpp's with its ``timings``),
    llama.cpp's native /completion (``timings`` in the ``stop`` chunk), SGLang's native /generate (each chunk's
    ``meta_info`` holds the counts so far: the last one wins)."""

    def __init__(self, chunks: Iterable[object], *, engine: str | None = None):
        if engine is not None and engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        self._chunks = chunks
        self.engine = engine
        self.id: str | None = None
        self.model: str | None = None
        self.usage: dict | None = None
        self.spec: dict | None = None
        self.final: dict | None = None  # the last chunk that carried the counts
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
        found = detect_engine(data)
        engine = self.engine or found
        self.id = (_request_id(data, engine) if engine else data.get("id")) or self.id
        self.model = data.get("model") or self.model
        if data.get("usage"):
            self.usage = dict(data["usage"])
        if found is not None and found == engine:
            self.engine, self.final = found, data
            self.spec = engine_counts(data, found)

    def record(self, *, labels: Mapping[str, str] | None = None, request_id: str | None = None,
               spec_mode: str | None = None, model: str | None = None,
               running_requests: int | None = None) -> dict | None:
        if self.spec is None:
            return None
        _need(request_id or self.id, model or self.model)
        data = {**self.final, "usage": self.usage or self.final.get("usage")}
        return _record(request_id or self.id, model or self.model, labels, self.finished_at or time.time(),
                       _output_tokens(data, self.engine), self.spec, spec_mode, _prompt_tokens(data, self.engine),
                       running_requests, self.engine)


def _need(request_id: object, model: object) -> None:
    """A response with counts but no id or model cannot become a record: say what to pass."""
    if not request_id:
        raise ValueError("the response names no request id (llama.cpp's native /completion has none): pass "
                         "request_id=")
    if not model:
        raise ValueError("the response names no model (SGLang's native /generate has none): pass model=")


def record_from_response(response: object, *, labels: Mapping[str, str] | None = None,
                         finish_time: float | None = None, request_id: str | None = None,
                         spec_mode: str | None = None, engine: str | None = None,
                         model: str | None = None, running_requests: int | None = None) -> dict | None:
    """The ingest record of a non-streamed response of vLLM, llama.cpp or SGLang (None when it carries no
    per-request counts). engine: "vllm", "llamacpp" or "sglang", default detected from the shape
    (detect_engine); finish_time defaults to now, request_id to the response's id, model to its model (SGLang's
    native /generate names none, llama.cpp's /completion no id: pass them, else ValueError); spec_mode: the
    spec mode of the engine that served it (needed when the model's engine pools run several, or none is
    collected); running_requests: that engine's running requests when the request finished, where the caller
    knows it (α by concurrency band; without it the engine pool's mean of that minute is used)."""
    data = as_dict(response) or {}
    engine = engine or detect_engine(data)
    if engine is None:
        return None
    spec = engine_counts(data, engine)
    if spec is None:
        return None
    _need(request_id or _request_id(data, engine), model or data.get("model"))
    return _record(request_id or _request_id(data, engine), model or data.get("model"), labels,
                   time.time() if finish_time is None else finish_time, _output_tokens(data, engine), spec,
                   spec_mode, _prompt_tokens(data, engine), running_requests, engine)


def record_from_stream(chunks: Iterable[object], *, labels: Mapping[str, str] | None = None,
                       spec_mode: str | None = None, engine: str | None = None,
                       model: str | None = None, running_requests: int | None = None) -> dict | None:
    """Consume a whole stream and return its record (use StreamRecorder to pass the chunks on as well)."""
    rec = StreamRecorder(chunks, engine=engine)
    for _ in rec:
        pass
    return rec.record(labels=labels, spec_mode=spec_mode, model=model, running_requests=running_requests)



MAX_RUNNING_REQUESTS = 1_000_000  # as the server bounds it


def _record(request_id, model, labels, finish_time: float, output_tokens: int, spec: dict,
            spec_mode: str | None = None, prompt_tokens: int | None = None,
            running_requests: int | None = None, engine: str = "vllm") -> dict:
    if running_requests is not None and (type(running_requests) is not int
                                         or not 1 <= running_requests <= MAX_RUNNING_REQUESTS):
        raise ValueError(f"running_requests must be a whole number 1 .. {MAX_RUNNING_REQUESTS:,} (the engine's "
                         f"running requests when this one finished), got {running_requests!r}")
    out = {"request_id": request_id, "model": model, "labels": dict(labels or {}),
           "finish_time": datetime.fromtimestamp(finish_time, UTC).isoformat(),
           "output_tokens": output_tokens, "speculative_decoding": spec}
    if engine != "vllm":  # vLLM's records name no engine (the server's default)
        out["engine"] = engine
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
