"""The model page's K advisor section as plain functions over the real API (GET /k-advice over the app under
test): a table per class and for the mix, extrapolated rows marked, the best K in bold and named in words."""

from __future__ import annotations

from fastapi.testclient import TestClient

from backend.schemas.calc import KAdviceSetRead
from backend.schemas.pools import PoolsRead
from dashboard import formatting as fm
from dashboard import state
from dashboard.pages import model as page
from tests.api.conftest import client  # noqa: F401  (a fixture)
from tests.api.test_k_advice_api import fleet  # noqa: F401  (a fixture)
from tests.dashboard.test_pages import _text


class ApiOverTestClient:
    def __init__(self, api: TestClient):
        self.client = api

    def pools(self) -> PoolsRead:
        return PoolsRead.model_validate(self.client.get("/api/v1/pools").json())

    def k_advice(self, model: str, view: state.View) -> KAdviceSetRead:
        r = self.client.get("/api/v1/k-advice", params={"model": model, "window": view.window})
        return KAdviceSetRead.model_validate(r.raise_for_status().json())


def _find(component, id_: str):
    if getattr(component, "id", None) == id_:
        return component
    kids = getattr(component, "children", None)
    for kid in kids if isinstance(kids, (list, tuple)) else [kids]:
        if kid is not None and not isinstance(kid, (str, int, float)):
            hit = _find(kid, id_)
            if hit is not None:
                return hit
    return None


def test_section_shows_the_api_numbers_and_the_best_k(client: TestClient, fleet) -> None:  # noqa: F811
    view = state.View(window="1h", model="llama-70b")
    out = page.render_k_advice(ApiOverTestClient(client), view)
    api = client.get("/api/v1/k-advice", params={"model": "llama-70b", "window": "1h"}).json()
    k3 = next(m for m in api["modes"] if m["spec_mode"] == "eagle3-k3")
    for cls in k3["classes"] + [k3["mix"]]:
        for row in cls["rows"]:
            cell = _find(out, f"md-k-eagle3-k3-{cls['name']}-{row['k']}-speedup")
            assert _text(cell) == fm.fmt_speedup(row["speedup"]), (cls["name"], row["k"])
    chat = _find(out, "md-k-eagle3-k3-chat")
    body_rows = chat.children[2].children
    best = [r for r in body_rows if r.className and "sw-k-best" in r.className]
    assert len(best) == 1 and _text(best[0].children[0]) == "5" and "best" in _text(best[0])
    assert "extrapolated" in _text(body_rows[2]) and "current" in _text(body_rows[1])
    assert _text(_find(out, "md-k-eagle3-k3-chat-best")).startswith("best K = 5 (+")
    # code at its own eps(K) = 0.225 + 0.025 K: K = 4 gives (2.4 + 0.2 x 0.3655) / 1.325 = 1.8665 against
    # 2.4 / 1.3 = 1.8462 at K = 3
    assert _text(_find(out, "md-k-eagle3-k3-code-best")) == "best K = 4 (+1.1 % speedup vs K = 3), extrapolated"
    # each class its own overhead line with its own eps_step; the mix pools them
    chat_ov, code_ov = _text(_find(out, "md-k-eagle3-k3-chat-overhead")), _text(_find(out, "md-k-eagle3-k3-code-overhead"))
    assert "linear fit" in chat_ov and "ε_step 0.25 (measured from ITL vs baseline)" in chat_ov
    assert "ε_step 0.30 (measured from ITL vs baseline)" in code_ov
    assert "pooled" in _text(_find(out, "md-k-eagle3-k3-mixed-overhead"))


def test_section_without_pools_says_so(client: TestClient) -> None:  # noqa: F811
    out = page.render_k_advice(ApiOverTestClient(client), state.View(window="1h"))
    assert "no speculative pools" in _text(out)
