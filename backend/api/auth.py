"""Access control for the alerting endpoints: who is calling (a principal with a role) and what the role
may do. Roles are ordered: viewer < operator (silence, acknowledge) < admin (channels, rules, tokens). A separate
``ingest`` role may only POST per-request records (/requests; admin may too) and read nothing; a separate
``gate`` role may only read the progressive-delivery gate (/gate, /gate/flagger; viewers and above may too).

Two modes (settings.auth_mode):
* ``token``: ``Authorization: Bearer sw_...``. Tokens are 256-bit random strings, stored only as their
  SHA-256 (a slow KDF adds nothing for random tokens of this length); shown once when created.
* ``trusted-header``: behind a reverse proxy that authenticates users and sets ``X-Forwarded-User``
  (and optionally ``X-Forwarded-Role``; viewer when absent). The headers count only on a request whose
  TCP peer is in ``auth_trusted_proxies`` (CIDRs; loopback by default) or that carries the shared secret
  ``auth_proxy_secret`` in ``auth_proxy_secret_header``; anything else is 401, whatever it claims.

No credentials: 401 (with ``WWW-Authenticate: Bearer``). Known caller, insufficient role: 403.

Reads need a viewer by default. ``settings.anonymous_read`` lets a caller without a credential read the
aggregate endpoints (``read_aggregate``) as a viewer; the per-request endpoints (request ids, tenant labels),
alerts, channels and tokens always need a credential. A request with a body is checked from its headers
before the body is read (backend.api.auth_gate).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.dependencies.models import Dependant
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from backend.api.deps import NowDep, SessionDep, SettingsDep
from backend.config import Settings
from backend.db import alert_repo as repo
from backend.db.models_alerts import ApiToken

ROLES = {"ingest": 0, "gate": 0, "viewer": 1, "operator": 2, "admin": 3}
INGEST_ROLES = ("ingest", "admin")  # may POST per-request records; an ingest token may do nothing else
GATE_ROLES = ("gate", "viewer", "operator", "admin")  # may read the gate; a gate token may do nothing else
TOKEN_PREFIX = "sw_"
TOUCH_EVERY = timedelta(minutes=1)  # a token's last_used_at is updated at most this often
PRINCIPAL_KEY = "specwatch_principal"  # request.state: the caller AuthBeforeBody found


@dataclass(frozen=True)
class Principal:
    name: str
    role: str
    token_id: int | None = None

    @property
    def sender(self) -> str:
        """Who posts per-request records, for the distinct-models cap: the token, or the proxy's user."""
        return f"token:{self.token_id}" if self.token_id is not None else f"user:{self.name}"


ANONYMOUS = Principal("anonymous", "viewer")  # a caller without a credential, with settings.anonymous_read


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


def _presented(request: Request, settings: Settings) -> bool:
    """The request carries a credential of the mode (valid or not): anything else is an anonymous caller."""
    if settings.auth_mode == "trusted-header":
        return bool(request.headers.get(settings.auth_header, "").strip())
    return bool(request.headers.get("Authorization", "").strip())


def _missing(settings: Settings) -> HTTPException:
    if settings.auth_mode == "trusted-header":
        return _unauthorized(f"missing {settings.auth_header} header from the trusted proxy")
    return _unauthorized("missing bearer token")


def _lookup(session: Session, request: Request, settings: Settings, now: datetime) -> Principal:
    """The caller a presented credential names (401 when it names none)."""
    if settings.auth_mode == "trusted-header":
        if not from_trusted_proxy(request, settings):
            raise _unauthorized(f"{settings.auth_header} is trusted only from the proxies in "
                                f"SPECWATCH_AUTH_TRUSTED_PROXIES or with the proxy secret header")
        user = request.headers.get(settings.auth_header, "").strip()
        role = request.headers.get(settings.auth_role_header, "viewer").strip().lower()
        if role not in ROLES:
            raise HTTPException(status_code=403, detail=f"unknown role {role!r}")
        return Principal(user, role)
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise _unauthorized("missing bearer token")
    return token_principal(session, token, now)


