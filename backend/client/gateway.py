"""Per-request records behind a gateway (LiteLLM, Envoy, any proxy that knows the route, tenant or replica):
``record_from_gateway`` fills the record's labels, ``spec_mode`` and ``replica`` from the gateway's response
headers and the request's metadata through a ``GatewayMapping`` (presets ``ENVOY`` and ``LITELLM``).
Standard library only, like backend.client.per_request. See docs/per-request.md."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from backend.client.per_request import StreamRecorder, as_dict, record_from_response

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
                        engine: str | None = None, running_requests: int | None = None) -> dict | None:
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
    asked = body.get("model") if isinstance(body.get("model"), str) else None
    if isinstance(response, StreamRecorder):  # SGLang's native /generate names no model: the request's
        rec = response.record(labels=merged, request_id=request_id, spec_mode=got["spec_mode"],
                              model=None if response.model else asked, running_requests=running_requests)
    else:
        named = (as_dict(response) or {}).get("model")
        rec = record_from_response(response, labels=merged, finish_time=finish_time, request_id=request_id,
                                   spec_mode=got["spec_mode"], engine=engine, model=None if named else asked,
                                   running_requests=running_requests)
    if rec is not None and got["replica"] is not None:
        rec["replica"] = got["replica"]
    return rec
