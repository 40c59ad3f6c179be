"""Who may read: a viewer token by default; with anonymous_read, anyone on the aggregate endpoints but never on
the per-request ones (request ids, tenant labels), the alerting ones or the token list. A request with a
body is refused from its headers before one byte of the body is read."""

from __future__ import annotations

import socket
from datetime import datetime
from pathlib import Path

import anyio
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.api.test_admission import _serve
from tests.factories import make_pool
from tests.support.auth import app_on_session, bearer, make_token, token_in
from tests.support.deadline import deadline

AGGREGATE = ["/api/v1/pools", "/api/v1/fleet?window=1h", "/api/v1/summary?model=m1&window=1h",
             "/api/v1/capacity/fleet?window=1h", "/api/v1/reports/weekly", "/metrics"]
PER_REQUEST = ["/api/v1/requests/lowest?model=m1&format=csv", "/api/v1/requests/lowest?model=m1",
               "/api/v1/requests/acceptance?model=m1", "/api/v1/requests/reconciliation?model=m1"]
ALWAYS_TOKEN = ["/api/v1/alerts", "/api/v1/silences", "/api/v1/tokens", "/api/v1/whoami"]


def _app(db: Session, now: datetime, **settings) -> TestClient:
    return app_on_session(db, now, peer="127.0.0.1", **settings)  # loopback: a trusted proxy in trusted-header mode


@pytest.fixture
def seeded(db: Session, now: datetime) -> dict[str, dict[str, str]]:
    make_pool(db, model_name="m1", traffic_class="chat", spec_mode="per-request", origin="requests")
    return {role: bearer(token_in(db, role, now=now)) for role in ("ingest", "viewer", "operator", "admin")}


def test_reads_need_a_viewer_token_by_default(db, now, seeded) -> None:
    client = _app(db, now)
    assert client.app.state.settings.anonymous_read is False  # the default
    for path in AGGREGATE + PER_REQUEST + ALWAYS_TOKEN:
        r = client.get(path)
        assert r.status_code == 401, (path, r.status_code, r.text)
        assert r.headers["www-authenticate"] == "Bearer" and r.json()["detail"] == "missing bearer token"
        bad = client.get(path, headers={"Authorization": "Bearer sw_not-a-token"})
        assert bad.status_code == 401 and bad.json()["detail"] == "invalid or revoked token"
    for path in AGGREGATE + PER_REQUEST:
        assert client.get(path, headers=seeded["viewer"]).status_code == 200, path
        r = client.get(path, headers=seeded["ingest"])  # an ingest token reads nothing
        assert r.status_code == 403 and "requires role viewer (you are ingest)" in r.json()["detail"], path
    csv = client.get(PER_REQUEST[0], headers=seeded["viewer"])
    assert csv.text.startswith("request_id,traffic_class,labels")
    # liveness and readiness stay open (readiness is covered by tests/api/test_health.py)
    assert client.get("/api/v1/health").json() == {"status": "ok"}


def test_anonymous_read_opens_the_aggregates_only(db, now, seeded) -> None:
    client = _app(db, now, anonymous_read=True)
    for path in AGGREGATE:
        assert client.get(path).status_code == 200, path
    for path in PER_REQUEST + ALWAYS_TOKEN:
        r = client.get(path)
        assert r.status_code == 401 and r.json()["detail"] == "missing bearer token", path
    # a presented credential is still checked: a bad one is not read as anonymous
    assert client.get("/api/v1/fleet?window=1h", headers={"Authorization": "Bearer nope"}).status_code == 401
    # anonymous may use the calculators (aggregate) but change nothing
    assert client.post("/api/v1/calc/speedup", json={"alpha": 0.6, "k": 3, "overhead": 0.1}).status_code == 200
    r = client.post("/api/v1/silences", json={"matchers": {"model": "m1"}, "reason": "x", "duration_seconds": 60})
    assert r.status_code == 401


def test_trusted_header_mode_reads_need_the_proxys_user(db, now, seeded) -> None:
    client = _app(db, now, auth_mode="trusted-header")
    assert client.get("/api/v1/fleet?window=1h").status_code == 401
    assert client.get("/api/v1/fleet?window=1h", headers={"X-Forwarded-User": "ana"}).status_code == 200
    # from a peer that is not a trusted proxy, the header counts for nothing
    outside = TestClient(client.app, client=("10.9.9.9", 50000))
    r = outside.get("/api/v1/requests/lowest?model=m1", headers={"X-Forwarded-User": "ana"})
    assert r.status_code == 401 and "trusted only from the proxies" in r.json()["detail"]


def test_the_openapi_document_says_401_on_reads_and_not_on_health(db, now) -> None:
    paths = _app(db, now).app.openapi()["paths"]
    assert "401" in paths["/api/v1/fleet"]["get"]["responses"]
    assert "401" in paths["/api/v1/requests/lowest"]["get"]["responses"]
    assert "401" in paths["/metrics"]["get"]["responses"]
    assert "401" not in paths["/api/v1/health"]["get"]["responses"]


def _receive_counter(body: bytes):
    """An ASGI receive that hands out `body` in 64 KiB chunks and counts what it handed out."""
    state = {"sent": 0, "calls": 0}

    async def receive() -> dict:
        state["calls"] += 1
        chunk = body[state["sent"]:state["sent"] + 65536]
        state["sent"] += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": state["sent"] < len(body)}

    return receive, state


def _post(app, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
    receive, state = _receive_counter(body)
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": raw,
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}
    anyio.run(app, scope, receive, send)
    return sent[0]["status"], state


@pytest.mark.parametrize("who,status", [(None, 401), ("bogus", 401), ("viewer", 403), ("operator", 403)])
def test_a_refused_post_reads_none_of_its_body(db, now, seeded, who, status) -> None:
    app = _app(db, now).app
    headers = {} if who is None else {"Authorization": "Bearer sw_bogus"} if who == "bogus" else seeded[who]
    body = b"[" + b" " * (8 * 1024 * 1024) + b"]"
    code, state = _post(app, "/api/v1/requests", body, headers)
    assert (code, state["sent"], state["calls"]) == (status, 0, 0)
    # the same for the other endpoints with a body (an admin's; under the general body limit)
    code, state = _post(app, "/api/v1/channels", b"{" + b" " * 200_000 + b"}", headers)
    assert (code, state["sent"]) == (status, 0)


def test_an_allowed_post_reads_its_body(db, now, seeded) -> None:
    app = _app(db, now).app
    code, state = _post(app, "/api/v1/requests", b"[]", seeded["ingest"])
    assert (code, state["sent"]) == (200, 2)


def test_the_server_answers_401_while_the_client_still_has_megabytes_to_send(fresh_db_url: str,
                                                                             tmp_path: Path) -> None:
    """A real server: an anonymous POST declaring 14 MiB gets its 401 after the headers alone."""
    proc, base = _serve(fresh_db_url, tmp_path)
    try:
        host, port = base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=deadline(60)) as sock:
            sock.sendall(b"POST /api/v1/requests HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 14680064\r\n\r\n[")  # 1 byte of the 14 MiB declared
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(65536)
                assert chunk, answer
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 401 "), answer[:200]
        token = make_token(fresh_db_url, "ingest")
        import httpx

        ok = httpx.post(f"{base}/api/v1/requests", content=b"[]", headers=bearer(token), timeout=deadline(60))
        assert ok.status_code == 200 and ok.json()["received"] == 0
    finally:
        proc.stop()