def token_principal(session: Session, token: str, now: datetime) -> Principal:
    """The caller a bearer token names: 401 when it names none (unknown, revoked or expired)."""
    row = repo.token_by_hash(session, hash_token(token.strip()))
    if row is None:
        raise _unauthorized("invalid or revoked token")
    if row.expires_at is not None and row.expires_at <= now:
        raise _unauthorized("token expired")
    if row.last_used_at is None or row.last_used_at <= now - TOUCH_EVERY:
        repo.touch_token(session, row.id, now)  # at most once a minute: reads must not each write a row
    return Principal(row.name, row.role, row.id)


async def credentials(request: Request, session: SessionDep, settings: SettingsDep, now: NowDep) -> Principal | None:
    """The caller, or None when the request carries no credential (401 for one that names nobody). Known
    already when AuthBeforeBody checked the request before its body; the database is asked (in a worker
    thread) only when a token is presented."""
    state = request.scope.get("state") or {}
    if PRINCIPAL_KEY in state:
        return state[PRINCIPAL_KEY]
    if not _presented(request, settings):
        return None
    if settings.auth_mode == "trusted-header":
        return _lookup(session, request, settings, now)  # no I/O
    return await run_in_threadpool(_lookup, session, request, settings, now)


async def current_principal(principal: Annotated[Principal | None, Depends(credentials)],
                            settings: SettingsDep) -> Principal:
    """The caller; 401 without a credential."""
    if principal is None:
        raise _missing(settings)
    return principal


@dataclass(frozen=True)
class Policy:
    """Who may call an endpoint: roles at least `role` (or exactly those of `roles`); `anonymous`: also a
    caller without a credential, as a viewer, when settings.anonymous_read is on. One policy serves the
    endpoint's dependency and AuthBeforeBody, so both decide alike."""

    role: str = "viewer"
    roles: tuple[str, ...] = ()
    anonymous: bool = False

    def check(self, principal: Principal | None, settings: Settings) -> Principal:
        if principal is None:
            if self.anonymous and settings.anonymous_read:
                return ANONYMOUS
            raise _missing(settings)
        if self.roles:
            if principal.role not in self.roles:
                raise HTTPException(status_code=403, detail=f"requires role {' or '.join(self.roles)} "
                                                            f"(you are {principal.role})")
        elif ROLES[principal.role] < ROLES[self.role]:
            raise HTTPException(status_code=403, detail=f"requires role {self.role} (you are {principal.role})")
        return principal


def _guard(policy: Policy):
    async def check(principal: Annotated[Principal | None, Depends(credentials)], settings: SettingsDep) -> Principal:
        return policy.check(principal, settings)

    check.policy = policy  # type: ignore[attr-defined]  # read by AuthBeforeBody
    return check


def require(role: str):
    return _guard(Policy(role=role))


require_ingest = _guard(Policy(roles=INGEST_ROLES))
# the aggregate reads (fleet, summaries, capacity, calculators, reports, /metrics): a viewer, or anyone when
# settings.anonymous_read is on. Never the per-request endpoints: request ids and tenant labels
read_aggregate = _guard(Policy(role="viewer", anonymous=True))
# the progressive-delivery gate (backend.api.routes.gates): a gate token, a viewer or above; anyone with
# settings.anonymous_read, like the aggregates it summarises
GATE_POLICY = Policy(roles=GATE_ROLES, anonymous=True)
read_gate = _guard(GATE_POLICY)


def policies(dependant: Dependant) -> list[Policy]:
    """Every Policy an endpoint's dependencies apply."""
    found = [p] if (p := getattr(dependant.call, "policy", None)) is not None else []
    for dep in dependant.dependencies:
        found.extend(policies(dep))
    return found


Ingester = Annotated[Principal, Depends(require_ingest)]
Viewer = Annotated[Principal, Depends(require("viewer"))]
AggregateReader = Annotated[Principal, Depends(read_aggregate)]
Operator = Annotated[Principal, Depends(require("operator"))]
Admin = Annotated[Principal, Depends(require("admin"))]
