"""A flood of model names or label values through POST /api/v1/requests is refused whole (422, nothing stored): the distinct
models one sender may post in a window, the distinct values of a label in a window, and the pool limit collection obeys (SPECWATCH_MAX_POOLS). On a
migrated database of its own, through the API with its own sessions (a refused batch is rolled back)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session

from backend.api.app import create_app
from backend.api.deps import get_now
from backend.config import Settings
from backend.db.session import make_engine
from backend.services import rollup
from tests.support.auth import bearer, make_token

URL = "/api/v1/requests"
NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def record(rid: str, model: str, *, tenant: str = "acme") -> dict:
    return {"request_id": rid, "model": model, "spec_mode": "eagle3", "labels": {"traffic_class": "chat", "tenant": tenant},
            "finish_time": (NOW - timedelta(seconds=90)).isoformat(), "output_tokens": 100,
            "speculative_decoding": {"num_spec_tokens": 1, "num_spec_steps": 2, "num_draft_tokens": 2,
                                     "num_accepted_draft_tokens": 1, "acceptance_histogram": [1, 1]}}


@pytest.fixture
def api(fresh_db_url: str) -> Iterator[tuple[TestClient, dict, callable]]:
    app = create_app(Settings(_env_file=None, database_url=fresh_db_url))
    clock = {"now": NOW}
    app.dependency_overrides[get_now] = lambda: clock["now"]
    engine = make_engine(fresh_db_url)

    def count(sql: str) -> int:
        with engine.connect() as conn:
            return conn.execute(text(sql)).scalar_one()

    try:
        with TestClient(app) as client:
            yield client, clock, count
    finally:
        engine.dispose()


def _stored(count) -> tuple[int, int, int, int]:
    return (count("SELECT count(*) FROM pools"), count("SELECT count(*) FROM request_records"),
            count("SELECT count(*) FROM request_label_values"), count("SELECT count(*) FROM request_model_senders"))


def test_2500_model_names_in_one_batch_are_refused_and_nothing_is_stored(api, fresh_db_url) -> None:
    client, _, count = api
    assert client.app.state.settings.requests_max_models_per_sender == 50  # the default
    flood = [record(f"r{i}", f"model-{i}", tenant=f"t{i % 3}") for i in range(2500)]
    r = client.post(URL, json=flood, headers=bearer(make_token(fresh_db_url, "ingest")))
    assert r.status_code == 422 and r.json()["code"] == "batch_refused"
    detail = r.json()["detail"]
    assert detail.startswith("batch refused, nothing stored: it names 2500 model(s) this sender has not posted")
    assert ("at most 50 distinct models per sender and window (SPECWATCH_REQUESTS_MAX_MODELS_PER_SENDER per "
            "SPECWATCH_REQUESTS_MODELS_WINDOW_SECONDS)") in detail
    assert _stored(count) == (0, 0, 0, 0)


def test_the_cap_counts_per_sender_within_the_window(api, fresh_db_url) -> None:
    client, clock, count = api
    client.app.state.settings.requests_max_models_per_sender = 3
    gateway, other = (bearer(make_token(fresh_db_url, "ingest", name=n)) for n in ("gw-a", "gw-b"))
    ok = client.post(URL, json=[record("a1", "m1"), record("a2", "m2")], headers=gateway)
    assert ok.status_code == 200 and ok.json()["pools"] == 2
    # m1 again plus m3: 3 models, at the cap
    assert client.post(URL, json=[record("a3", "m1"), record("a4", "m3")], headers=gateway).status_code == 200
    before = _stored(count)
    over = client.post(URL, json=[record("a5", "m1"), record("a6", "m4")], headers=gateway)
    assert over.status_code == 422
    assert "it names 1 model(s) this sender has not posted in the last 86400 s (e.g. 'm4'), 3 already; " \
           "at most 3 distinct models" in over.json()["detail"]
    assert _stored(count) == before  # a5 (a known model) is not stored either: the whole batch is refused
    assert count("SELECT count(*) FROM request_records WHERE request_id = 'a5'") == 0
    # another sender has a cap of its own
    assert client.post(URL, json=[record("b1", "m4")], headers=other).status_code == 200
    # a day later the gateway's old models no longer count
    clock["now"] = NOW + timedelta(days=1, seconds=1)
    late = [record("a7", "m5") | {"finish_time": (clock["now"] - timedelta(seconds=60)).isoformat()}]
    assert client.post(URL, json=late, headers=gateway).status_code == 200
    assert count("SELECT count(*) FROM request_model_senders WHERE model_name IN ('m1', 'm2', 'm3')") == 0


def test_new_per_request_pools_obey_max_pools(api, fresh_db_url) -> None:
    client, _, count = api
    s = client.app.state.settings
    s.max_pools = 3
    token = bearer(make_token(fresh_db_url, "ingest"))
    assert client.post(URL, json=[record("p1", "m1"), record("p2", "m2")], headers=token).status_code == 200
    before = _stored(count)
    r = client.post(URL, json=[record("p3", "m1"), record("p4", "m3"), record("p5", "m4")], headers=token)
    assert r.status_code == 422
    assert r.json()["detail"] == ("batch refused, nothing stored: it would add 2 pool(s) to the 2 stored, over the "
                                  "limit of 3 pools (SPECWATCH_MAX_POOLS; e.g. 'm3')")
    assert _stored(count) == before
    # room for one more, and stored pools go on
    assert client.post(URL, json=[record("p6", "m1"), record("p7", "m3")], headers=token).json()["stored"] == 2
    assert count("SELECT count(*) FROM pools") == 3


def test_label_values_are_capped_per_window_and_the_refusal_names_the_setting(api, fresh_db_url) -> None:
    client, clock, count = api
    s = client.app.state.settings
    s.requests_label_max_values, s.requests_label_values_window_seconds = 2, 3600
    token = bearer(make_token(fresh_db_url, "ingest"))
    ok = client.post(URL, json=[record("l1", "m1", tenant="t1"), record("l2", "m1", tenant="t2")], headers=token)
    assert ok.status_code == 200 and ok.json()["stored"] == 2
    before = _stored(count)
    r = client.post(URL, json=[record("l3", "m1", tenant="t1"), record("l4", "m1", tenant="t3")], headers=token)
    assert r.status_code == 422 and r.json()["code"] == "batch_refused"
    assert r.json()["detail"].startswith(
        "batch refused, nothing stored: label 'tenant' would have 3 distinct values in the last 3600 s, over the "
        "limit of 2 (SPECWATCH_REQUESTS_LABEL_MAX_VALUES per SPECWATCH_REQUESTS_LABEL_VALUES_WINDOW_SECONDS); "
        "new values include 't3'")
    assert _stored(count) == before  # l3 (a known value) is not stored either
    # within the window, t1 stays in use; an hour after t2 was last seen, it no longer counts: t3 fits
    clock["now"] = NOW + timedelta(minutes=30)
    late = lambda rid, tenant: record(rid, "m1", tenant=tenant) | {
        "finish_time": (clock["now"] - timedelta(seconds=60)).isoformat()}
    assert client.post(URL, json=[late("l5", "t1")], headers=token).status_code == 200
    clock["now"] = NOW + timedelta(minutes=61)
    assert client.post(URL, json=[late("l6", "t3")], headers=token).json()["stored"] == 1
    # t2, last seen before the window, counts as new again: t1 and t3 are in use
    again = client.post(URL, json=[late("l7", "t2")], headers=token)
    assert again.status_code == 422 and "would have 3 distinct values" in again.json()["detail"]
    assert count("SELECT count(*) FROM request_records WHERE request_id = 'l7'") == 0


def test_the_storage_task_deletes_expired_sender_rows_and_label_values(api, fresh_db_url) -> None:
    client, _, count = api
    settings = client.app.state.settings
    token = bearer(make_token(fresh_db_url, "ingest"))
    assert client.post(URL, json=[record("s1", "m1", tenant="t1"), record("s2", "m2", tenant="t2")],
                       headers=token).json()["stored"] == 2
    assert (count("SELECT count(*) FROM request_model_senders"), count("SELECT count(*) FROM request_label_values")) \
        == (2, 3)  # m1, m2; traffic_class=chat, tenant=t1, tenant=t2
    engine = make_engine(fresh_db_url)
    try:
        # past the sender window (a day), within the retention (7 days): only the sender rows go
        with Session(engine) as session, session.begin():
            run = rollup.storage(session, settings=settings, now=NOW + timedelta(days=1, seconds=1))
        assert (run.sender_rows_deleted, run.label_values_deleted, run.request_rows_deleted) == (2, 0, 0)
        assert _stored(count)[1:] == (2, 3, 0)
        # past the retention: the records and the label values unseen since go too
        with Session(engine) as session, session.begin():
            run = rollup.storage(session, settings=settings, now=NOW + timedelta(days=7, seconds=1))
        assert (run.sender_rows_deleted, run.label_values_deleted, run.request_rows_deleted) == (0, 3, 2)
        assert _stored(count)[1:] == (0, 0, 0)
    finally:
        engine.dispose()
