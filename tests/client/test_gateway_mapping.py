"""Records built from a gateway's view: Envoy-style x-specwatch-* headers and LiteLLM's request metadata,
tags and x-litellm-* response headers, mapped to labels, spec_mode and replica, with bounds."""

from __future__ import annotations

import email
import json

import httpx
import pytest

from backend.client.gateway import (
    ENVOY,
    LITELLM,
    GatewayMapping,
    GatewayValueError,
    gateway_fields,
    record_from_gateway,
)
from backend.client.per_request import StreamRecorder

SPEC = {"num_spec_tokens": 3, "num_spec_steps": 43, "num_draft_tokens": 129, "num_accepted_draft_tokens": 10,
        "acceptance_histogram": [39, 1, 0, 3]}
RESPONSE = {"id": "chatcmpl-9", "object": "chat.completion", "model": "llama-70b",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 812, "completion_tokens": 53, "total_tokens": 865},
            "metrics": {"speculative_decoding": SPEC}}
# what Envoy returns when the route adds the x-specwatch-* headers (response_headers_to_add), as raw HTTP
ENVOY_RAW = ("content-type: application/json\r\nx-envoy-upstream-service-time: 412\r\n"
             "x-specwatch-traffic-class: code\r\nX-Specwatch-Tenant: acme\r\nx-specwatch-route: /v1/chat\r\n"
             "x-specwatch-spec-mode: eagle3\r\nx-specwatch-replica: 10.0.0.7:8000\r\nserver: envoy\r\n\r\n")
# the LiteLLM proxy: the request body's metadata (plain keys and "name:value" tags) and its response headers
LITELLM_REQUEST = {"model": "llama-70b", "messages": [{"role": "user", "content": "hi"}], "user": "palantir",
                   "metadata": {"tags": ["traffic_class:chat", "jobID:214590dsff09fds"], "tenant": "acme",
                                "spec_mode": "eagle3"}}
LITELLM_HEADERS = {"x-litellm-call-id": "b980db26-9512-45cc-b1da-c511a363b83f",
                   "x-litellm-model-id": "6a3d7c1f0e2b", "x-litellm-model-group": "llama-70b",
                   "x-litellm-model-api-base": "http://vllm-0.vllm:8000/v1", "x-litellm-version": "1.74.0",
                   "x-litellm-response-cost": "0.0"}


def test_envoy_headers_as_http_client_httpx_and_dict() -> None:
    want = {"request_id": "chatcmpl-9", "model": "llama-70b", "output_tokens": 53, "prompt_tokens": 812,
            "labels": {"traffic_class": "code", "tenant": "acme", "route": "/v1/chat"},
            "spec_mode": "eagle3", "replica": "10.0.0.7:8000", "speculative_decoding": SPEC,
            "finish_time": "2023-11-14T22:13:20+00:00"}
    message = email.message_from_string(ENVOY_RAW)  # what http.client / urllib return
    pairs = [tuple(line.split(": ", 1)) for line in ENVOY_RAW.strip().split("\r\n")]
    for headers in (message, httpx.Headers(pairs), dict(pairs)):
        assert record_from_gateway(RESPONSE, mapping=ENVOY, headers=headers, finish_time=1_700_000_000) == want


def test_litellm_metadata_tags_and_deployment_header() -> None:
    rec = record_from_gateway(RESPONSE, mapping=LITELLM, headers=LITELLM_HEADERS, request_body=LITELLM_REQUEST)
    assert rec["labels"] == {"traffic_class": "chat", "tenant": "acme"}  # jobID: not mapped, dropped
    assert (rec["spec_mode"], rec["replica"]) == ("eagle3", "6a3d7c1f0e2b")
    # tags in the x-litellm-tags request header (comma separated) and litellm_metadata work too
    got = gateway_fields(LITELLM, headers={"x-litellm-tags": "team-api, traffic_class:code"},
                         metadata={"route": "search"})
    assert got == {"labels": {"traffic_class": "code", "route": "search"}, "spec_mode": None, "replica": None}
    body = {"litellm_metadata": {"tenant": "beta"}}
    assert record_from_gateway(RESPONSE, mapping=LITELLM, request_body=body)["labels"] == {"tenant": "beta"}
    # labels given by the caller win; a response without speculative_decoding gives no record
    rec = record_from_gateway(RESPONSE, mapping=LITELLM, request_body=LITELLM_REQUEST, labels={"traffic_class": "rag"})
    assert rec["labels"]["traffic_class"] == "rag"
    assert record_from_gateway({**RESPONSE, "metrics": {}}, mapping=LITELLM, request_body=LITELLM_REQUEST) is None


def test_a_streamed_response_through_the_gateway() -> None:
    base = {"id": "chatcmpl-s", "model": "llama-70b", "object": "chat.completion.chunk"}
    last = {**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 53},
            "metrics": {"speculative_decoding": SPEC}}
    sse = [f"data: {json.dumps(c)}\n" for c in ({**base, "choices": [{"delta": {"content": "h"}}]}, last)]
    sse.append("data: [DONE]\n")
    recorder = StreamRecorder(sse)
    assert len(list(recorder)) == 3
    rec = record_from_gateway(recorder, headers=email.message_from_string(ENVOY_RAW))
    assert (rec["request_id"], rec["labels"]["traffic_class"], rec["replica"], rec["prompt_tokens"]) == (
        "chatcmpl-s", "code", "10.0.0.7:8000", 9)


def test_custom_mapping_and_its_bounds() -> None:
    mapping = GatewayMapping(headers={"X-Team": "tenant", "x-pool": "replica"}, max_value_length=8)
    assert gateway_fields(mapping, headers={"x-team": " ml ", "X-POOL": ""}) == {
        "labels": {"tenant": "ml"}, "spec_mode": None, "replica": None}  # trimmed; blank skipped
    with pytest.raises(GatewayValueError, match=r"header x-team: 9 characters, at most 8 \(max_value_length\)"):
        gateway_fields(mapping, headers={"x-team": "a" * 9})
    with pytest.raises(GatewayValueError, match="control characters"):
        gateway_fields(mapping, headers={"x-team": "a\x00b"})
    with pytest.raises(GatewayValueError, match="sent twice with different values"):
        gateway_fields(mapping, headers=[("x-team", "a"), ("X-Team", "b")])
    with pytest.raises(GatewayValueError, match=r"metadata\['tenant'\]: expected text, got int"):
        gateway_fields(LITELLM, metadata={"tenant": 7})
    # a target outside the allowed labels (a user id, say) is refused when the mapping is made
    with pytest.raises(ValueError, match="'user_id': a target is one of the allowed labels"):
        GatewayMapping(headers={"x-user": "user_id"})
    assert GatewayMapping(headers={"x-user": "user"}, allowed_labels={"user"}).headers == {"x-user": "user"}
    with pytest.raises(ValueError, match="max_value_length"):
        GatewayMapping(max_value_length=500)
    with pytest.raises(GatewayValueError, match="metadata must be an object"):
        record_from_gateway(RESPONSE, request_body={"metadata": ["x"]})
