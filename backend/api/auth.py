"""Access control for the alerting endpoints: who is calling (a principal with a role) and what the role
may do. Roles are ordered: viewer < operator (silence, acknowledge) < admin (channels, rules, tokens). A separate
``ingest`` role may only POST per-request records (/requests; admin may too) and read nothing.

Two modes (settings.auth_mode):
* ``token``: ``Authorization: Bearer sw_...``. Tokens are 256-bit random strings, stored only as their
  SHA-256 (a slow KDF adds nothing for random tokens of this length); shown once when created.
* ``trusted-header``: behind a reverse proxy that authenticates users and sets ``X-Forwarded-User``
  (and optionally ``X-Forwarded-Role``; viewer when absent). Only for deployments where the API is
  reachable through that proxy alone.

No credentials: 401 (with ``WWW-Authenticate: Bearer``). Known caller, insufficient role: 403.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session

from backend.api.deps import NowDep, SessionDep, SettingsDep
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


def create_token(session: Session, *, name: str, role: str, by: str | None, now: datetime) -> tuple[ApiToken, str]:
    """A new token row and the plaintext (returned once, never stored)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)}")
    token = new_token()
    row = repo.add(session, ApiToken(name=name, role=role, token_hash=hash_token(token), prefix=token[:8],
                                     created_by=by, created_at=now))
    return row, token


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": "Bearer"})


def current_principal(request: Request, session: SessionDep, settings: SettingsDep, now: NowDep) -> Principal:
    if settings.auth_mode == "trusted-header":
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
