"""Who is using the dashboard, and the credentials its API calls carry (see dashboard.settings for modes).

* ``token``: ``/login`` is a plain server-rendered form (outside Dash, so nothing else is served before a
  login): the API token is checked with ``GET /api/v1/whoami`` and kept in Flask's signed, HttpOnly,
  SameSite=Lax session cookie, encrypted (Fernet, key derived from the secret) so that the cookie never
  shows it; every other path redirects to /login (Dash's own endpoints answer 401).
  ``POST /logout`` ends the session.
* ``trusted-header``: the proxy's user / role headers are forwarded to the API as they came.
* ``none``: no login; every call carries the optional service token, and with one the dashboard acts as
  that token's user (whoami, asked once) for everyone: `specwatch demo` runs it so, as an operator.

`install` adds a before-request hook that puts the caller's headers into api_client.REQUEST_HEADERS, so
every API call made while serving that request (also from api_client.parallel threads) carries them.
"""

from __future__ import annotations

import base64
import hashlib
import html
import secrets
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

import flask
from cryptography.fernet import Fernet, InvalidToken

from dashboard import alerts_client
from dashboard.api_client import REQUEST_HEADERS, ApiError, ApiUnavailable, get_client
from dashboard.settings import DashboardSettings

ROLES = {"viewer": 1, "operator": 2, "admin": 3}
PUBLIC_PREFIXES = ("/login", "/assets/", "/_favicon.ico", "/favicon.ico")
_settings = DashboardSettings()
_box = Fernet(Fernet.generate_key())
_service_user: User | None = None  # mode none with a service token: who that token is (asked once)


@dataclass(frozen=True)
class User:
    name: str
    role: str
    via: str  # token | proxy | service

    def can(self, role: str) -> bool:
        return ROLES.get(self.role, 0) >= ROLES[role]


def mode() -> str:
    return _settings.auth


def settings() -> DashboardSettings:
    return _settings


def install(server: flask.Flask, settings: DashboardSettings) -> None:
    global _settings, _box, _service_user
    _settings, key, _service_user = settings, settings.signing_key(), None
    server.secret_key = key
    _box = Fernet(base64.urlsafe_b64encode(hashlib.sha256(f"specwatch-dashboard-token:{key}".encode()).digest()))
    server.config.update(SESSION_COOKIE_NAME="specwatch_session", SESSION_COOKIE_HTTPONLY=True,
                         SESSION_COOKIE_SAMESITE="Lax", SESSION_COOKIE_SECURE=bool(settings.secure_cookie),
                         PERMANENT_SESSION_LIFETIME=timedelta(hours=12))
    server.before_request(_before_request)
    server.add_url_rule("/login", "specwatch_login", login, methods=["GET", "POST"])
    server.add_url_rule("/logout", "specwatch_logout", logout, methods=["POST"])


def api_headers(settings: DashboardSettings, token: str | None, incoming) -> dict[str, str]:
    """The headers this dashboard request's API calls carry (`token`: the logged-in user's)."""
    if settings.auth == "token":
        return {"Authorization": f"Bearer {token}"} if token else {}
    if settings.auth == "trusted-header":
        out = {h: incoming[h] for h in (settings.user_header, settings.role_header) if incoming.get(h)}
        if out and settings.proxy_secret:  # the API trusts the headers from an allowlisted address or with this
            out[settings.proxy_secret_header] = settings.proxy_secret
        return out
    return {"Authorization": f"Bearer {settings.api_token}"} if settings.api_token else {}


def current_user() -> User | None:
    """The logged-in user (token mode) or the proxy's user (trusted-header mode); None without login."""
    if not flask.has_request_context():
        return None
    if _settings.auth == "token" and session_token():
        return User(flask.session.get("user", "?"), flask.session.get("role", "viewer"), "token")
    if _settings.auth == "trusted-header":
        user = flask.request.headers.get(_settings.user_header, "").strip()
        role = flask.request.headers.get(_settings.role_header, "viewer").strip().lower() or "viewer"
        return User(user, role, "proxy") if user else None
    return _service()


