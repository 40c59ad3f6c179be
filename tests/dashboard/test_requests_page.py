"""The per-request page as plain functions over a real API: the records' classes, α table, histogram and
coverage line show what the API computed."""

from __future__ import annotations

import math
from datetime import datetime

from fastapi.testclient import TestClient

from backend.schemas.pools import PoolsRead
from dashboard import state
from dashboard.pages import requests as page
from tests.api.conftest import client  # noqa: F401  (a fixture)
from tests.api.test_per_request_ingest import URL, auth, record  # noqa: F401  (auth: a fixture)
from tests.dashboard.test_pages import _text


class ApiOverTestClient:
    """The two calls the page makes, answered by the app under test."""

    def __init__(self, api: TestClient):
        self.client = api

    def pools(self) -> PoolsRead:
        return PoolsRead.model_validate(self.client.get("/api/v1/pools").json())

    def _request(self, method: str, path: str, **kw):
        return self.client.request(method, "/api/v1" + path, **kw).raise_for_status().json()


def test_page_shows_classes_alpha_and_coverage(client: TestClient, auth, now: datetime) -> None:  # noqa: F811
    batch = [record("c1", [1, 2, 3, 4], now=now), record("k1", [8, 2, 0, 0], now=now, cls="code")]
    assert client.post(URL, json=batch, headers=auth["ingest"]).json()["stored"] == 2
    out = page.render(ApiOverTestClient(client), state.View(window="1h"), "light")
    status, _, models, model, body, hist, by_len = out
    assert status is None and models == ["m1"] and model == "m1"
    text = _text(body)
    assert "chat" in text and "code" in text and "0.667" in text and "0.067" in text
    assert "no engine counters" in text
    assert [t.name for t in hist.data] == ["chat", "code"]
    assert sum(hist.data[0].y) == 1.0
    assert by_len.data[0].y[0] == 20 / 30


def test_page_without_records_says_so(client: TestClient) -> None:  # noqa: F811
    status, _, models, model, *_ = page.render(ApiOverTestClient(client), state.View(window="1h"), "light")
    assert models == [] and model is None and "no data for per-request records" in _text(status)


def test_coverage_line_names_each_flagged_coverage() -> None:
    rec = {"coverage": {"drafts": 1.0, "draft_tokens": 1.0, "accepted_tokens": 0.892},
           "coverage_flags": {"drafts": None, "draft_tokens": None, "accepted_tokens": "partial_coverage"},
           "flags": ["partial_coverage"], "coverage_band": [0.98, 1.02]}
    text = _text(page.coverage_line(rec))
    assert "100.0 % of the engine's drafts, 100.0 % of the engine's draft tokens, 89.2 % of the engine's " \
           "accepted tokens" in text
    assert "— accepted tokens below 98 %: some requests are not reported" in text
    assert "drafts below" not in text and "above" not in text
    rec["coverage_flags"] = {"drafts": "per_request_exceeds_engine", "draft_tokens": "per_request_exceeds_engine",
                             "accepted_tokens": None}
    assert "— drafts and draft tokens above 102 %: more than the engine counted" in _text(page.coverage_line(rec))


def test_page_shows_alpha_by_context_length_with_intervals(client: TestClient, auth, now: datetime) -> None:  # noqa: F811
    # chat, K = 3: two requests at 1,500 prompt tokens (a/d = 6/9 and 9/9), one at 200,000 (3/9)
    batch = [{**record(rid, hist, now=now), "prompt_tokens": p} for rid, hist, p in
             (("s1", [0, 1, 1, 1], 1500), ("s2", [0, 0, 0, 3], 1500), ("l1", [0, 3, 0, 0], 200_000))]
    assert client.post(URL, json=batch, headers=auth["ingest"]).json()["stored"] == 3
    body = page.render(ApiOverTestClient(client), state.View(window="1h"), "light")[4]
    text = _text(body)
    assert "α by context length" in text
    assert "1,024–2,047" in text and "131,072+" in text
    # pooled 15/18 with the ratio estimator's interval: residuals 6 - 9r, 9 - 9r; se = sqrt(2 · Σ resid²) / 18
    r = 15 / 18
    se = math.sqrt(2 * ((6 - 9 * r) ** 2 + (9 - 9 * r) ** 2)) / 18
    assert f"0.833 ({max(0.0, r - 1.959963984540054 * se):.3f}–{min(1.0, r + 1.959963984540054 * se):.3f})" in text
    assert "0.333 (one request: no interval)" in text
