"""POST /api/v1/requests with llama.cpp and SGLang records (from the client helper and the engines' response
shapes) on real Postgres: what an engine does not report is stored NULL and summed NULL, never 0; one engine
per records pool (a batch mixing them, or records of another engine than the pool's, is refused and nothing
is stored); inconsistent records are refused by rule."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from backend.api.auth import create_token
from backend.client.per_request import record_from_response
from backend.db.models import Pool, PoolBucket

URL = "/api/v1/requests"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engine_responses"


@pytest.fixture
def ingest(db: Session, now: datetime) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(db, name='ingest-user', role='ingest', by='test', now=now)[1]}"}


def shape(name: str, now: datetime, rid: str, **kw) -> dict:
    data = json.loads((FIXTURES / name).read_text())
    return record_from_response(data, finish_time=now.timestamp() - 90, request_id=rid,
                                labels={"traffic_class": "chat"}, **kw)


def rows(db: Session) -> list[tuple]:
    return db.execute(text("SELECT request_id, engine, num_spec_tokens, steps, draft_tokens, accepted, histogram "
                           "FROM request_records ORDER BY request_id")).all()


def test_llamacpp_and_sglang_records_store_null_for_what_they_do_not_report(
        client: TestClient, db: Session, ingest, now) -> None:
    batch = [{**shape("llamacpp-chat.json", now, "l1"), "spec_mode": "draft_model"},
             {**shape("llamacpp-completion.json", now, "l2"), "spec_mode": "draft_model"},
             {**shape("sglang-generate.json", now, "s1", model="m-sg"), "spec_mode": "eagle"},
             {**shape("sglang-generate-legacy.json", now, "s2", model="m-sg-old"), "spec_mode": "eagle"}]
    batch[0]["model"] = batch[1]["model"] = "m-lc"
    batch[0]["running_requests"] = batch[1]["running_requests"] = 4
    r = client.post(URL, json=batch, headers=ingest)
    assert r.status_code == 200, r.text
    assert (r.json()["stored"], r.json()["refused"]) == (4, 0)
    assert rows(db) == [("l1", "llamacpp", None, None, 604, 515, None),
                        ("l2", "llamacpp", 16, None, 48, 30, None),
                        ("s1", "sglang", None, 40, 120, 59, None),
                        ("s2", "sglang", None, 30, None, 59, None)]
    lc = db.scalar(select(Pool).where(Pool.model_name == "m-lc"))
    b = db.scalar(select(PoolBucket).where(PoolBucket.pool_id == lc.id))
    # llama.cpp: drafts and per-position counts unknown -> NULL; draft and accepted tokens exact
    assert (b.drafts, b.draft_tokens, b.accepted_tokens, b.accepted_per_pos) == (None, 604 + 48, 515 + 30, None)
    assert (b.generation_tokens, b.finished_requests, lc.num_spec_tokens) == (665 + 64, 2, 16)
    sg = db.scalar(select(Pool).where(Pool.model_name == "m-sg"))
    b = db.scalar(select(PoolBucket).where(PoolBucket.pool_id == sg.id))
    assert (b.drafts, b.draft_tokens, b.accepted_tokens, b.accepted_per_pos) == (40, 120, 59, None)
    old = db.scalar(select(Pool).where(Pool.model_name == "m-sg-old"))
    b = db.scalar(select(PoolBucket).where(PoolBucket.pool_id == old.id))
    # an SGLang server that sends no draft tokens: the pool's draft-token sum is unknown, not 0
    assert (b.drafts, b.draft_tokens, b.accepted_tokens, b.accepted_per_pos) == (30, None, 59, None)
    assert (sg.num_spec_tokens, old.num_spec_tokens) == (None, None)
    # the records pools carry the engine that served them (the pools listing names it, never vllm by default)
    assert (lc.engine, sg.engine, old.engine) == ("llamacpp", "sglang", "sglang")
    listed = {p["model_name"]: p["engine"] for p in client.get("/api/v1/pools").json()["pools"]
              if p["model_name"] in ("m-lc", "m-sg", "m-sg-old")}
    assert listed == {"m-lc": "llamacpp", "m-sg": "sglang", "m-sg-old": "sglang"}
    assert db.execute(text("SELECT pool_id, engine, draft_tokens FROM request_pool_engines ORDER BY pool_id")).all() \
        == sorted([(lc.id, "llamacpp", True), (sg.id, "sglang", True), (old.id, "sglang", False)])
    # the distribution reads them: llama.cpp α exact, its drafts unknown; SGLang's α unknown
    d = client.get("/api/v1/requests/acceptance", params={"model": "m-lc", "window": "1h"}).json()
    chat = d["classes"][0]
    assert (chat["drafts"], chat["draft_tokens"], chat["accepted_tokens"]) == (None, 652, 545)
    assert chat["draft_token_weighted_alpha"] == 545 / 652 and chat["requests_with_drafts"] == 2
    # by concurrency band too: the verify steps llama.cpp does not report are null (no τ), never 0, and the
    # load rule says why it cannot judge
    assert [(r["band"], r["requests"], r["drafts"], r["mean_acceptance_length"], r["draft_tokens"],
             r["draft_token_weighted_alpha"]) for r in chat["by_concurrency"]] == [("1-8", 2, None, None, 652, 545 / 652)]
    assert chat["load_stability"]["status"] == "no_data"
    assert "verify steps are not exposed" in chat["load_stability"]["text"]
    d = client.get("/api/v1/requests/acceptance", params={"model": "m-sg-old", "window": "1h"}).json()
    chat = d["classes"][0]
    assert (chat["drafts"], chat["draft_tokens"], chat["accepted_tokens"]) == (30, None, 59)
    assert chat["draft_token_weighted_alpha"] is None
    # every page that reads pools reads these too: unknown counts stay null, nothing breaks
    for model in ("m-lc", "m-sg", "m-sg-old"):
        for path in ("/api/v1/summary", "/api/v1/requests/reconciliation", "/api/v1/requests/lowest"):
            r = client.get(path, params={"model": model, "window": "1h"})
            assert r.status_code == 200, (path, model, r.text)
    summary = client.get("/api/v1/summary", params={"model": "m-lc", "window": "1h"}).json()
    row = next(c for c in summary["classes"] if c["spec_mode"] == "draft_model")
    assert row["acceptance_rate"] == 545 / 652 and row["mean_acceptance_length"] is None
    lowest = client.get("/api/v1/requests/lowest", params={"model": "m-lc", "window": "1h"}).json()["requests"]
    assert [(r["request_id"], r["drafts"], r["alpha"]) for r in lowest] == [("l2", None, 30 / 48), ("l1", None,
                                                                                                     515 / 604)]


def test_one_engine_per_records_pool(client: TestClient, db: Session, ingest, now) -> None:
    vllm = {**shape("vllm-chat.json", now, "v1"), "model": "m1", "spec_mode": "eagle3"}
    lc = {**shape("llamacpp-chat.json", now, "l1"), "model": "m1", "spec_mode": "eagle3"}
    r = client.post(URL, json=[vllm, lc], headers=ingest)
    assert r.status_code == 422
    assert "records of llamacpp and of vllm (the batch mixes them)" in r.json()["detail"]
    assert rows(db) == []
    assert client.post(URL, json=[vllm], headers=ingest).json()["stored"] == 1
    r = client.post(URL, json=[lc], headers=ingest)
    assert r.status_code == 422 and "this pool already holds records of the other" in r.json()["detail"]
    assert [row[0] for row in rows(db)] == ["v1"]
    # under a spec mode of its own the llama.cpp records are welcome
    assert client.post(URL, json=[{**lc, "spec_mode": "draft_model"}], headers=ingest).json()["stored"] == 1
    # SGLang records with and without draft tokens are two kinds: one pool sums one
    new = {**shape("sglang-generate.json", now, "s1", model="m2"), "spec_mode": "eagle"}
    old = {**shape("sglang-generate-legacy.json", now, "s2", model="m2"), "spec_mode": "eagle"}
    r = client.post(URL, json=[new, old], headers=ingest)
    assert r.status_code == 422
    assert "records of sglang without draft tokens and of sglang (the batch mixes them)" in r.json()["detail"]
    assert client.post(URL, json=[new], headers=ingest).json()["stored"] == 1
    assert client.post(URL, json=[old], headers=ingest).status_code == 422
    assert [row[0] for row in rows(db)] == ["l1", "s1", "v1"]


def test_inconsistent_engine_records_are_refused_and_not_stored(client: TestClient, db: Session, ingest,
                                                                 now) -> None:
    bad_lc = {**shape("llamacpp-chat.json", now, "l1"), "spec_mode": "draft_model"}
    bad_lc["speculative_decoding"] = {"num_draft_tokens": 10, "num_accepted_draft_tokens": 11}
    bad_sg = {**shape("sglang-generate-legacy.json", now, "s1", model="m"), "spec_mode": "eagle",
              "output_tokens": 20}  # 30 verify steps cannot give 20 tokens
    r = client.post(URL, json=[bad_lc, bad_sg], headers=ingest).json()
    assert (r["stored"], r["refused"]) == (0, 2)
    assert r["refused_by_rule"] == {"accepted_gt_drafted": 1, "steps_gt_output": 1}
    assert rows(db) == []