def _service() -> User | None:
    global _service_user
    if _settings.auth != "none" or not _settings.api_token:
        return None
    if _service_user is None:
        try:
            who = alerts_client.whoami(get_client(), _settings.api_token)
        except (ApiError, ApiUnavailable):
            return None  # asked again on the next request
        _service_user = User(who.name, who.role, "service")
    return _service_user


def session_token() -> str | None:
    sealed = flask.session.get("token")
    try:
        return _box.decrypt(sealed.encode()).decode() if isinstance(sealed, str) else None
    except InvalidToken:  # sealed under another secret (the dashboard restarted with a random one)
        return None


def _before_request():
    token = session_token() if _settings.auth == "token" else None
    REQUEST_HEADERS.set(api_headers(_settings, token, flask.request.headers))
    path = flask.request.path
    if _settings.auth != "token" or token or path.startswith(PUBLIC_PREFIXES):
        return None
    if path.startswith("/_") or flask.request.method != "GET":
        return flask.jsonify(detail="log in first: /login"), 401
    return flask.redirect("/login?" + urlencode({"next": flask.request.full_path.rstrip("?")}))


def _safe_next(target: str | None) -> str:
    return target if target and target.startswith("/") and not target.startswith("//") else "/"


def login():
    if _settings.auth != "token":
        return flask.redirect("/")
    form = flask.request.form
    if flask.request.method == "GET":
        return _login_page(flask.request.args.get("next"))
    nxt = form.get("next")
    expected = flask.session.pop("login_csrf", None)
    if not expected or not secrets.compare_digest(expected, form.get("csrf", "")):
        return _login_page(nxt, "the form expired; try again"), 400
    token = (form.get("token") or "").strip()
    try:
        who = alerts_client.whoami(get_client(), token) if token else None
    except ApiError as exc:
        return _login_page(nxt, "invalid or revoked token" if exc.status == 401 else exc.detail), 401
    except ApiUnavailable:
        return _login_page(nxt, "backend unreachable — try again"), 503
    if who is None:
        return _login_page(nxt, "enter an API token"), 400
    flask.session.clear()
    flask.session.update(token=_box.encrypt(token.encode()).decode(), user=who.name, role=who.role)
    flask.session.permanent = True
    return flask.redirect(_safe_next(nxt))


def logout():
    flask.session.clear()
    return flask.redirect("/login")


def _login_page(nxt: str | None, error: str | None = None) -> str:
    csrf = flask.session["login_csrf"] = secrets.token_urlsafe(16)
    err = f'<div class="alert alert-warning sw-login-error" role="alert">{html.escape(error)}</div>' if error else ""
    return f"""<!doctype html><html lang="en" data-bs-theme="light"><head><meta charset="utf-8">
<title>specwatch · log in</title><meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/assets/00-base.css"><link rel="stylesheet" href="/assets/specwatch.css">
<link rel="stylesheet" href="/assets/alerts.css"></head><body><main class="sw-login card"><div class="card-body">
<h1 class="sw-login-title">specwatch</h1><p class="sw-muted">Log in with an API token
(<code>specwatch tokens create --role operator</code>; viewers read, operators silence and acknowledge).</p>
{err}<form method="post" action="/login"><label for="sw-token">API token</label>
<input id="sw-token" name="token" type="password" class="form-control" autocomplete="off" required autofocus>
<input type="hidden" name="csrf" value="{csrf}"><input type="hidden" name="next" value="{html.escape(_safe_next(nxt))}">
<button id="sw-login-submit" type="submit" class="btn sw-btn-primary">log in</button></form></div></main>
</body></html>"""


def nav_user():
    """The navbar's user box: who is logged in with which role, and a log-out button (token mode)."""
    from dash import html

    user = current_user()
    if user is None:
        return html.Span("no login" if mode() == "none" else "", id="nav-user-name", className="sw-nav-user sw-muted",
                         title="the dashboard runs without authentication (--auth none)")
    out = [html.Span([html.Strong(user.name), f" · {user.role}"], id="nav-user-name",
                     className="sw-nav-user", title=f"signed in via {user.via}")]
    if user.via == "token":
        out.append(html.Form(html.Button("log out", id="nav-logout", type="submit", className="btn btn-sm"),
                             action="/logout", method="POST", className="d-inline ms-1"))
    return html.Span(out, className="d-flex align-items-center gap-1 ms-2")
