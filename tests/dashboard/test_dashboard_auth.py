"""Dashboard authentication on a bare Flask server with dashboard.auth installed, the API faked in memory:
token mode redirects to /login, checks the token with whoami, keeps it in the signed session and sends it
on every API call; trusted-header mode forwards the proxy's headers; mode none stays open."""

from __future__ import annotations

import base64
import re
import zlib

import flask
import httpx
import pytest

from dashboard import api_client, auth
from dashboard.settings import DashboardSettings, from_env
from tests.dashboard.conftest import APP


class Api:
    def __init__(self):
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        if request.headers.get("authorization") == "Bearer sw_good":
            return httpx.Response(200, json={"name": "alice", "role": "operator"})
        if request.headers.get("x-forwarded-user"):
            return httpx.Response(200, json={"name": request.headers["x-forwarded-user"],
                                             "role": request.headers.get("x-forwarded-role", "viewer")})
        return httpx.Response(401, json={"detail": "invalid or revoked token"})


@pytest.fixture
def server(request):
    """(flask test client, fake API) with the auth mode of the test's parameter; global state restored."""
    mode = getattr(request, "param", "token")
    settings = DashboardSettings(auth=mode, secret_key="k" * 32, api_token="sw_good" if mode == "none" else None)
    api = Api()
    api_client.configure("http://api.test", transport=httpx.MockTransport(api))
    app = flask.Flask("t")
    auth.install(app, settings)

    @app.route("/")
    @app.route("/alerts")
    def whoami_page():
        user = auth.current_user()
        body = api_client.get_client()._request("GET", "/whoami")
        return f"{user.name if user else '-'} {body['name']}"

    @app.route("/_dash-layout")
    def dash_layout():
        return "layout"

    yield app.test_client(), api
    auth.install(flask.Flask("reset"), DashboardSettings())
    api_client.configure("http://127.0.0.1:9")


def _cookie_text(set_cookie: str) -> str:
    """The session cookie's payload as Flask writes it (base64 JSON, maybe zlib-compressed), decoded."""
    value = set_cookie.split(";")[0].split("=", 1)[1]
    compressed = value.startswith(".")
    raw = base64.urlsafe_b64decode(value.lstrip(".").split(".")[0] + "==")
    return (zlib.decompress(raw) if compressed else raw).decode()


def _csrf(page: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


def _login(client, token: str, nxt: str = "/alerts"):
    form = client.get(f"/login?next={nxt}").get_data(as_text=True)
    return client.post("/login", data={"token": token, "csrf": _csrf(form), "next": nxt})


def test_without_a_session_pages_redirect_to_login_and_dash_endpoints_are_401(server):
    client, api = server
    r = client.get("/alerts")
    assert r.status_code == 302 and r.headers["location"] == "/login?next=%2Falerts"
    assert client.get("/_dash-layout").status_code == 401
    page = client.get("/login").get_data(as_text=True)
    assert 'name="token"' in page and 'type="password"' in page and api.seen == []


def test_login_checks_the_token_keeps_it_in_the_session_and_sends_it(server):
    client, api = server
    r = _login(client, "sw_good")
    assert r.status_code == 302 and r.headers["location"] == "/alerts"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "alice" in _cookie_text(cookie) and "sw_good" not in _cookie_text(cookie)  # sealed token
    assert client.get("/alerts").get_data(as_text=True) == "alice alice"
    assert api.seen[-1].headers["authorization"] == "Bearer sw_good"
    assert client.post("/logout").headers["location"] == "/login"
    assert client.get("/alerts").status_code == 302


def test_a_bad_token_or_a_forged_form_does_not_log_in(server):
    client, _ = server
    r = _login(client, "sw_bad")
    assert r.status_code == 401 and "invalid or revoked token" in r.get_data(as_text=True)
    r = client.post("/login", data={"token": "sw_good", "csrf": "forged", "next": "/"})
    assert r.status_code == 400 and client.get("/").status_code == 302
    assert _login(client, "sw_good", nxt="//evil.example").headers["location"] == "/"


@pytest.mark.parametrize("server", ["trusted-header"], indirect=True)
def test_trusted_header_mode_forwards_the_proxy_headers(server):
    client, api = server
    r = client.get("/alerts", headers={"X-Forwarded-User": "bob", "X-Forwarded-Role": "operator"})
    assert r.get_data(as_text=True) == "bob bob"
    assert api.seen[-1].headers["x-forwarded-role"] == "operator"
    assert client.get("/login").status_code == 302  # no login page in this mode


@pytest.mark.parametrize("server", ["none"], indirect=True)
def test_mode_none_is_open_and_acts_as_the_service_token(server):
    client, api = server
    assert client.get("/_dash-layout").get_data(as_text=True) == "layout"
    # nobody logs in: the dashboard acts as the service token's user (asked once), for reads and actions
    assert client.get("/alerts").get_data(as_text=True) == "alice alice"
    assert api.seen[-1].headers["authorization"] == "Bearer sw_good"


def test_settings_from_env_and_a_bad_mode():
    s = from_env({"SPECWATCH_DASHBOARD_AUTH": "Token", "SPECWATCH_SECRET_KEY": "s3", "SPECWATCH_DASHBOARD_API_TOKEN": "t"})
    assert (s.auth, s.secret_key, s.api_token) == ("token", "s3", "t") and from_env({}).auth == "none"
    assert s.with_(auth=None, secret_key="x").secret_key == "x" and s.with_(auth=None).auth == "token"
    assert auth.api_headers(DashboardSettings(api_token="sw_svc"), None, {}) == {"Authorization": "Bearer sw_svc"}
    with pytest.raises(ValueError, match="none, token, trusted-header"):
        DashboardSettings(auth="basic")


def test_the_test_app_runs_without_login():
    assert APP.server.test_client().get("/alerts").status_code == 200
