"""Access control (401/403 change nothing), channels never show their URL, silences, acks, rules."""

from __future__ import annotations

import logging
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.api.auth import create_token
from backend.config import Settings
from backend.db.models_alerts import AlertStateRow, Channel, Silence
from tests.alerts.conftest import SLACK_URL, rules
from tests.support.auth import app_on_session

SECRET_PARTS = ("T0SECRET", "B0SECRET", "sEcReTsEcReT")


def make_client(db: Session, now: datetime, peer: str = "127.0.0.1", **settings) -> TestClient:
    """The app on the test's session and clock, called from `peer` (loopback: a trusted proxy)."""
    return app_on_session(db, now, peer=peer, **settings)


@pytest.fixture
def api(db, now):
    client = make_client(db, now)
    tokens = {role: create_token(db, name=f"{role}-user", role=role, by="test", now=now)[1]
              for role in ("viewer", "operator", "admin")}
    return client, {role: {"Authorization": f"Bearer {t}"} for role, t in tokens.items()}


def count(db, model) -> int:
    return db.scalar(select(func.count()).select_from(model))


SILENCE = {"matchers": {"model": "llama-*"}, "reason": "maintenance", "duration_seconds": 3600}
CHANNEL = {"name": "slack-main", "kind": "slack", "url": SLACK_URL}


@pytest.mark.parametrize("method,path,body", [
    ("get", "/api/v1/alerts", None), ("get", "/api/v1/alerts/history", None), ("get", "/api/v1/silences", None),
    ("post", "/api/v1/silences", SILENCE), ("post", "/api/v1/channels", CHANNEL), ("get", "/api/v1/tokens", None),
    ("put", "/api/v1/alerts/rules", rules()),
])
def test_no_or_bad_token_is_401(api, db, method, path, body):
    client, _ = api
    before = (count(db, Silence), count(db, Channel))
    for headers in ({}, {"Authorization": "Bearer sw_wrong"}, {"Authorization": "Basic abc"}):
        r = getattr(client, method)(path, headers=headers, **({"json": body} if body is not None else {}))
        assert r.status_code == 401, (path, headers, r.text)
        assert r.headers["www-authenticate"] == "Bearer"
    assert (count(db, Silence), count(db, Channel)) == before


@pytest.mark.parametrize("role,method,path,body", [
    ("viewer", "post", "/api/v1/silences", SILENCE),
    ("viewer", "post", "/api/v1/alerts/1/ack", {"comment": "x"}),
    ("operator", "post", "/api/v1/channels", CHANNEL),
    ("operator", "put", "/api/v1/alerts/rules", rules()),
    ("operator", "post", "/api/v1/tokens", {"name": "x", "role": "admin"}),
    ("viewer", "get", "/api/v1/tokens", None),
])
def test_wrong_role_is_403_and_changes_nothing(api, db, role, method, path, body):
    client, h = api
    before = (count(db, Silence), count(db, Channel))
    r = getattr(client, method)(path, headers=h[role], **({"json": body} if body is not None else {}))
    assert r.status_code == 403, r.text
    assert (count(db, Silence), count(db, Channel)) == before


def test_operator_silences_and_acks(api, db, now):
    client, h = api
    r = client.post("/api/v1/silences", json=SILENCE, headers=h["operator"])
    assert r.status_code == 201 and r.json()["created_by"] == "operator-user" and r.json()["active"]
    sid = r.json()["id"]
    assert client.get("/api/v1/silences", headers=h["viewer"]).json()[0]["id"] == sid
    r = client.delete(f"/api/v1/silences/{sid}", headers=h["operator"])
    assert r.status_code == 200 and r.json()["expired_by"] == "operator-user"
    assert client.post("/api/v1/silences", json={**SILENCE, "matchers": {"colour": "red"}},
                       headers=h["operator"]).status_code == 422
    alert = AlertStateRow(fingerprint="f" * 32, rule="alpha-low", kind="alpha_low", severity="page",
                          labels={"model": "m", "rule": "alpha-low"}, group_key="model=m", phase="firing",
                          notified_firing=True)
    db.add(alert)
    db.flush()
    r = client.post(f"/api/v1/alerts/{alert.id}/ack", json={"comment": "looking"}, headers=h["operator"])
    assert r.status_code == 201 and r.json()["by"] == "operator-user"
    [row] = client.get("/api/v1/alerts", headers=h["viewer"]).json()
    assert row["acked_by"] == "operator-user" and row["phase"] == "firing"
    assert client.post("/api/v1/alerts/999999/ack", json={}, headers=h["operator"]).status_code == 404
    # no body at all (curl -X POST): acknowledged without a comment, as the API section shows it
    r = client.post(f"/api/v1/alerts/{alert.id}/ack", headers=h["operator"])
    assert r.status_code == 201 and r.json()["by"] == "operator-user" and not r.json().get("comment"), r.text


