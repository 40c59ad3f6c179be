"""The API against its own OpenAPI document, with schemathesis: generated requests (valid and invalid ones,
a bounded number per operation, a fixed seed) against the real app served by uvicorn on a real migrated
Postgres holding a few hours of data, as an admin. No answer may be a server error, and every answer must
match what the document says (its status code is documented, its body and content type match the schema)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from backend.api.app import create_app
from backend.api.auth import create_token
from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker, session_scope
from tests.dashboard.seeding import seed_demo
from tests.support import db as dbsupport
from tests.support.procs import Proc, free_port, wait_for_http
from tests.support.stack import env_for

ROOT = Path(__file__).resolve().parents[2]
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance]
# operations whose side effect would end the run's own access or send real traffic
SKIP = {("DELETE", "/api/v1/tokens/{token_id}")}


@pytest.fixture(scope="module")
def api(pg_admin_url: str, pg_template: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    from datetime import UTC, datetime

    name, url = dbsupport.clone(pg_admin_url, pg_template)
    seed_demo(url, hours=3)
    engine = make_engine(url)
    with session_scope(make_sessionmaker(engine)) as session:
        _, token = create_token(session, name="schemathesis", role="admin", by=None, now=datetime.now(UTC))
    engine.dispose()
    port = free_port()
    log = tmp_path_factory.mktemp("schemathesis") / "api.log"
    proc = Proc("api", [sys.executable, "-m", "backend.cli", "api", "--host", "127.0.0.1", "--port", str(port)],
                log, env=env_for({"database_url": url, "api_access_log": False}), cwd=ROOT).start()
    try:
        wait_for_http(f"http://127.0.0.1:{port}/api/v1/health", timeout=60, proc=proc)
        yield f"http://127.0.0.1:{port}", token
    finally:
        proc.stop()
        dbsupport.drop_database(pg_admin_url, name)


# the document the served app publishes (the same create_app; checked equal below)
schema = schemathesis.openapi.from_dict(create_app(Settings(_env_file=None)).openapi())


@schema.parametrize()
@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
def test_the_api_keeps_its_openapi_contract(case, api: tuple[str, str]) -> None:
    if (case.method.upper(), case.path) in SKIP:
        pytest.skip("would revoke the run's own token")
    base, token = api
    case.call_and_validate(base_url=base, headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)


def test_the_served_document_is_the_one_tested(api: tuple[str, str]) -> None:
    import httpx

    base, _ = api
    assert httpx.get(f"{base}/openapi.json", timeout=30).json() == create_app(Settings(_env_file=None)).openapi()
