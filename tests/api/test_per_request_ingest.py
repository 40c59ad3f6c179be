"""POST /api/v1/requests on real Postgres: auth, idempotency, label allowlist and cardinality, refusals
(never stored), bounds, and the bucket sums (per-position counts from the histogram) they add."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from backend.api.auth import create_token
from backend.db.models import Pool, PoolBucket
from backend.db.models_requests import RequestRecordRow

URL = "/api/v1/requests"


@pytest.fixture
def auth(db: Session, now: datetime) -> dict[str, dict[str, str]]:
    tokens = {role: create_token(db, name=f"{role}-user", role=role, by="test", now=now)[1]
              for role in ("ingest", "viewer", "admin")}
    return {role: {"Authorization": f"Bearer {t}"} for role, t in tokens.items()}


def spec(hist: list[int], *, drafted: int | None = None, **over) -> dict:
    k = len(hist) - 1
    steps = sum(hist)
    accepted = sum(j * h for j, h in enumerate(hist))
    drafted = k * steps if drafted is None else drafted
    obj = {"num_spec_tokens": k, "num_spec_steps": steps, "num_draft_tokens": drafted,
           "num_accepted_draft_tokens": accepted, "acceptance_histogram": hist,
           "mean_acceptance_length": 1 + accepted / steps if steps else 1.0,
           "draft_acceptance_rate": accepted / drafted if drafted else 0.0}
    obj.update(over)
    return obj


def record(rid: str, hist: list[int], *, now: datetime, cls: str = "chat", model: str = "m1", output: int = 100,
           ago: float = 90.0, mode: str | None = "eagle3", **spec_over) -> dict:
    out = {"request_id": rid, "model": model, "labels": {"traffic_class": cls, "tenant": "acme"},
           "finish_time": (now - timedelta(seconds=ago)).isoformat(), "output_tokens": output,
           "speculative_decoding": spec(hist, **spec_over)}
    return out if mode is None else {**out, "spec_mode": mode}


def test_ingest_needs_an_ingest_or_admin_token(client: TestClient, anonymous: TestClient, auth, now) -> None:
    batch = [record("r1", [1, 2, 3, 4], now=now)]
    assert anonymous.post(URL, json=batch).status_code == 401
    r = client.post(URL, json=batch, headers=auth["viewer"])
    assert r.status_code == 403 and "ingest" in r.json()["detail"]
    assert client.post(URL, json=batch, headers=auth["ingest"]).status_code == 200
    # an ingest token reads nothing
    assert client.get("/api/v1/whoami", headers=auth["ingest"]).status_code == 403


def test_ingest_is_idempotent_by_request_id(client: TestClient, db: Session, auth, now) -> None:
    batch = [record("r1", [1, 2, 3, 4], now=now), record("r2", [5, 0, 0, 1], now=now, cls="code"),
             record("r1", [1, 2, 3, 4], now=now)]  # repeated inside the batch
    first = client.post(URL, json=batch, headers=auth["ingest"]).json()
    assert (first["stored"], first["duplicates"], first["refused"]) == (2, 1, 0)
    again = client.post(URL, json=batch, headers=auth["ingest"]).json()
    assert (again["stored"], again["duplicates"], again["buckets"]) == (0, 3, 0)
    chat = db.scalar(select(Pool).where(Pool.traffic_class == "chat"))
    assert (chat.origin, chat.spec_mode, chat.num_spec_tokens) == ("requests", "eagle3", 3)
    b = db.scalar(select(PoolBucket).where(PoolBucket.pool_id == chat.id))
    # hist [1, 2, 3, 4]: N = 10, A = 0*1 + 1*2 + 2*3 + 3*4 = 20, D = 3 * 10
    assert (b.drafts, b.draft_tokens, b.accepted_tokens, b.finished_requests, b.generation_tokens) == \
        (10, 30, 20, 1, 100)
    # P_0 = h1+h2+h3 = 9, P_1 = h2+h3 = 7, P_2 = h3 = 4 (sum 20 = A)
    assert b.accepted_per_pos == [9, 7, 4]
    assert b.source == "requests"
    assert db.scalar(select(text("count(*)")).select_from(RequestRecordRow)) == 2


def test_sums_add_up_across_batches_in_one_bucket(client: TestClient, db: Session, auth, now) -> None:
    client.post(URL, json=[record("a", [1, 2, 3, 4], now=now)], headers=auth["ingest"])
    client.post(URL, json=[record("b", [0, 0, 1, 1, 2], now=now, output=7)], headers=auth["ingest"])  # K = 4
    b = db.scalar(select(PoolBucket).join(Pool, Pool.id == PoolBucket.pool_id).where(Pool.traffic_class == "chat"))
    # second: N = 4, A = 2 + 3 + 8 = 13, per-pos [4, 4, 3, 2]; first [9, 7, 4]
    assert (b.drafts, b.accepted_tokens, b.generation_tokens, b.finished_requests) == (14, 33, 107, 2)
    assert b.accepted_per_pos == [13, 11, 7, 2]


def test_ndjson_body(client: TestClient, auth, now) -> None:
    body = "\n".join(json.dumps(record(f"n{i}", [1, 1], now=now)) for i in range(3)) + "\n\n"
    r = client.post(URL, content=body, headers={**auth["ingest"], "Content-Type": "application/x-ndjson"})
    assert r.status_code == 200 and r.json()["stored"] == 3


BAD = {
    "accepted_gt_drafted": {"hist": [0, 0, 2], "drafted": 3},
    "histogram_sum_mismatch": {"hist": [1, 2, 3], "num_spec_steps": 7},
    "histogram_accepted_mismatch": {"hist": [1, 2, 3], "num_accepted_draft_tokens": 9},
    "k_mismatch": {"hist": [1, 2, 3], "num_spec_tokens": 3},
    "k_invalid": {"hist": [1], "num_spec_tokens": 0},
    "drafted_gt_k_steps": {"hist": [1, 2, 3], "drafted": 13},
    "negative": {"hist": [1, -2, 3]},
    "not_finite": {"hist": [1, 2, 3], "num_spec_steps": float("nan")},
    "not_integer": {"hist": [1, 2, 3], "num_draft_tokens": 12.5},
    "rate_mismatch": {"hist": [1, 2, 3], "draft_acceptance_rate": 0.9},
    "by_draft_length_mismatch": {"hist": [1, 2, 3], "acceptance_histogram_by_draft_length": {"2": [1, 2, 2]}},
    "per_step_mismatch": {"hist": [1, 1], "per_step_accepted": [1, 1], "per_step_drafted": [1, 1]},
    "missing_field": {"hist": [1, 1], "num_spec_steps": None},
}


def _bad_record(rule: str, now: datetime) -> dict:
    case = dict(BAD[rule])
    hist = case.pop("hist")
    rec = record(f"bad-{rule}", [max(h, 0) for h in hist], now=now, **{k: v for k, v in case.items()
                                                                         if k == "drafted"})
    for k, v in case.items():
        if k != "drafted":
            rec["speculative_decoding"][k] = v
    rec["speculative_decoding"]["acceptance_histogram"] = hist
    if rule == "missing_field":
        del rec["speculative_decoding"]["num_spec_steps"]
    return rec


@pytest.mark.parametrize("rule", sorted(BAD))
def test_every_refusal_rule_is_counted_and_nothing_stored(client: TestClient, db: Session, auth, now,
                                                          rule: str) -> None:
    good = record("good", [1, 2, 3], now=now)
    r = client.post(URL, content=json.dumps([_bad_record(rule, now), good]).replace("NaN", "NaN"),
                    headers={**auth["ingest"], "Content-Type": "application/json"})
    body = r.json()
    assert r.status_code == 200, body
    assert (body["stored"], body["refused"]) == (1, 1)
    assert body["refused_by_rule"] == {rule: 1}
    assert body["refusals"][0]["request_id"] == f"bad-{rule}" and body["refusals"][0]["index"] == 0
    ids = db.scalars(select(RequestRecordRow.request_id)).all()
    assert ids == ["good"]
    b = db.scalar(select(PoolBucket))
    assert (b.drafts, b.accepted_tokens) == (6, 8)  # the good record only


def test_record_level_refusals(client: TestClient, auth, now) -> None:
    batch = [
        {**record("old", [1, 1], now=now), "finish_time": (now - timedelta(days=30)).isoformat()},
        {**record("future", [1, 1], now=now), "finish_time": (now + timedelta(hours=1)).isoformat()},
        {**record("nospec", [1, 1], now=now), "speculative_decoding": None},
        {**record("nz", [1, 1], now=now), "finish_time": "2026-11-30T12:00:00"},
        "not an object",
        {**record("long", [1, 1], now=now), "model": "m" * 301},
        {**record("nul\x00", [1, 1], now=now)},
        {**record("lab", [1, 1], now=now), "labels": {"tenant": 7}},
        {**record("big", [1, 1], now=now), "output_tokens": 2**31},
    ]
    body = client.post(URL, json=batch, headers=auth["ingest"]).json()
    assert body["stored"] == 0
    assert body["refused_by_rule"] == {"too_old": 1, "in_future": 1, "missing_speculative_decoding": 1,
                                       "bad_time": 1, "not_an_object": 1, "too_long": 1, "bad_text": 1,
                                       "bad_labels": 1, "too_large": 1}


def test_unknown_label_refuses_the_batch(client: TestClient, db: Session, auth, now) -> None:
    rec = record("x", [1, 1], now=now)
    rec["labels"]["user_id"] = "u-123"
    r = client.post(URL, json=[record("ok", [1, 1], now=now), rec], headers=auth["ingest"])
    assert r.status_code == 422 and "'user_id' is not allowed" in r.json()["detail"]
    assert db.scalar(select(text("count(*)")).select_from(RequestRecordRow)) == 0


def test_label_cardinality_limit(client: TestClient, db: Session, auth, now) -> None:
    client.app.state.settings.requests_label_max_values = 3
    first = [record(f"t{i}", [1, 1], now=now) | {"labels": {"tenant": f"t{i}"}} for i in range(3)]
    assert client.post(URL, json=first, headers=auth["ingest"]).json()["stored"] == 3
    # known values still pass
    assert client.post(URL, json=[record("t0b", [1, 1], now=now) | {"labels": {"tenant": "t0"}}],
                       headers=auth["ingest"]).json()["stored"] == 1
    over = [record("t3", [1, 1], now=now) | {"labels": {"tenant": "t3"}}]
    r = client.post(URL, json=over, headers=auth["ingest"])
    assert r.status_code == 422
    assert "'tenant' would have 4 distinct values in the last 86400 s, over the limit of 3" in r.json()["detail"]
    assert db.scalar(select(text("count(*)")).select_from(RequestRecordRow)) == 4


def test_batch_bounds(client: TestClient, auth, now) -> None:
    s = client.app.state.settings
    s.requests_max_batch = 2
    r = client.post(URL, json=[record(f"b{i}", [1, 1], now=now) for i in range(3)], headers=auth["ingest"])
    assert r.status_code == 413 and "at most 2" in r.json()["detail"]
    s.requests_max_body_bytes = 100
    r = client.post(URL, json=[record("big", [1, 1], now=now)], headers=auth["ingest"])
    assert r.status_code == 413
    s.requests_max_body_bytes = 10_000
    for bad in (b"", b"[{", b"{\"a\": 1}\n{oops"):
        r = client.post(URL, content=bad, headers=auth["ingest"])
        assert r.status_code == 422, bad


def test_spec_mode_from_the_record_the_header_or_the_only_engine_mode(client: TestClient, db: Session, auth,
                                                                      now) -> None:
    from tests.factories import make_pool

    # no engine pool of m1 yet and no spec_mode: refused, naming what to send; nothing stored
    r = client.post(URL, json=[record("s1", [1, 1], now=now, mode=None)], headers=auth["ingest"])
    assert r.status_code == 422 and "'m1'" in r.json()["detail"] and "X-Specwatch-Spec-Mode" in r.json()["detail"]
    # the header names it for records without their own; a record's own spec_mode wins
    r = client.post(URL, json=[record("s2", [1, 1], now=now, mode=None), record("s3", [1, 1], now=now, mode="ngram")],
                    headers={**auth["ingest"], "X-Specwatch-Spec-Mode": "eagle3"})
    assert r.status_code == 200 and r.json()["stored"] == 2, r.json()
    for bad in ("off", "", "x" * 121, 7):
        r = client.post(URL, json=[record("s4", [1, 1], now=now, mode=bad)], headers=auth["ingest"])
        assert r.status_code == 422, bad
    # two engine spec modes: which one served a record is not guessed
    make_pool(db, model_name="m1", traffic_class="chat", spec_mode="eagle3")
    make_pool(db, model_name="m1", traffic_class="chat", spec_mode="ngram")
    db.commit()
    r = client.post(URL, json=[record("s5", [1, 1], now=now, mode=None)], headers=auth["ingest"])
    assert r.status_code == 422 and "several spec modes (eagle3, ngram)" in r.json()["detail"]
    # a replica where the gateway knows it: stored with the record, shown in the lowest export
    r = client.post(URL, json=[{**record("s6", [3, 0], now=now), "replica": "10.0.0.7:8000/0"}],
                    headers=auth["ingest"])
    assert r.status_code == 200 and r.json()["stored"] == 1
    assert client.post(URL, json=[{**record("s7", [1, 1], now=now), "replica": 5}],
                       headers=auth["ingest"]).status_code == 422
    db.expire_all()
    rows = db.execute(text("SELECT r.request_id, p.spec_mode, p.origin, r.replica FROM request_records r "
                           "JOIN pools p ON p.id = r.pool_id ORDER BY 1")).all()
    assert [tuple(x) for x in rows] == [("s2", "eagle3", "requests", None), ("s3", "ngram", "requests", None),
                                        ("s6", "eagle3", "requests", "10.0.0.7:8000/0")]
    low = client.get("/api/v1/requests/lowest", params={"model": "m1", "limit": 1}, headers=auth["viewer"]).json()
    assert low["requests"][0]["request_id"] == "s6" and low["requests"][0]["replica"] == "10.0.0.7:8000/0"


def test_records_are_a_source_of_the_engine_pool_never_added_to_it(client: TestClient, db: Session, auth,
                                                                    now) -> None:
    from tests.factories import make_pool

    engine = make_pool(db, model_name="m1", traffic_class="chat", spec_mode="eagle3")
    db.commit()
    r = client.post(URL, json=[record("e", [1, 1], now=now, mode=None)], headers=auth["ingest"])
    assert r.status_code == 200 and r.json()["stored"] == 1, r.json()
    db.expire_all()
    rows = db.execute(text("SELECT id, spec_mode, origin FROM pools WHERE model_name = 'm1' ORDER BY id")).all()
    assert [(m, o) for _, m, o in rows] == [("eagle3", "engine"), ("eagle3", "requests")]
    assert db.execute(text("SELECT count(*) FROM pool_buckets WHERE pool_id = :p"), {"p": engine.id}).scalar() == 0


def test_read_endpoints(client: TestClient, auth, now) -> None:
    from backend.client.per_request import record_from_response

    vllm_response = {"id": "cmpl-doc", "model": "m1", "usage": {"completion_tokens": 53}, "metrics": {
        "speculative_decoding": {"mean_acceptance_length": 1.2325581395348837,
                                 "draft_acceptance_rate": 0.07751937984496124, "acceptance_histogram": [39, 1, 0, 3],
                                 "acceptance_histogram_by_draft_length": {"3": [39, 1, 0, 3]}, "num_spec_steps": 43,
                                 "num_accepted_draft_tokens": 10, "num_draft_tokens": 129, "num_spec_tokens": 3}}}
    doc = record_from_response(vllm_response, labels={"traffic_class": "chat"},
                               finish_time=(now - timedelta(seconds=90)).timestamp(), spec_mode="eagle3")
    body = client.post(URL, json=[doc, record("r2", [0, 0, 0, 2], now=now)], headers=auth["ingest"]).json()
    assert body["stored"] == 2, body
    d = client.get("/api/v1/requests/acceptance", params={"model": "m1", "window": "1h"}).json()
    chat = d["classes"][0]
    assert (chat["traffic_class"], chat["requests"], chat["accepted_tokens"], chat["draft_tokens"]) == \
        ("chat", 2, 16, 135)
    assert chat["request_weighted_alpha"] == pytest.approx((10 / 129 + 1.0) / 2)
    csv_text = client.get("/api/v1/requests/lowest", params={"model": "m1", "format": "csv"}).text
    assert csv_text.splitlines()[1].startswith("cmpl-doc,chat,")
    r = client.get("/api/v1/requests/reconciliation", params={"model": "m1"}).json()
    assert r["per_request"]["drafts"] == 45 and r["flags"] == ["no_engine_counters"]
    assert client.get("/api/v1/requests/acceptance", params={"model": "nope"}).status_code == 404
    assert client.get("/api/v1/requests/acceptance", params={"model": "m1", "label": "user=x"}).status_code == 422
    assert client.get("/api/v1/requests/lowest", params={"model": "m1", "limit": 0}).status_code == 422


def test_settings_are_checked() -> None:
    from backend.config import Settings

    with pytest.raises(ValueError, match="requests_class_label must be one of requests_labels"):
        Settings(_env_file=None, requests_class_label="class")
    with pytest.raises(ValueError, match="requests_max_batch must be >= 1"):
        Settings(_env_file=None, requests_max_batch=0)
