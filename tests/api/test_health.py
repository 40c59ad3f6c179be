from __future__ import annotations

from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.config import Settings


def test_health(client):
    assert client.get("/api/v1/health").json() == {"status": "ok"}


def test_ready_on_a_migrated_database(fresh_db_url):
    with TestClient(create_app(Settings(_env_file=None, database_url=fresh_db_url))) as c:
        r = c.get("/api/v1/ready")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ready" and body["schema_state"] == "up to date" and body["migrations_pending"] == 0
    assert not any(k.startswith("migration_") for k in body), body  # no migration ids for users


def test_ready_says_what_a_schema_behind_needs_in_words(fresh_db_url):
    """A database one migration behind: 503, how many migrations `specwatch migrate` applies, no ids."""
    from alembic import command
    from alembic.script import ScriptDirectory

    from backend.schema_version import alembic_config

    cfg = alembic_config(fresh_db_url)
    revisions = [rev.revision for rev in ScriptDirectory.from_config(cfg).walk_revisions()]
    command.downgrade(cfg, "-1")
    try:
        with TestClient(create_app(Settings(_env_file=None, database_url=fresh_db_url))) as c:
            r = c.get("/api/v1/ready")
    finally:
        command.upgrade(cfg, "head")
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["schema_state"] == "needs migrate" and body["migrations_pending"] == 1, body
    assert "run `specwatch migrate`" in body["detail"]
    assert not any(rev in r.text for rev in revisions), r.text


def test_ready_is_503_when_the_database_is_unreachable():
    url = "postgresql+psycopg://postgres@127.0.0.1:1/specwatch?connect_timeout=1"
    with TestClient(create_app(Settings(_env_file=None, database_url=url))) as c:
        r = c.get("/api/v1/ready")
        assert c.get("/api/v1/health").status_code == 200
    assert r.status_code == 503
    assert r.json()["database"] is False and "unreachable" in r.json()["detail"]


def test_openapi_documents_every_route(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in ("/api/v1/pools", "/api/v1/summary", "/api/v1/acceptance", "/api/v1/fleet",
                 "/api/v1/calc/speedup", "/api/v1/calc/mix", "/api/v1/ready", "/metrics"):
        assert path in paths
    assert paths["/api/v1/summary"]["get"]["summary"]
    assert "SummaryRead" in spec["components"]["schemas"]
