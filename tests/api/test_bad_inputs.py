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
    ("window=1h&end=0001-01-01", "between 1970-01-01 and 2200-01-01"),
    ("end=9999-12-31T23:59:59", "between 1970-01-01 and 2200-01-01"),
    ("start=%EF%BC%91%EF%BC%92%EF%BC%93%EF%BC%94-01-01&end=2026-01-01", "expected an ISO-8601 time"),
    ("start=99999999999999999999&end=2026-01-01", "expected an ISO-8601 time"),
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


def test_a_nul_byte_in_a_name_is_422(client, db):
    make_pool(db)
    r = client.get("/api/v1/summary?model=llama%00-70b")
    assert r.status_code in (404, 422), r.text  # no such model either way; never a 500
    r = client.get("/api/v1/annotations?model=a%00b")
    assert r.status_code in (404, 422), r.text


def test_annotations_of_an_unknown_model_is_404_with_the_known_ones(client, db):
    make_pool(db, model_name="llama-70b")
    r = client.get("/api/v1/annotations?model=nope")
    assert r.status_code == 404, r.text
    assert r.json()["known_models"] == ["llama-70b"]
    assert client.get("/api/v1/annotations?model=llama-70b").status_code == 200


@pytest.mark.parametrize("path", ["/api/v1/tokens/9223372036854775808", "/api/v1/channels/99999999999999999999999",
                                  "/api/v1/tokens/0"])
def test_ids_beyond_bigint_are_422(client, admin, path):
    r = client.delete(path, headers=admin)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["path", path.rsplit("/", 2)[1][:-1] + "_id"]


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
