"""The API against its own OpenAPI document, with schemathesis: generated requests (valid and invalid ones,
a bounded number per operation, a fixed seed) against the real app served by uvicorn on a real migrated
Postgres holding a few hours of data, as an admin, for every operation of the document. No answer may be a
server error; every answer must match what the document says (its status code is documented, its body,
headers and content type match the schema); and the document must be as strict as the validation:

- what the document allows is accepted (schemathesis' positive_data_acceptance), unless the refusal is one
  a JSON schema cannot state: a 422 saying why in a sentence (an unknown name, end before start, a time
  that does not exist or lies outside 1970..2200, an `expires_at` in the past, an infeasible input) or a
  validator's own `value_error`; a refusal of a form the schema could have stated (a pattern, a length, a
  bound, a type, a NUL character) fails (`no_refusal_the_schema_could_state`);
- what the document refuses is refused (negative_data_rejection);
- a method a path does not have is a 405 with `Allow` (unsupported_method, in the coverage phase).

A separate test validates the document itself with openapi-spec-validator (every $ref resolves)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)
from schemathesis.config import SchemathesisConfig

from backend.api.app import create_app
from backend.api.auth import create_token
from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker, session_scope
from tests.dashboard.seeding import seed_demo
from tests.support import db as dbsupport
from tests.support.procs import Proc, free_port, wait_for_http
from tests.support.stack import env_for

ROOT = Path(__file__).resolve().parents[2]
# refusals of a schema-valid request that no JSON schema can state: a validator's own check
SEMANTIC_ERROR_TYPES = {"value_error", "assertion_error"}
# the sentences of refusals for a form the document states (a pattern, an enum, no NUL): never to a request
# the document allows
FORM_REFUSALS = re.compile(
    r"expected a duration|expected an RFC 3339 time|expected an ISO week|^q must be comma-separated"
    r"|^\w+ must be one of .* \(got |not of the documented form|^invalid value: text with a NUL character")


def no_refusal_the_schema_could_state(ctx, response, case) -> None:
    """A request the document allows is never refused for its form: a 422 to it must be one a schema cannot
    state (module docstring). Requests generated to break the document are negative_data_rejection's."""
    if case.meta is None or not case.meta.generation.mode.is_positive or response.status_code not in (400, 422):
        return
    detail = response.json().get("detail")
    assert response.status_code == 422, f"schema-valid request answered {response.status_code}: {detail}"
    if isinstance(detail, list):
        formal = sorted({e.get("type") for e in detail} - SEMANTIC_ERROR_TYPES)
        assert not formal, f"the document allows what validation refuses ({', '.join(map(str, formal))}): {detail}"
    else:
        assert not FORM_REFUSALS.search(str(detail)), f"the document allows a form the API refuses: {detail}"


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance, positive_data_acceptance, negative_data_rejection, unsupported_method,
          no_refusal_the_schema_could_state]
MAX_EXAMPLES = 10  # per operation and generation mode: ~1-2 min for the whole document on 2 cores
CONFIG = SchemathesisConfig.from_dict({
    "seed": 45,
    # the run sends its own token (with-security-parameters off: the header is not generated nor left out)
    "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "deterministic": True,
                   "with-security-parameters": False},
    "phases": {"examples": {"enabled": False}, "coverage": {"enabled": True}, "fuzzing": {"enabled": True},
               "stateful": {"enabled": False}},
    # 422: see no_refusal_the_schema_could_state, which holds these 422s to what no schema can say
    "checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", "401", "403", "404", "409", "422"]}},
})
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
DOCUMENT = create_app(Settings(_env_file=None)).openapi()
schemathesis.serializer.alias("application/x-ndjson", "text/plain")  # POST /requests: NDJSON is text
schema = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
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


def test_the_document_is_valid_openapi_and_every_reference_resolves() -> None:
    """openapi-spec-validator (the OpenAPI 3.1 meta-schema, and every $ref followed) on the document; and a
    walk of its references, so that a dangling one is named."""
    import json

    from openapi_spec_validator import validate

    validate(DOCUMENT)
    names = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(DOCUMENT)))
    assert names and names <= set(DOCUMENT["components"]["schemas"]), names - set(DOCUMENT["components"]["schemas"])
    assert {"RulesCheckRead", "RulesErrorRead", "ErrorRead", "HTTPValidationError"} <= names


def test_operations_needing_a_caller_declare_the_bearer_scheme() -> None:
    assert DOCUMENT["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": DOCUMENT["components"]["securitySchemes"]["bearer"][
            "description"]}
    for path, operations in DOCUMENT["paths"].items():
        for method, op in operations.items():
            assert ("401" in op["responses"]) == ("security" in op), (method, path)
    assert DOCUMENT["paths"]["/api/v1/tokens"]["post"]["security"] == [{"bearer": []}]


def test_every_string_input_is_declared_free_of_nul() -> None:
    """Each string a parameter or request body takes has a pattern (NO_NUL_PATTERN or a stricter form) or is
    one of an enum: nothing the document allows holds a NUL character, which the API refuses everywhere (but
    in the per-request records, which POST /requests checks one by one: a record with a NUL is refused alone)."""
    from backend.api.app import RAW_BODIES
    from backend.schemas.common import NO_NUL_PATTERN

    schemas = DOCUMENT["components"]["schemas"]
    free: list[str] = []

    def walk(node, where: str, seen: set[str]) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, where, seen)
        elif isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/components/schemas/"):
                name = ref.rsplit("/", 1)[1]
                if name not in seen:
                    walk(schemas[name], f"{where}>{name}", seen | {name})
                return
            if node.get("type") == "string" and not {"pattern", "enum", "const", "format"} & node.keys():
                free.append(where)
            for key, sub in node.items():
                if key in ("properties",):
                    for prop, s in sub.items():
                        walk(s, f"{where}.{prop}", seen)
                elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf", "propertyNames"):
                    walk(sub, where, seen)

    for path, operations in DOCUMENT["paths"].items():
        for method, op in operations.items():
            for parameter in op.get("parameters", []):
                walk(parameter["schema"], f"{method} {path} {parameter['name']}", set())
            for media in (op.get("requestBody") or {}).get("content", {}).values():
                if path not in RAW_BODIES:
                    walk(media["schema"], f"{method} {path} body", set())
    assert not free, free
    assert DOCUMENT["paths"]["/api/v1/summary"]["get"]["parameters"][0]["schema"]["pattern"] == NO_NUL_PATTERN