def test_webhook_url_never_in_responses_db_or_logs(api, db, caplog):
    client, h = api
    caplog.set_level(logging.DEBUG)
    r = client.post("/api/v1/channels", json=CHANNEL, headers=h["admin"])
    assert r.status_code == 201
    cid = r.json()["id"]
    bodies = [r.text, client.get("/api/v1/channels", headers=h["viewer"]).text,
              client.patch(f"/api/v1/channels/{cid}", json={"url": SLACK_URL + "2"}, headers=h["admin"]).text,
              client.post("/api/v1/channels", json=CHANNEL, headers=h["admin"]).text]  # duplicate name: 422
    assert r.json()["redacted"] == "https://hooks.slack.com/…"
    stored = db.get(Channel, cid).secret
    for part in SECRET_PARTS:
        assert all(part not in b for b in bodies)
        assert part not in stored
        assert part not in caplog.text
    assert client.post("/api/v1/channels", json={**CHANNEL, "name": "x", "url": "ftp://x"},
                       headers=h["admin"]).status_code == 422


def test_rules_validated_with_field_errors(api):
    client, h = api
    bad = {"version": 1, "rules": [{"name": "a", "kind": "alpha_low", "for": "soon"}]}
    r = client.put("/api/v1/alerts/rules", json=bad, headers=h["admin"])
    assert r.status_code == 422
    assert "rules[0].for: must be a duration like 5m (got 'soon')" in r.json()["detail"]["errors"]
    assert client.post("/api/v1/alerts/rules/check", json=bad, headers=h["viewer"]).json()["valid"] is False
    r = client.put("/api/v1/alerts/rules", json={"yaml": "version: 1\nrules:\n  - {kind: stale_data}\n"},
                   headers=h["admin"])
    assert r.status_code == 200 and r.json()["content"]["rules"][0]["kind"] == "stale_data"
    assert client.get("/api/v1/alerts/rules", headers=h["viewer"]).json()["source"] == "api"


def test_tokens_admin_lifecycle(api):
    client, h = api
    r = client.post("/api/v1/tokens", json={"name": "bot", "role": "operator"}, headers=h["admin"])
    assert r.status_code == 201
    token, tid = r.json()["token"], r.json()["id"]
    listing = client.get("/api/v1/tokens", headers=h["admin"]).text
    assert token not in listing
    bot = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/v1/whoami", headers=bot).json() == {"name": "bot", "role": "operator"}
    assert client.delete(f"/api/v1/tokens/{tid}", headers=h["admin"]).status_code == 200
    assert client.get("/api/v1/whoami", headers=bot).status_code == 401


def test_trusted_header_mode(db, now):
    client = make_client(db, now, auth_mode="trusted-header")
    assert client.get("/api/v1/alerts").status_code == 401
    assert client.get("/api/v1/alerts", headers={"X-Forwarded-User": "ann"}).status_code == 200
    assert client.post("/api/v1/silences", json=SILENCE, headers={"X-Forwarded-User": "ann"}).status_code == 403
    r = client.post("/api/v1/silences", json=SILENCE, headers={"X-Forwarded-User": "ann", "X-Forwarded-Role": "operator"})
    assert r.status_code == 201 and r.json()["created_by"] == "ann"


def test_placeholder_secret_refused_outside_dev():
    with pytest.raises(ValueError, match="placeholder"):
        Settings(_env_file=None, environment="prod")
    Settings(_env_file=None, environment="prod", secret_key="x" * 44)
