"""GET /api/v1/compare and /config-changes: hand-computed known answers (tests/support/compare_seed.py),
bad inputs refused with a clear error, CSV export, and annotations written by operators only."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.support.auth import app_on_session
from tests.support.compare_seed import ALPHA_CHANGE, MODEL, SPEEDUP_CHANGE, seed


@pytest.fixture
def seeded(db, now):
    t0 = (now - timedelta(minutes=30)).replace(second=0, microsecond=0)
    seed(db, t0)
    return t0


def _m(scope, name):
    return next(m for m in scope["metrics"] if m["metric"] == name)


def test_side_by_side_known_answers(db, now, seeded):
    client = app_on_session(db, now, token_role="viewer")
    r = client.get("/api/v1/compare", params={"model": MODEL, "a": "eagle3", "b": "eagle3.1", "range": "1h"})
    assert r.status_code == 200, r.text
    body = r.json()
    chat = next(s for s in body["scopes"] if s["scope"] == "chat")
    a, sp = _m(chat, "alpha"), _m(chat, "measured_speedup")
    assert (a["a"], a["b"]) == (pytest.approx(0.5), pytest.approx(0.6))
    assert (a["change"], a["change_low"], a["change_high"]) == tuple(pytest.approx(x, rel=1e-9) for x in ALPHA_CHANGE)
    assert (sp["change"], sp["change_low"], sp["change_high"]) == tuple(pytest.approx(x, rel=1e-9) for x in SPEEDUP_CHANGE)
    assert a["verdict"] == sp["verdict"] == "better"
    assert chat["bands"] == ["1-8"]
    assert body["sentence"] == ("EAGLE-3.1 vs EAGLE-3 on llama-70b: speedup +25 % (12–40 %) on chat; "
                                "saving per week n/a (no GPU price or replica count)")
    csv_text = client.get("/api/v1/compare", params={"model": MODEL, "a": "eagle3", "b": "eagle3.1", "range": "1h",
                                                     "format": "csv"})
    assert csv_text.headers["content-type"].startswith("text/csv")
    row = next(line for line in csv_text.text.splitlines() if ",chat,alpha," in line)
    assert row.split(",")[6:10] == ["0.5", "0.6", "0.2", "0.151032"]


@pytest.mark.parametrize(("params", "status", "text"), [
    ({"model": "nope", "a": "eagle3", "b": "eagle3.1"}, 404, "unknown model"),
    ({"model": MODEL, "a": "eagle3", "b": "eagle9"}, 404, "no spec mode 'eagle9'"),
    ({"model": MODEL, "a": "eagle3", "b": "eagle3"}, 422, "the same spec mode"),
    ({"model": MODEL, "a": "eagle3"}, 422, "give a= and b="),
    ({"model": MODEL, "a": "eagle3", "b": "eagle3.1", "at": "2026-11-30T11:00:00Z"}, 422, "with at="),
    ({"model": MODEL, "at": "2030-01-01T00:00:00Z"}, 422, "must be in the past"),
    ({"model": MODEL, "a": "eagle3", "b": "eagle3.1", "class": "code"}, 404, "no spec pool of class 'code'"),
    ({"model": MODEL, "a": "eagle3", "b": "eagle3.1", "range": "banana"}, 422, "expected a duration"),
])
def test_bad_requests_are_refused(db, now, seeded, params, status, text):
    client = app_on_session(db, now, token_role="viewer")
    r = client.get("/api/v1/compare", params=params)
    assert r.status_code == status, r.text
    assert text in r.text


def test_reads_need_a_token(db, now, seeded):
    assert app_on_session(db, now).get("/api/v1/compare", params={"model": MODEL}).status_code == 401


def test_annotated_change_labels_a_before_after(db, now, seeded):
    at = seeded + timedelta(minutes=2)
    body = {"model": MODEL, "traffic_class": "chat", "spec_mode": "eagle3", "at": at.isoformat(),
            "field": "num_spec_tokens", "old": "4", "new": "3", "note": "K 4 -> 3"}
    assert app_on_session(db, now, token_role="viewer").post("/api/v1/config-changes", json=body).status_code == 403
    op = app_on_session(db, now, token_role="operator")
    r = op.post("/api/v1/config-changes", json=body)
    assert r.status_code == 201, r.text
    bad = op.post("/api/v1/config-changes", json={**body, "field": "colour"})
    assert bad.status_code == 422
    listed = op.get("/api/v1/config-changes", params={"model": MODEL, "range": "1d"}).json()
    assert [(c["field"], c["old"], c["new"], c["source"]) for c in listed] == [("num_spec_tokens", "4", "3", "annotation")]
    r = op.get("/api/v1/compare", params={"model": MODEL, "a": "eagle3", "at": at.isoformat(), "range": "2m"}).json()
    assert (r["a"]["label"], r["b"]["label"]) == ("K 4", "K 3")
    assert r["mode"] == "before-after" and r["changes"][0]["note"] == "K 4 -> 3"
    chat = next(s for s in r["scopes"] if s["scope"] == "chat")
    assert _m(chat, "alpha")["verdict"] == "inconclusive"  # two buckets a side: too few time bins
    marks = op.get("/api/v1/annotations", params={"model": MODEL, "range": "2h"}).json()["annotations"]
    assert [(m["kind"], m["text"]) for m in marks] == [("config_change", "chat/eagle3: K 4 -> 3")]
    assert marks[0]["t"].startswith(at.strftime("%Y-%m-%dT%H:%M"))
