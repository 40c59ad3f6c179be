"""Inputs that used to be a 500 (or accepted nonsense) are a 422 (or 404) with the reason, and the body has
the documented shape: `detail` is a list of {loc, msg, type} for a field FastAPI validated, one sentence
otherwise."""

from __future__ import annotations

import pytest

from backend.api.auth import create_token
from tests.factories import make_pool


@pytest.fixture
def admin(client, db, now):
    _, token = create_token(db, name="admin", role="admin", by="test", now=now)
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("query,reason", [
    ("window=%C2%B2", "expected a duration"),  # superscript two: a digit to str.isdigit, not to int()
    ("window=%D9%A3h", "expected a duration"),  # Arabic-Indic three
    ("window=99999999999999999999d", "expected a duration"),
    ("window=9999999999w", "longer than 100 years"),
    ("window=1h&end=0001-01-01T00:00:00Z", "between 1970-01-01 and 2200-01-01"),
    ("window=1h&end=2026-01-01", "expected an RFC 3339 time"),  # a date alone is not a time
    ("window=1h&end=2026-01-01%2012:00", "expected an RFC 3339 time"),
    ("window=%205m", "expected a duration"),
    ("end=9999-12-31T23:59:59", "between 1970-01-01 and 2200-01-01"),
    ("start=%EF%BC%91%EF%BC%92%EF%BC%93%EF%BC%94-01-01&end=2026-01-01", "expected an RFC 3339 time"),
    ("start=99999999999999999999&end=2026-01-01", "expected an RFC 3339 time"),
])
def test_bad_windows_are_422(client, query, reason):
    r = client.get(f"/api/v1/fleet?{query}")
    assert r.status_code == 422, r.text
    assert reason in r.json()["detail"]


@pytest.mark.parametrize("week,reason", [
    ("9999-W52", "the year must be in 1971..2199"),
    ("0001-W01", "the year must be in 1971..2199"),
    ("%EF%BC%91%EF%BC%92%EF%BC%93%EF%BC%94-W01", "expected an ISO week"),  # fullwidth digits
    ("2026-W54", "has no week 54"),
])
def test_bad_weeks_are_422(client, week, reason):
    for path in ("/api/v1/reports/weekly", "/api/v1/reports/weekly/export"):
        r = client.get(f"{path}?week={week}")
        assert r.status_code == 422, r.text
        assert reason in r.json()["detail"]


