"""Records built by the client helper from a gateway's view (Envoy x-specwatch-* headers, LiteLLM request
metadata and x-litellm-model-id) go through POST /api/v1/requests with an ingest token and read back, with
their labels, spec mode and replica, with a viewer token; a mapping to a label the server does not allow is
refused whole."""

from __future__ import annotations

import email
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session

from backend.api.auth import create_token
from backend.client.gateway import ENVOY, LITELLM, GatewayMapping, record_from_gateway
from backend.client.per_request import ndjson

URL = "/api/v1/requests"


def response(rid: str, hist: list[int], prompt: int) -> dict:
    k, steps = len(hist) - 1, sum(hist)
    accepted = sum(j * h for j, h in enumerate(hist))
    return {"id": rid, "object": "chat.completion", "model": "llama-70b",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 80, "total_tokens": prompt + 80},
            "metrics": {"speculative_decoding": {
                "num_spec_tokens": k, "num_spec_steps": steps, "num_draft_tokens": k * steps,
                "num_accepted_draft_tokens": accepted, "acceptance_histogram": hist}}}


@pytest.fixture
def tokens(db: Session, now: datetime) -> dict[str, dict[str, str]]:
    return {role: {"Authorization": f"Bearer {create_token(db, name=f'gw-{role}', role=role, by='test', now=now)[1]}",
                   "Content-Type": "application/x-ndjson"} for role in ("ingest", "viewer")}


def test_gateway_records_go_in_and_read_back(client: TestClient, db: Session, tokens, now) -> None:
    t = now.timestamp() - 60
    envoy_headers = email.message_from_string(
        "x-specwatch-traffic-class: code\r\nx-specwatch-tenant: acme\r\nx-specwatch-spec-mode: eagle3\r\n"
        "x-specwatch-replica: 10.0.0.7:8000\r\n\r\n")
    litellm_body = {"model": "llama-70b", "messages": [], "metadata": {
        "tags": ["traffic_class:chat", "jobID:42"], "tenant": "beta", "spec_mode": "eagle3"}}
    records = [
        record_from_gateway(response("gw-envoy", [3, 1, 0, 0], 900), mapping=ENVOY, headers=envoy_headers,
                            finish_time=t),
        record_from_gateway(response("gw-litellm", [1, 0, 1, 2], 40_000), mapping=LITELLM,
                            headers={"x-litellm-model-id": "dep-7"}, request_body=litellm_body, finish_time=t),
        record_from_gateway({**response("gw-none", [1, 1], 5), "metrics": {}}, mapping=ENVOY, finish_time=t),
    ]
    assert records[2] is None  # no speculative_decoding: no record, skipped by ndjson
    r = client.post(URL, content=ndjson(records), headers=tokens["ingest"])
    assert r.status_code == 200, r.text
    assert (r.json()["received"], r.json()["stored"], r.json()["refused"]) == (2, 2, 0)
    # nothing to read with an ingest token; a viewer reads the records with what the gateways said
    assert client.get("/api/v1/requests/lowest", params={"model": "llama-70b"},
                      headers=tokens["ingest"]).status_code == 403
    low = client.get("/api/v1/requests/lowest", params={"model": "llama-70b", "window": "1h"},
                     headers=tokens["viewer"]).json()["requests"]
    got = {x["request_id"]: (x["traffic_class"], x["labels"], x["replica"], x["accepted_tokens"]) for x in low}
    assert got == {"gw-envoy": ("code", {"traffic_class": "code", "tenant": "acme"}, "10.0.0.7:8000", 1),
                   "gw-litellm": ("chat", {"traffic_class": "chat", "tenant": "beta"}, "dep-7", 8)}
    acc = client.get("/api/v1/requests/acceptance", params={"model": "llama-70b", "window": "1h"},
                     headers=tokens["viewer"]).json()
    assert {(c["traffic_class"], c["spec_mode"], c["draft_token_weighted_alpha"]) for c in acc["classes"]} == {
        ("code", "eagle3", 1 / 12), ("chat", "eagle3", 8 / 12)}
    db.expire_all()
    assert db.execute(text("SELECT prompt_tokens FROM request_records ORDER BY request_id")).scalars().all() == [
        900, 40_000]


def test_a_mapped_label_the_server_does_not_allow_is_refused_whole(client: TestClient, db: Session, tokens,
                                                                   now) -> None:
    team = GatewayMapping(headers={"x-team": "team", "x-specwatch-spec-mode": "spec_mode"},
                          allowed_labels={"team", "traffic_class"})
    rec = record_from_gateway(response("gw-team", [1, 1], 10), mapping=team, finish_time=now.timestamp() - 60,
                              headers={"x-team": "ml", "x-specwatch-spec-mode": "eagle3"})
    ok = record_from_gateway(response("gw-ok", [1, 1], 10), mapping=ENVOY, finish_time=now.timestamp() - 60,
                             headers={"x-specwatch-spec-mode": "eagle3"})
    r = client.post(URL, content=ndjson([ok, rec]), headers=tokens["ingest"])
    assert r.status_code == 422 and r.json()["code"] == "batch_refused"
    assert "'team' is not allowed" in r.json()["detail"]
    db.expire_all()
    assert db.execute(text("SELECT count(*) FROM request_records")).scalar_one() == 0
