"""The dashboard's own settings (it never imports backend.config): how users authenticate, the key that
signs the session cookie, and an optional service token for read calls when there is no login.

Environment (overridden by the `python -m dashboard` options):
* ``SPECWATCH_DASHBOARD_AUTH``: ``none`` (default: no login, `make demo` and the tests), ``token`` (a login
  page where a user enters an API token; kept server-side in a signed session cookie), ``trusted-header``
  (a reverse proxy authenticates users; its X-Forwarded-User / X-Forwarded-Role headers are forwarded).
* ``SPECWATCH_SECRET_KEY``: signs the session cookie (token mode; a random one per process otherwise,
  so sessions end when the dashboard restarts).
* ``SPECWATCH_DASHBOARD_API_TOKEN``: mode none only: a token every API call carries; the dashboard then
  acts as that token's user and role for everyone (`specwatch demo` uses an operator token: a kiosk). The
  API needs one for every read unless it runs with SPECWATCH_ANONYMOUS_READ=true (aggregates only).
* ``SPECWATCH_DASHBOARD_RECEIVER_URL``: a link on the Alerts page to a Slack-compatible receiver's page
  (`specwatch demo` sets it to its `specwatch slack-receiver`).
* ``SPECWATCH_DASHBOARD_SECURE_COOKIE``: mark the session cookie Secure (true/false); unset: Secure unless
  the dashboard is served on a loopback address.
* ``SPECWATCH_AUTH_PROXY_SECRET`` / ``SPECWATCH_AUTH_PROXY_SECRET_HEADER``: trusted-header mode: the shared
  secret the dashboard sends to the API with the forwarded headers (the API's settings of the same names).
* ``SPECWATCH_DASHBOARD_THREADS``: gunicorn threads of the dashboard server.
"""

from __future__ import annotations

import ipaddress
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
    "SPECWATCH_DASHBOARD_SECURE_COOKIE": ("(unset)", "Secure session cookie (true/false); unset: unless on loopback"),
    "SPECWATCH_DASHBOARD_THREADS": ("(server.DEFAULT_THREADS)", "gunicorn threads of the dashboard"),
}


@dataclass(frozen=True)
class DashboardSettings:
    auth: str = "none"
    secret_key: str | None = None
    api_token: str | None = None
    user_header: str = "X-Forwarded-User"
    role_header: str = "X-Forwarded-Role"
    secure_cookie: bool | None = None  # Secure session cookie; None: when not served on loopback (serve())
    proxy_secret: str | None = None  # trusted-header: sent to the API as proof that the headers come via us
    proxy_secret_header: str = "X-Specwatch-Proxy-Secret"
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


def _flag(raw: str | None) -> bool | None:
    """true/1/yes -> True, false/0/no -> False, unset or empty -> None (decide from the bind address)."""
    value = (raw or "").strip().lower()
    return True if value in ("1", "true", "yes") else False if value in ("0", "false", "no") else None


def is_loopback(host: str) -> bool:
    """The dashboard is bound to this machine only (plain HTTP is then acceptable for its cookie)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def secure_cookie(settings: DashboardSettings, host: str) -> bool:
    """Whether the session cookie is Secure: as set, else unless the dashboard is bound to loopback."""
    return settings.secure_cookie if settings.secure_cookie is not None else not is_loopback(host)


def from_env(environ: Mapping[str, str] | None = None) -> DashboardSettings:
    env = os.environ if environ is None else environ
    return DashboardSettings(
        auth=(env.get("SPECWATCH_DASHBOARD_AUTH") or "none").strip().lower(),
        secret_key=env.get("SPECWATCH_SECRET_KEY") or None,
        api_token=env.get("SPECWATCH_DASHBOARD_API_TOKEN") or None,
        secure_cookie=_flag(env.get("SPECWATCH_DASHBOARD_SECURE_COOKIE")),
        proxy_secret=env.get("SPECWATCH_AUTH_PROXY_SECRET") or None,
        proxy_secret_header=env.get("SPECWATCH_AUTH_PROXY_SECRET_HEADER") or "X-Specwatch-Proxy-Secret",
        receiver_url=env.get("SPECWATCH_DASHBOARD_RECEIVER_URL") or None,
    )
