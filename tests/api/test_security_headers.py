"""Security headers on the API, no caching of answers that carry a credential, token expiry."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backend.api.auth import create_token
from backend.api.deps import get_now


@pytest.fixture
def admin(client, db, now):
    _, token = create_token(db, name="admin", role="admin", by="test", now=now)
    return {"Authorization": f"Bearer {token}"}


def test_api_answers_carry_the_security_headers(client):
    for r in (client.get("/api/v1/health"), client.get("/api/v1/fleet?window=bad"), client.get("/openapi.json")):
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["content-security-policy"].startswith("default-src 'none'")
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    docs = client.get("/docs")
    assert docs.status_code == 200 and "https://cdn.jsdelivr.net" in docs.headers["content-security-policy"]


def test_token_creation_is_not_cacheable(client, admin):
    r = client.post("/api/v1/tokens", json={"name": "ci", "role": "viewer"}, headers=admin)
    assert r.status_code == 201 and r.json()["token"].startswith("sw_")
    assert r.headers["cache-control"] == "no-store"
    assert client.get("/api/v1/tokens", headers=admin).headers["cache-control"] == "no-store"
    assert "no-store" not in client.get("/api/v1/health").headers.get("cache-control", "")


def test_tokens_expire(client, admin, now):
    past = (now - timedelta(seconds=1)).isoformat()
    r = client.post("/api/v1/tokens", json={"name": "old", "role": "viewer", "expires_at": past}, headers=admin)
    assert r.status_code == 422 and "future" in r.json()["detail"]
    naive = (now + timedelta(hours=1)).replace(tzinfo=None).isoformat()
    assert client.post("/api/v1/tokens", json={"name": "n", "role": "viewer", "expires_at": naive},
                       headers=admin).status_code == 422
    soon = (now + timedelta(hours=1)).isoformat()
    r = client.post("/api/v1/tokens", json={"name": "ci", "role": "viewer", "expires_at": soon}, headers=admin)
    assert r.status_code == 201, r.text
    assert r.json()["expires_at"].startswith((now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"))
    mine = {"Authorization": f"Bearer {r.json()['token']}"}
    assert client.get("/api/v1/whoami", headers=mine).status_code == 200
    client.app.dependency_overrides[get_now] = lambda: now + timedelta(hours=1)
    late = client.get("/api/v1/whoami", headers=mine)
    assert late.status_code == 401 and late.json()["detail"] == "token expired"
    assert client.get("/api/v1/whoami", headers=admin).status_code == 200  # no expiry: still valid
