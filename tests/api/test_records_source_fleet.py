"""A simulated fleet (the bundled scenario `per-request`: the steady fleet plus one model whose one EAGLE-3
pool serves chat and code) with its engine counters and its per-request records stored as the demo stores
them. Every surface shows that pool once: its classes through the records (labelled as such), its mixed row
the engine's exact totals, one spec mode, nowhere a "per-request" spec mode or "several spec modes"."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from pypdf import PdfReader
from sqlalchemy import text

from backend.api.app import create_app
from backend.api.deps import get_now
from backend.config import Settings
from backend.db.session import session_scope
from backend.services import alert_eval, report, report_csv
from backend.services.history import seed_history
from tests.support import db as dbsupport
from tests.support.auth import bearer, make_token
from tests.support.stack import factory_for

END = 1_796_040_000  # a Monday noon UTC: the report's week has started
SECONDS = 900
MODEL = "Qwen/Qwen3-8B"
FORBIDDEN = ("per-request\"", "'per-request'", "per-request,", "several spec modes")


def _clean(body: str) -> None:
    """No spec mode named per-request (as a JSON value, a CSV cell or in a message), no several-modes notice."""
    for bad in FORBIDDEN:
        assert bad not in body, bad
    assert ",per-request" not in body and "\"spec_mode\":\"per-request\"" not in body.replace(" ", "")


@pytest.fixture(scope="module")
def fleet(pg_admin_url: str, pg_template: str):
    name, url = dbsupport.clone(pg_admin_url, pg_template)
    s = Settings(_env_file=None, database_url=url, bucket_seconds=60, stale_after_seconds=10**9)
    factory = factory_for(url)
    summary = seed_history(factory, s, scenario="per-request", seconds=SECONDS, end=END, seed=3)
    assert summary.requests > 100
    app = create_app(s)
    app.dependency_overrides[get_now] = lambda: datetime.fromtimestamp(END, UTC)
    with TestClient(app, headers=bearer(make_token(url, "viewer"))) as client:
        yield client, factory, s
    dbsupport.drop_database(pg_admin_url, name)


def _window() -> dict:
    return {"start": datetime.fromtimestamp(END - SECONDS, UTC).isoformat(),
            "end": datetime.fromtimestamp(END, UTC).isoformat()}


def _engine_totals(factory, lo: int, hi: int) -> tuple[float, float, float]:
    with session_scope(factory) as session:
        return tuple(session.execute(text(
            "SELECT sum(b.drafts), sum(b.draft_tokens), sum(b.accepted_tokens) FROM pool_buckets b "
            "JOIN pools p ON p.id = b.pool_id WHERE p.model_name = :m AND p.origin = 'engine' "
            "AND b.bucket_start >= to_timestamp(:lo) AND b.bucket_start + interval '60 s' <= to_timestamp(:hi)"),
            {"m": MODEL, "lo": lo, "hi": hi}).one())


def test_summary_classes_through_records_mixed_is_the_engines(fleet) -> None:
    client, factory, _ = fleet
    r = client.get("/api/v1/summary", params={"model": MODEL, **_window()})
    body = r.raise_for_status().json()
    _clean(r.text)
    rows = {(c["traffic_class"], c["spec_mode"]): c for c in body["classes"]}
    assert set(rows) == {("chat", "eagle3"), ("code", "eagle3"), ("mixed", "eagle3")}
    assert rows[("chat", "eagle3")]["source"] == rows[("code", "eagle3")]["source"] == "records"
    mixed = rows[("mixed", "eagle3")]
    drafts, tokens, accepted = _engine_totals(factory, END - SECONDS, END)
    assert mixed["source"] == "engine" and mixed["volume"]["drafts"] == drafts > 0
    assert mixed["acceptance_rate"] == accepted / tokens
    # the classes' draft tokens describe the engine's (every request reported: coverage about 1; a record
    # counts whole in the bucket it finished in, the engine as it drafts), they are not added to them
    per_class = rows[("chat", "eagle3")]["volume"]["draft_tokens"] + rows[("code", "eagle3")]["volume"]["draft_tokens"]
    assert mixed["records_coverage"] == pytest.approx(per_class / tokens, abs=1e-12)
    assert 0.98 < mixed["records_coverage"] < 1.02
    assert rows[("chat", "eagle3")]["acceptance_rate"] > rows[("code", "eagle3")]["acceptance_rate"]


def test_fleet_pools_series_show_the_pool_once(fleet) -> None:
    client, _, _ = fleet
    r = client.get("/api/v1/fleet", params={"live": True, "model": MODEL, **_window()})
    _clean(r.raise_for_status().text)
    keys = sorted((x["traffic_class"], x["spec_mode"]) for x in r.json()["rows"] if x["model_name"] == MODEL)
    assert keys == [("chat", "eagle3"), ("code", "eagle3"), ("mixed", "eagle3")]
    pools = client.get("/api/v1/pools").raise_for_status()
    _clean(pools.text)
    assert {p["spec_mode"] for p in pools.json()["pools"] if p["model_name"] == MODEL} == {"eagle3"}
    # one spec mode: a series needs no spec_mode parameter
    one = client.get("/api/v1/acceptance", params={"model": MODEL, "traffic_class": "chat", **_window()})
    _clean(one.raise_for_status().text)
    mixed = client.get("/api/v1/acceptance", params={"model": MODEL, "traffic_class": "mixed", **_window()})
    assert [p["traffic_class"] for p in mixed.raise_for_status().json()["pools"]] == ["default"]
    for by, want in (("pool", ["chat", "code"]), ("model", ["mixed"])):
        bulk = client.get("/api/v1/acceptance/bulk", params={"by": by, "model": MODEL, **_window()})
        _clean(bulk.raise_for_status().text)
        assert [s["traffic_class"] for s in bulk.json()["series"]] == want


def test_report_and_csv_show_one_spec_mode(fleet) -> None:
    client, factory, s = fleet
    week = report.week_of(datetime.fromtimestamp(END, UTC), s.report_timezone)
    r = client.get("/api/v1/reports/weekly", params={"week": week, "model": MODEL})
    _clean(r.raise_for_status().text)
    m = r.json()["models"][0]
    assert m["drafters"] == []  # no drafter comparison of the pool against itself
    assert sorted(c["scope"] for c in m["classes"]) == ["chat", "code", "mixed"]
    assert {c["spec_mode"] for c in m["classes"]} == {"eagle3"}
    assert {c["scope"]: c["source"] for c in m["classes"]} == {"chat": "records", "code": "records",
                                                                "mixed": "engine"}
    export = client.get("/api/v1/reports/weekly/export", params={"week": week, "model": MODEL, "format": "csv"})
    _clean(export.raise_for_status().text)
    rows = list(csv.DictReader(io.StringIO(export.text)))
    rows = [x for x in rows if x["row"] != report_csv.ROW_CONTEXT]  # test_report_context_bands_are_the_apis
    got = [(x["row"], x["scope"], x["spec_mode"], x["source"]) for x in rows]
    assert got == [("class", "chat", "eagle3", "records"), ("class", "code", "eagle3", "records"),
                   ("mixed", "mixed", "eagle3", "engine"), ("model total", "", "", "")]
    week_rng = report.week_range(week, s.report_timezone)
    drafts, _, _ = _engine_totals(factory, int(week_rng.start.timestamp()), END)
    mixed, total = rows[2], rows[3]
    assert float(mixed["drafts"]) == float(total["drafts"]) == drafts  # the engine's totals, once
    assert 0.98 < float(mixed["records_coverage"]) < 1.02


def test_report_context_bands_are_the_apis(fleet) -> None:
    """α by context length in the weekly report (JSON, CSV, Markdown) is the API's by_context_length over the
    same week: the same bands, the same numbers, every one of them (the scenario's long code prompts give
    bands up to 131,072+)."""
    client, _, s = fleet
    week = report.week_of(datetime.fromtimestamp(END, UTC), s.report_timezone)
    rng = report.week_range(week, s.report_timezone)
    api = client.get("/api/v1/requests/acceptance", params={"model": MODEL, "start": rng.start.isoformat(),
                                                            "end": rng.end.isoformat()}).raise_for_status().json()
    want = {(k["traffic_class"], k["spec_mode"]): k["by_context_length"] for k in api["classes"]}
    assert set(want) == {("chat", "eagle3"), ("code", "eagle3")}
    assert len(want[("code", "eagle3")]) >= 5 and want[("code", "eagle3")][-1]["prompt_tokens_from"] >= 65536
    r = client.get("/api/v1/reports/weekly", params={"week": week, "model": MODEL}).raise_for_status().json()
    got = {(x["scope"], x["spec_mode"]): x["bands"] for x in r["models"][0]["by_context_length"]}
    assert got == want
    export = client.get("/api/v1/reports/weekly/export", params={"week": week, "model": MODEL, "format": "csv"})
    rows = [x for x in csv.DictReader(io.StringIO(export.raise_for_status().text)) if x["row"] == "context band"]
    assert len(rows) == sum(len(b) for b in want.values())
    for x in rows:
        b = next(b for b in want[(x["scope"], x["spec_mode"])] if b["prompt_tokens_from"] == int(x["prompt_tokens_from"]))
        assert x["prompt_tokens_to"] == ("" if b["prompt_tokens_to"] is None else str(b["prompt_tokens_to"]))
        assert (int(x["requests"]), float(x["drafts"]), float(x["draft_tokens"]), float(x["accepted_tokens"])) == (
            b["requests"], b["drafts"], b["draft_tokens"], b["accepted_tokens"])
        for key in ("draft_token_weighted_alpha", "request_weighted_alpha"):
            assert float(x[key]) == b[key]  # the same float, written in full
            lo, hi = b[f"{key}_interval"]
            assert (x[f"{key}_low"], x[f"{key}_high"]) == (("", "") if lo is None else (repr(lo), repr(hi)))
    md = client.get("/api/v1/reports/weekly/export", params={"week": week, "model": MODEL, "format": "md"}).text
    top = want[("code", "eagle3")][-1]
    iv = top["draft_token_weighted_alpha_interval"]
    assert (f"| code | eagle3 | {top['prompt_tokens_from']:,}" in md
            and f"{top['draft_token_weighted_alpha']:.3f} ({iv[0]:.3f}–{iv[1]:.3f})" in md)
    pdf = client.get("/api/v1/reports/weekly/export", params={"week": week, "model": MODEL, "format": "pdf"})
    pdf_text = " ".join(" ".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf.content)).pages).split())
    assert "alpha by context length" in pdf_text and "α" not in pdf_text  # the PDF's fonts have no Greek letters
    assert f"{top['prompt_tokens_from']:,}+" in pdf_text and f"{top['draft_token_weighted_alpha']:.3f}" in pdf_text


def test_alert_targets_show_the_pool_once(fleet) -> None:
    _, factory, s = fleet
    with session_scope(factory) as session:
        targets = alert_eval.snapshot(session, windows={600.0}, now=datetime.fromtimestamp(END, UTC), settings=s)
    mine = sorted((k[1], k[2]) for k in targets if k[0] == MODEL)
    assert mine == [("chat", "eagle3"), ("code", "eagle3"), ("mixed", "eagle3")]
    _clean(json.dumps([t.labels for t in targets.values()]))
