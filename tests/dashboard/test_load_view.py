"""The model page's concurrency-band section: a row per class and band with both α, τ, dispersion and basis,
and the load finding only when the API's load_stability says breached."""

from __future__ import annotations

from dashboard import load_view


def _band(band: str, alpha: float, basis: str) -> dict:
    return {"band": band, "requests": 1200, "drafts": 30000, "draft_token_weighted_alpha": alpha,
            "draft_token_weighted_alpha_interval": [alpha - 0.01, alpha + 0.01], "request_weighted_alpha": alpha,
            "request_weighted_alpha_interval": [None, None], "mean_acceptance_length": 2.5,
            "mean_acceptance_length_interval": [2.4, 2.6], "dispersion": 3.25, "basis": basis}


def _cls(name: str, finding: bool) -> dict:
    return {"traffic_class": name, "spec_mode": "eagle3",
            "by_concurrency": [_band("9-32", 0.6, "record"), _band("33-128", 0.31, "record and pool")],
            "load_stability": {"finding": finding, "falls": finding, "unstable": False, "status": "ok",
                               "boundary_running_requests": 32, "text": "alpha 0.310 above 32"}}


def _text(node) -> str:
    if isinstance(node, str):
        return node
    children = getattr(node, "children", None)
    if children is None:
        return ""
    return " ".join(_text(c) for c in (children if isinstance(children, list) else [children]))


def test_rows_and_finding() -> None:
    out = load_view.section({"classes": [_cls("code", True), _cls("chat", False)]})
    text = _text(out)
    assert "Finding: code acceptance falls above 32 running requests." in text
    assert "Finding: chat" not in text
    for cell in ("9-32", "33-128", "0.600 (0.590–0.610)", "0.310 (one request: no interval)", "2.50 (2.40–2.60)",
                 "3.25", "record + pool band", "1,200"):
        assert cell in text, cell


def test_nothing_to_show() -> None:
    assert "no per-request records with a concurrency" in _text(load_view.section(None))
    other_mode = load_view.section({"classes": [_cls("code", True)]}, "ngram")
    assert "no per-request records with a concurrency" in _text(other_mode)


class _Client:
    """pools() and GET /requests/acceptance, as the model page calls them."""

    def __init__(self, origins: tuple[str, ...]):
        self.origins, self.calls = origins, []

    def pools(self):
        from types import SimpleNamespace
        return SimpleNamespace(pools=[SimpleNamespace(model_name="m", origin=o, is_baseline=False, stale=False)
                                      for o in self.origins])

    def _request(self, method, path, params=None):
        self.calls.append((method, path, params))
        return {"classes": [_cls("code", True)]}


def test_model_page_reads_the_records_of_the_model_shown() -> None:
    from dashboard import state
    from dashboard.pages import model

    client = _Client(("engine", "requests"))
    text = _text(model.render_load(client, state.View(model="m")))
    assert client.calls[0][:2] == ("GET", "/requests/acceptance") and client.calls[0][2]["model"] == "m"
    assert "Finding: code acceptance falls above 32 running requests." in text
    engine_only = _Client(("engine",))
    assert "no per-request records" in _text(model.render_load(engine_only, state.View(model="m")))
    assert engine_only.calls == []  # no records pool: nothing asked