def test_a_nul_character_anywhere_in_the_input_is_422(client, db):
    """The document declares every string free of NUL (NO_NUL_PATTERN); the API refuses one in a query,
    a path or a JSON body alike, whether or not the value would reach the database."""
    make_pool(db)
    for r in (client.get("/api/v1/summary?model=llama%00-70b"), client.get("/api/v1/annotations?model=a%00b"),
              client.get("/api/v1/models/a%00b/replicas"),
              client.post("/api/v1/calc/mix", content=b'{"k": 3, "classes": [{"name": "a\\u0000", "alpha": 0.5, '
                                                      b'"share": 1}]}', headers={"Content-Type": "application/json"})):
        assert r.status_code == 422, r.text
        assert r.json() == {"detail": "invalid value: text with a NUL character", "code": "invalid_parameter"}
    # an escaped backslash before "u0000" is text, not a NUL
    r = client.post("/api/v1/calc/mix", content=b'{"k": 3, "classes": [{"name": "a\\\\u0000", "alpha": 0.5, '
                                                b'"share": 1}]}', headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert r.json()["inputs"]["classes"][0]["name"] == "a\\u0000"


def test_a_nul_escape_split_across_body_chunks_is_found():
    """RefuseNul reads the body whole: an escape cut between two chunks is still a NUL, and an escaped
    backslash cut from its "u0000" is still text; the app then reads the body as sent."""
    import anyio

    from backend.api.limits import RefuseNul

    bs = b"\\"  # one backslash

    async def status(chunks: list[bytes]) -> int:
        sent: list[dict] = []
        messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

        async def app(scope, receive, send):
            read = [await receive()]
            while read[-1].get("more_body"):
                read.append(await receive())
            assert b"".join(m["body"] for m in read) == b"".join(chunks)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        async def receive():
            return messages.pop(0)

        async def send(message):
            sent.append(message)

        await RefuseNul(app)({"type": "http", "method": "POST", "path": "/x", "query_string": b""}, receive, send)
        return sent[0]["status"]

    assert anyio.run(status, [b'{"a": "x' + bs + b"u00", b'00"}']) == 422
    assert anyio.run(status, [b'{"a": "x' + bs, b'u0000"}']) == 422
    assert anyio.run(status, [b'{"a": "x' + bs + bs + bs, b'u0000"}']) == 422
    assert anyio.run(status, [b'{"a": "x' + bs + bs, b'u0000"}']) == 200
    assert anyio.run(status, [b'{"a": "x' + bs, bs + b'u0000"}']) == 200
    assert anyio.run(status, [b'{"a": "x', b"u0000", b'"}']) == 200


def test_annotations_of_an_unknown_model_is_404_with_the_known_ones(client, db):
    make_pool(db, model_name="llama-70b")
    r = client.get("/api/v1/annotations?model=nope")
    assert r.status_code == 404, r.text
    assert r.json()["known_models"] == ["llama-70b"]
    assert client.get("/api/v1/annotations?model=llama-70b").status_code == 200


@pytest.mark.parametrize("path", ["/api/v1/tokens/9223372036854775808", "/api/v1/channels/99999999999999999999999",
                                  "/api/v1/tokens/0", "/api/v1/tokens/2147483648", "/api/v1/channels/2147483648",
                                  "/api/v1/silences/2147483648"])
def test_ids_beyond_their_column_are_422(client, admin, path):
    """Silences, channels and tokens are keyed by Postgres integers: an id past 2^31 - 1 names no row, and the
    document says so (maximum), as the validation does, before any query."""
    r = client.delete(path, headers=admin)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["path", path.rsplit("/", 2)[1][:-1] + "_id"]
    assert r.json()["detail"][0]["type"] in ("less_than_equal", "greater_than_equal")


def test_alert_history_id_beyond_bigint_is_422(client, admin):
    r = client.get("/api/v1/alerts/history?alert_id=9223372036854775808", headers=admin)
    assert r.status_code == 422, r.text


@pytest.mark.parametrize("url", ["http://[::1", "http://example.com:99999/x", "https://", "http://exa mple.com/",
                                 "http://ex\u00e4mple.com/", "ftp://example.com/"])
def test_malformed_webhook_urls_are_422(client, admin, url):
    r = client.post("/api/v1/channels", headers=admin, json={"name": "c", "kind": "slack", "url": url})
    assert r.status_code == 422, r.text
    assert "url" in r.json()["detail"]


def test_error_bodies_match_the_documented_schemas(client):
    """A field FastAPI validated: `detail` is a list of {loc, msg, type}; a check of ours: one sentence.
    Both shapes are what OpenAPI documents for the 422 of every operation."""
    listed = client.post("/api/v1/calc/speedup", json={"k": 0, "alpha": 0.5, "overhead": 0.1}).json()
    assert listed["detail"][0]["loc"] == ["body", "k"] and listed["detail"][0]["type"] == "greater_than_equal"
    sentence = client.get("/api/v1/fleet?window=abc").json()
    assert isinstance(sentence["detail"], str)
    doc = client.get("/openapi.json").json()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if "422" in op["responses"]:
                refs = [s["$ref"] for s in op["responses"]["422"]["content"]["application/json"]["schema"]["anyOf"]]
                assert {"#/components/schemas/HTTPValidationError", "#/components/schemas/ErrorRead"} <= set(refs), \
                    (method, path)
            if path != "/api/v1/health":
                assert "503" in op["responses"], (method, path)
