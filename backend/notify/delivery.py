"""Sending one notification over HTTP and classifying the answer; webhook URLs encrypted at rest.

`send()` returns a typed Outcome and never raises for HTTP trouble:

* delivered (2xx, and for the Slack Web API `ok: true`, with the message `ts`);
* retry_after(seconds): 429, from the `Retry-After` header (or the body's `retry_after`); Alertmanager's
  Slack notifier drops these (alertmanager#2111/#2205), we wait and send again;
* transient: 5xx, connection errors and connect timeouts (the request never left): retried with
  exponential backoff by the outbox;
* in_doubt: the request went out but no answer came (read/write timeout, connection dropped mid-answer):
  the receiver may have it. The outbox re-sends it only per the channel's `on_doubt` policy (Slack), or
  as a transient failure where the receiver deduplicates (webhook: Idempotency-Key; Alertmanager: labels);
* permanent(reason): 400/403/404/410 and Slack's `no_service`, `invalid_token`, `channel_not_found`,
  `channel_is_archived`, `action_prohibited`... (the channel is marked broken and an internal alert raised).

URLs and tokens never appear in an Outcome, an exception message or a log line: `redact_url` keeps the
scheme and host only. httpx logs every request URL at INFO, so its loggers are raised to WARNING here.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
from cryptography.fernet import Fernet, InvalidToken

from backend.notify import alertmanager, slack, webhook

for _name in ("httpx", "httpcore"):
    logging.getLogger(_name).setLevel(logging.WARNING)

OutcomeKind = Literal["delivered", "retry_after", "transient", "permanent", "in_doubt"]
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)
KINDS = ("slack", "slack_api", "webhook", "alertmanager")
PERMANENT_STATUS = {400, 401, 403, 404, 410}
PERMANENT_ERRORS = {"invalid_payload", "user_not_found", "invalid_blocks", "action_prohibited", "invalid_token",
                    "channel_not_found", "channel_is_archived", "no_service", "no_service_id", "no_team",
                    "no_active_hooks", "team_disabled", "posting_to_general_channel_denied", "too_many_attachments",
                    "not_authed", "account_inactive", "token_revoked", "is_archived", "not_in_channel",
                    "msg_blocks_too_long", "no_text"}


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    http_status: int | None = None
    reason: str = ""
    retry_after: float | None = None
    ts: str | None = None  # Slack Web API message ts (for threading)


def redact_url(url: str) -> str:
    """scheme://host/… : enough to recognise a channel, nothing that works as a credential."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    if parts.port:
        host += f":{parts.port}"
    return f"{parts.scheme}://{host}/…" if parts.path not in ("", "/") else f"{parts.scheme}://{host}"


def _retry_after(resp: httpx.Response, body: Any) -> float:
    raw = resp.headers.get("Retry-After")
    try:
        return max(0.0, float(raw)) if raw is not None else float(body.get("retry_after", 1))
    except (TypeError, ValueError, AttributeError):
        return 1.0


def classify(resp: httpx.Response, *, web_api: bool = False) -> Outcome:
    text = resp.text[:500]
    body: Any = None
    if "json" in resp.headers.get("content-type", ""):
        try:
            body = resp.json()
        except ValueError:
            body = None
    error = body.get("error") if isinstance(body, dict) else None
    error = error or (text.strip() if text.strip() in PERMANENT_ERRORS else None)
    status = resp.status_code
    if status == 429:
        return Outcome("retry_after", status, "rate_limited", _retry_after(resp, body))
    if status >= 500:
        return Outcome("transient", status, error or f"HTTP {status}")
    if status in PERMANENT_STATUS or (error in PERMANENT_ERRORS):
        return Outcome("permanent", status, error or f"HTTP {status}")
    if 200 <= status < 300:
        if web_api and isinstance(body, dict) and not body.get("ok", False):
            err = str(body.get("error") or "not ok")
            return Outcome("retry_after" if err == "ratelimited" else
                           "permanent" if err in PERMANENT_ERRORS else "transient", status, err, 1.0)
        return Outcome("delivered", status, ts=body.get("ts") if isinstance(body, dict) else None)
    return Outcome("permanent", status, error or f"HTTP {status}")


def render(kind: str, n: dict[str, Any], *, idempotency_key: str, options: dict[str, Any],
           thread_ts: str | None = None) -> Any:
    if kind == "slack":
        return slack.build_message(n)
    if kind == "slack_api":
        return slack.build_message(n, thread_ts=thread_ts, channel=options.get("slack_channel"))
    if kind == "webhook":
        return webhook.build_payload(n, idempotency_key=idempotency_key)
    if kind == "alertmanager":
        return alertmanager.build_alerts(n)
    raise ValueError(f"unknown channel kind {kind!r}")


def send(kind: str, secret: str, body: Any, *, idempotency_key: str, timeout: float,
         client: httpx.Client | None = None) -> Outcome:
    """POST `body` to the channel. For slack_api the secret is "<bot token> <api base url>"."""
    headers = {"Idempotency-Key": idempotency_key, "User-Agent": "specwatch-alerts/1"}
    if kind == "slack_api":
        token, _, base = secret.partition(" ")
        url = (base or "https://slack.com").rstrip("/") + "/api/chat.postMessage"
        headers["Authorization"] = f"Bearer {token}"
    elif kind == "alertmanager":
        url = alertmanager.endpoint(secret)
    else:
        url = secret
    own = client is None
    http = client or httpx.Client(timeout=timeout)
    try:
        resp = http.post(url, json=body, headers=headers, timeout=timeout)
        return classify(resp, web_api=kind == "slack_api")
    except NOT_SENT as exc:
        return Outcome("transient", None, f"not sent ({type(exc).__name__})")
    except httpx.TimeoutException as exc:
        return Outcome("in_doubt", None, f"no answer within {timeout:g}s ({type(exc).__name__})")
    except httpx.TransportError as exc:
        return Outcome("in_doubt", None, f"connection lost before the answer ({type(exc).__name__})")
    finally:
        if own:
            http.close()


class SecretBox:
    """Fernet encryption of channel secrets. The key is the settings' secret_key: a Fernet key as is,
    or any other string hashed (SHA-256) into one."""

    def __init__(self, key: str):
        try:
            self._fernet = Fernet(key.encode())
        except (ValueError, TypeError):
            self._fernet = Fernet(base64.urlsafe_b64encode(hashlib.sha256(key.encode()).digest()))

    def encrypt(self, plain: str) -> str:
        return self._fernet.encrypt(plain.encode()).decode()

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken as exc:
            raise ValueError("channel secret cannot be decrypted with the current secret_key") from exc


_URLISH = re.compile(r"https?://[^\s\"'<>]+")


def scrub(text: str) -> str:
    """Any URL in free text replaced by its redacted form (for error messages that may quote one)."""
    return _URLISH.sub(lambda m: redact_url(m.group(0)), text)
