"""The Alerts page, the overview's firing banner and the alert HTTP calls, driven through the real ApiClient
over an in-memory transport (a fake API): tables split by phase, who may act, the "needs a token" state."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest

from dashboard import alerts_client as ac
from dashboard import alerts_view as v
from dashboard import components as c
from dashboard.api_client import REQUEST_HEADERS, ApiClient, ApiError, ApiUnavailable, parallel
from dashboard.auth import User
from dashboard.pages import alerts as page
from tests.dashboard.fakes import NOW
from tests.dashboard.test_pages import _text

OPERATOR, VIEWER = User("alice", "operator", "token"), User("victor", "viewer", "token")


def alert(id: int, phase: str = "firing", model: str = "llama-3.1-70b", cls: str = "chat", **kw) -> dict:
    return {"id": id, "rule": "alpha-low", "kind": "alpha_low", "severity": "page", "phase": phase,
            "labels": {"model": model, "traffic_class": cls, "spec_mode": "eagle3", "rule": "alpha-low"},
            "pending_since": (NOW - timedelta(minutes=9)).isoformat(),
            "firing_since": (NOW - timedelta(minutes=7)).isoformat() if phase == "firing" else None,
            "last_value": 0.41, "last_values": {"threshold": 0.55, "window": "5m & 1h", "reason": "r below"},
            "incident_id": 3 if phase == "firing" else None, **kw}


TRANSITION = {"id": 1, "alert_id": 1, "rule": "alpha-low", "labels": alert(1)["labels"], "at": NOW.isoformat(),
              "from_phase": "pending", "to_phase": "firing", "status": "bad", "value": 0.41, "threshold": 0.55,
              "reason": "r 0.410 < 0.55 on 5m and 1h", "values": {"window": "5m & 1h"}, "notification": "firing"}
SILENCE = {"id": 4, "matchers": {"model": "qwen*"}, "starts_at": NOW.isoformat(),
           "ends_at": (NOW + timedelta(hours=1)).isoformat(), "created_by": "alice", "reason": "deploy", "active": True,
           "created_at": NOW.isoformat()}


def _find(component, kind: str) -> list:
    """Every component of type `kind` in a Dash component tree."""
    if isinstance(component, (list, tuple)):
        return [x for item in component for x in _find(item, kind)]
    if not hasattr(component, "children"):
        return []
    return ([component] if type(component).__name__ == kind else []) + _find(component.children, kind)


class FakeApi:
    """An in-memory API: GET routes from `answers`, POSTs echo a created object; every request recorded."""

    def __init__(self, alerts: list[dict] | None = None, status: int = 200):
        self.status, self.requests = status, []
        self.answers = {"/api/v1/alerts": alerts if alerts is not None else [alert(1), alert(2, "pending", cls="code"),
                                                                               alert(3, silenced_by=4, cls="rag")],
                        "/api/v1/alerts/history": [TRANSITION], "/api/v1/silences": [SILENCE],
                        "/api/v1/whoami": {"name": "alice", "role": "operator"}}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.status != 200:
            return httpx.Response(self.status, json={"detail": "missing bearer token"})
        path = request.url.path
        if request.method == "POST" and path == "/api/v1/silences":
            body = json.loads(request.content)
            return httpx.Response(201, json={**SILENCE, "id": 9, "matchers": body["matchers"], "reason": body["reason"]})
        if request.method == "POST" and path.endswith("/ack"):
            return httpx.Response(201, json={"id": 1, "alert_id": 1, "by": "alice", "comment": "", "at": NOW.isoformat()})
        return httpx.Response(200, json=self.answers[path])

    def client(self) -> ApiClient:
        return ApiClient("http://api.test", transport=httpx.MockTransport(self))


def test_alert_calls_parse_the_wire_objects():
    client = FakeApi().client()
    alerts = ac.alerts(client)
    assert [a.phase for a in alerts] == ["firing", "pending", "firing"]
    assert alerts[0].threshold == 0.55 and alerts[0].window == "5m & 1h" and alerts[0].since.minute == 53
    assert ac.history(client)[0].to_phase == "firing" and ac.silences(client)[0].matchers == {"model": "qwen*"}


def test_401_means_a_token_is_needed_and_a_bad_body_is_unavailable():
    with pytest.raises(ApiError) as err:
        ac.alerts(FakeApi(status=401).client())
    assert ac.needs_token(err.value)
    api = FakeApi()
    api.answers["/api/v1/alerts"] = [{"id": 1}]
    with pytest.raises(ApiUnavailable):
        ac.alerts(api.client())


def test_request_headers_reach_every_call_also_from_parallel_threads():
    api = FakeApi()
    client = api.client()
    token = REQUEST_HEADERS.set({"Authorization": "Bearer sw_user"})
    try:
        parallel([lambda: ac.alerts(client), lambda: ac.silences(client)])
        ac.whoami(client, "sw_explicit")
    finally:
        REQUEST_HEADERS.reset(token)
    ac.alerts(client)
    auths = [r.headers.get("authorization") for r in api.requests]
    assert auths == ["Bearer sw_user", "Bearer sw_user", "Bearer sw_explicit", None]


def test_the_page_splits_firing_pending_silenced_and_lets_operators_act():
    out = page.render(FakeApi().client(), OPERATOR, "token", {"window": "6h"})
    _status, retry_off, kpis, firing, pending, silenced, history, silences, disabled, why, data = out
    assert retry_off and disabled is False and why == "as alice (operator)"
    assert "▲ firing 1" in _text(kpis) and "◎ pending 1" in _text(kpis) and "⊘ silenced 1" in _text(kpis)
    row = _text(firing)
    assert "llama-3.1-70b · chat" in row and "0.410" in row and "0.550" in row and "5m & 1h" in row and "#3" in row
    assert "code" in _text(pending) and "rag" in _text(silenced) and "silenced" in _text(silenced)
    assert "pending" in _text(history) and "r 0.410 < 0.55" in _text(history) and "model=qwen*" in _text(silences)
    assert data["1"] == {"model": "llama-3.1-70b", "traffic_class": "chat", "rule": "alpha-low"}
    assert _find(firing, "Link")[0].href == "/model?window=6h&model=llama-3.1-70b&cls=chat&mode=eagle3"
    assert not any(b.disabled for b in _find(firing, "Button"))


@pytest.mark.parametrize("user,mode,reason", [
    (VIEWER, "token", "operators only: you are victor (viewer)"),
    (None, "none", "need a login"),
    (None, "trusted-header", "log in"),
])
def test_viewers_and_anonymous_users_see_the_actions_disabled_with_the_reason(user, mode, reason):
    out = page.render(FakeApi().client(), user, mode, {})
    assert out[8] is True and reason in out[9]
    buttons = _find(out[3], "Button")
    assert len(buttons) == 2 and all(b.disabled and reason in b.title for b in buttons)


def test_without_a_token_the_page_says_so_instead_of_failing():
    out = page.render(FakeApi(status=401).client(), None, "none", {})
    assert v.NEEDS_TOKEN in _text(out[0]) and out[8] is True


def test_a_dead_backend_gives_the_banner():
    client = ApiClient("http://127.0.0.1:9", timeout=0.5)
    out = c.guarded(lambda: page.render(client, OPERATOR, "token", {}), n_outputs=page.N_OUT)
    assert "backend unreachable — retrying" in _text(out[0]) and len(out) == page.N_OUT


def test_an_operator_silences_with_matchers_duration_and_reason():
    api = FakeApi()
    result, done = page.silence(api.client(), OPERATOR, "token", "llama-3.1-70b", "chat", " ", "7200", "drafter swap", 2)
    body = json.loads(api.requests[-1].content)
    assert body == {"matchers": {"model": "llama-3.1-70b", "traffic_class": "chat"}, "duration_seconds": 7200.0,
                    "reason": "drafter swap"}
    assert done == 3 and "silence #9 by alice" in _text(result)


def test_a_viewer_or_an_incomplete_form_sends_nothing():
    api = FakeApi()
    assert "operators only" in _text(page.silence(api.client(), VIEWER, "token", "m", "", "", "3600", "x", 0)[0])
    assert "a reason" in _text(page.silence(api.client(), OPERATOR, "token", "m", "", "", "3600", " ", 0)[0])
    assert "a reason" in _text(page.silence(api.client(), OPERATOR, "token", "", "", "", "3600", "x", 0)[0])
    assert api.requests == []


def test_acknowledge_posts_the_ack_and_refuses_viewers():
    api = FakeApi()
    result, done = page.acknowledge(api.client(), OPERATOR, "token", 1, 0)
    assert api.requests[-1].url.path == "/api/v1/alerts/1/ack" and done == 1 and "acknowledged by alice" in _text(result)
    assert page.acknowledge(api.client(), VIEWER, "token", 1, 0)[1] is page.no_update and len(api.requests) == 1


def test_the_overview_banner_lists_firing_alerts_with_links():
    banner = page.banner(FakeApi().client(), {"window": "24h"})
    text = _text(banner)
    assert "1 firing alert (+1 silenced)" in text and "alpha-low: 0.410 vs 0.550" in text
    assert "all alerts →" in text
    quiet = _text(page.banner(FakeApi(alerts=[alert(2, "pending")]).client(), {}))
    assert "no firing alerts" in quiet


def test_the_overview_banner_without_token_or_backend():
    assert v.NEEDS_TOKEN in _text(page.banner(FakeApi(status=401).client(), {}))
    assert "SPECWATCH_DASHBOARD_API_TOKEN" in _text(page.banner(FakeApi(status=401).client(), {}, "none"))
    assert page.banner(ApiClient("http://127.0.0.1:9", timeout=0.5), {}) is None
