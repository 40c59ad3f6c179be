"""The request session dependency (backend.api.deps.get_session) on a real database: the transaction
boundary of every endpoint. It commits on success, rolls back on any error, and always gives its
connection back to the pool, a failed request included."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import APIRouter, HTTPException
from fastapi.testclient import TestClient
from sqlalchemy import text

from backend.api.app import create_app
from backend.api.deps import SessionDep, SettingsDep
from backend.config import Settings

router = APIRouter()


@router.post("/_t/add/{name}")
def add(name: str, session: SessionDep, settings: SettingsDep, fail: bool = False) -> dict:
    session.execute(text("INSERT INTO pools (model_name, traffic_class, spec_mode, first_seen, last_seen) "
                         "VALUES (:m, 'chat', 'eagle3', now(), now())"), {"m": name})
    if fail:
        raise HTTPException(status_code=409, detail="refused after the write")
    return {"baseline_mode": settings.baseline_mode}


@router.post("/_t/deferred")
def deferred(session: SessionDep) -> dict:
    """A write whose error only shows at COMMIT (a deferred unique constraint)."""
    session.execute(text("CREATE TEMP TABLE _t_deferred (x int UNIQUE DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP"))
    session.execute(text("INSERT INTO _t_deferred VALUES (1), (1)"))
    return {"stored": True}


@pytest.fixture
def app(fresh_db_url: str) -> Iterator:
    app = create_app(Settings(_env_file=None, database_url=fresh_db_url))
    app.include_router(router)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield app, client


def _models(app) -> list[str]:
    with app.state.engine.connect() as conn:
        return list(conn.execute(text("SELECT model_name FROM pools ORDER BY 1")).scalars())


def test_a_request_commits_on_success_and_rolls_back_on_error(app) -> None:
    app, client = app
    r = client.post("/_t/add/kept")
    assert r.status_code == 200 and r.json() == {"baseline_mode": "off"}
    assert client.post("/_t/add/dropped", params={"fail": "true"}).status_code == 409
    assert _models(app) == ["kept"]
    assert app.state.engine.pool.checkedout() == 0  # both connections back in the pool


def test_a_failed_commit_is_the_response_not_a_success_already_sent(app) -> None:
    """The session ends before the response is sent (Depends(scope="function")): a commit that fails is a
    500 to the client. With FastAPI's default scope the commit ran after a 200 had gone out."""
    app, client = app
    r = client.post("/_t/deferred")
    assert r.status_code == 500, r.text
    assert app.state.engine.pool.checkedout() == 0
