"""The dashboard's own settings (it never imports backend.config): how users authenticate, the key that
signs the session cookie, and an optional service token for read calls when there is no login.

Environment (overridden by the `python -m dashboard` options):
* ``SPECWATCH_DASHBOARD_AUTH``: ``none`` (default: no login, `make demo` and the tests), ``token`` (a login
  page where a user enters an API token; kept server-side in a signed session cookie), ``trusted-header``
  (a reverse proxy authenticates users; its X-Forwarded-User / X-Forwarded-Role headers are forwarded).
* ``SPECWATCH_SECRET_KEY``: signs the session cookie (token mode; a random one per process otherwise,
  so sessions end when the dashboard restarts).
* ``SPECWATCH_DASHBOARD_API_TOKEN``: mode none only: a token every API call carries; the dashboard then
  acts as that token's user and role for everyone (`specwatch demo` uses an operator token: a kiosk).
* ``SPECWATCH_DASHBOARD_RECEIVER_URL``: a link on the Alerts page to a Slack-compatible receiver's page
  (`specwatch demo` sets it to its `specwatch slack-receiver`).
* ``SPECWATCH_DASHBOARD_SECURE_COOKIE``: mark the session cookie Secure (serve over HTTPS).
* ``SPECWATCH_DASHBOARD_THREADS``: gunicorn threads of the dashboard server.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace

log = logging.getLogger(__name__)

AUTH_MODES = ("none", "token", "trusted-header")
# every environment variable the dashboard reads, with its default and meaning (the README's table)
ENVIRONMENT = {
    "SPECWATCH_DASHBOARD_AUTH": ("none", "none | token (login page) | trusted-header (a proxy authenticates)"),
    "SPECWATCH_DASHBOARD_API_TOKEN": ("", "mode none: the token every API call carries (its role for everyone)"),
    "SPECWATCH_DASHBOARD_RECEIVER_URL": ("", "link on the Alerts page to a Slack receiver's page (the demo's)"),
    "SPECWATCH_DASHBOARD_SECURE_COOKIE": ("false", "mark the session cookie Secure (HTTPS)"),
    "SPECWATCH_DASHBOARD_THREADS": ("(server.DEFAULT_THREADS)", "gunicorn threads of the dashboard"),
}


@dataclass(frozen=True)
class DashboardSettings:
    auth: str = "none"
    secret_key: str | None = None
    api_token: str | None = None
    user_header: str = "X-Forwarded-User"
    role_header: str = "X-Forwarded-Role"
    secure_cookie: bool = False  # set when the dashboard is served over HTTPS
    receiver_url: str | None = None  # a Slack-compatible receiver's page, linked from the Alerts page

    def __post_init__(self) -> None:
        if self.auth not in AUTH_MODES:
            raise ValueError(f"dashboard auth must be one of {', '.join(AUTH_MODES)} (got {self.auth!r})")

    def signing_key(self) -> str:
        if self.secret_key:
            return self.secret_key
        if self.auth == "token":
            log.warning("no SPECWATCH_SECRET_KEY / --secret: using a random session key (logins end on restart)")
        return secrets.token_urlsafe(32)

    def with_(self, **changes: object) -> DashboardSettings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def from_env(environ: Mapping[str, str] | None = None) -> DashboardSettings:
    env = os.environ if environ is None else environ
    return DashboardSettings(
        auth=(env.get("SPECWATCH_DASHBOARD_AUTH") or "none").strip().lower(),
        secret_key=env.get("SPECWATCH_SECRET_KEY") or None,
        api_token=env.get("SPECWATCH_DASHBOARD_API_TOKEN") or None,
        secure_cookie=(env.get("SPECWATCH_DASHBOARD_SECURE_COOKIE") or "").lower() in ("1", "true", "yes"),
        receiver_url=env.get("SPECWATCH_DASHBOARD_RECEIVER_URL") or None,
    )
