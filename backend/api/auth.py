"""Access control for the alerting endpoints: who is calling (a principal with a role) and what the role
may do. Roles are ordered: viewer < operator (silence, acknowledge) < admin (channels, rules, tokens). A separate
``ingest`` role may only POST per-request records (/requests; admin may too) and read nothing.

Two modes (settings.auth_mode):
* ``token``: ``Authorization: Bearer sw_...``. Tokens are 256-bit random strings, stored only as their
  SHA-256 (a slow KDF adds nothing for random tokens of this length); shown once when created.
* ``trusted-header``: behind a reverse proxy that authenticates users and sets ``X-Forwarded-User``
  (and optionally ``X-Forwarded-Role``; viewer when absent). The headers count only on a request whose
  TCP peer is in ``auth_trusted_proxies`` (CIDRs; loopback by default) or that carries the shared secret
  ``auth_proxy_secret`` in ``auth_proxy_secret_header``; anything else is 401, whatever it claims.

No credentials: 401 (with ``WWW-Authenticate: Bearer``). Known caller, insufficient role: 403.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session

from backend.api.deps import NowDep, SessionDep, SettingsDep
from backend.config import Settings
from backend.db import alert_repo as repo
from backend.db.models_alerts import ApiToken

ROLES = {"ingest": 0, "viewer": 1, "operator": 2, "admin": 3}
INGEST_ROLES = ("ingest", "admin")  # may POST per-request records; an ingest token may do nothing else
TOKEN_PREFIX = "sw_"


@dataclass(frozen=True)
class Principal:
    name: str
    role: str
    token_id: int | None = None


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, *, name: str, role: str, by: str | None, now: datetime,
                 expires_at: datetime | None = None) -> tuple[ApiToken, str]:
    """A new token row and the plaintext (returned once, never stored); `expires_at` None: never expires."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    if expires_at is not None and expires_at <= now:
        raise ValueError("expires_at must be in the future")
    token = new_token()
    row = repo.add(session, ApiToken(name=name, role=role, token_hash=hash_token(token), prefix=token[:8],
                                     created_by=by, created_at=now, expires_at=expires_at))
    return row, token


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


@lru_cache(maxsize=8)
def _networks(cidrs: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


def from_trusted_proxy(request: Request, settings: Settings) -> bool:
    """The request carries the proxy secret (when one is set), or its TCP peer is in the allowlist."""
    secret = settings.auth_proxy_secret
    given = request.headers.get(settings.auth_proxy_secret_header, "")
    if secret and given and hmac.compare_digest(given.encode(), secret.encode()):
        return True
    if request.client is None:
        return False
    try:
        addr = ipaddress.ip_address(request.client.host)
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return any(addr in net for net in _networks(tuple(settings.auth_trusted_proxies)))


def current_principal(request: Request, session: SessionDep, settings: SettingsDep, now: NowDep) -> Principal:
    if settings.auth_mode == "trusted-header":
        if not from_trusted_proxy(request, settings):
            raise _unauthorized(f"{settings.auth_header} is trusted only from the proxies in "
                                f"SPECWATCH_AUTH_TRUSTED_PROXIES or with the proxy secret header")
        user = request.headers.get(settings.auth_header, "").strip()
        if not user:
            raise _unauthorized(f"missing {settings.auth_header} header from the trusted proxy")
        role = request.headers.get(settings.auth_role_header, "viewer").strip().lower()
        if role not in ROLES:
            raise HTTPException(status_code=403, detail=f"unknown role {role!r}")
        return Principal(user, role)
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthorized("missing bearer token")
    row = repo.token_by_hash(session, hash_token(token.strip()))
    if row is None:
        raise _unauthorized("invalid or revoked token")
    if row.expires_at is not None and row.expires_at <= now:
        raise _unauthorized("token expired")
    repo.touch_token(session, row.id, now)
    return Principal(row.name, row.role, row.id)


def require(role: str):
    def check(principal: Annotated[Principal, Depends(current_principal)]) -> Principal:
        if ROLES[principal.role] < ROLES[role]:
            raise HTTPException(status_code=403, detail=f"requires role {role} (you are {principal.role})")
        return principal

    return check


def require_ingest(principal: Annotated[Principal, Depends(current_principal)]) -> Principal:
    if principal.role not in INGEST_ROLES:
        raise HTTPException(status_code=403, detail=f"requires role ingest or admin (you are {principal.role})")
    return principal


Ingester = Annotated[Principal, Depends(require_ingest)]
Viewer = Annotated[Principal, Depends(require("viewer"))]
Operator = Annotated[Principal, Depends(require("operator"))]
Admin = Annotated[Principal, Depends(require("admin"))]
