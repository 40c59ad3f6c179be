"""API tokens (admin): create (the plaintext is returned once), list (prefix only), revoke; and whoami."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter, HTTPException, Response
from pydantic import AwareDatetime, BaseModel, Field

from backend.api.auth import Admin, Viewer, create_token
from backend.api.deps import IntPathId, NowDep, SessionDep
from backend.api.routes.shared import FromRow
from backend.db import alert_repo as repo
from backend.schemas import WhoAmI
from backend.services.errors import InvalidParameter

router = APIRouter(tags=["tokens"])


class TokenRead(FromRow):
    id: int
    name: str
    role: str
    prefix: str = Field(description="The first characters, to recognise a token; never the token.")
    created_by: str | None = None
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None
    expires_at: datetime | None = Field(None, description="The token is refused from then on; null: never.")


class TokenCreate(BaseModel):
    name: str = Field(min_length=1, max_length=120)
    role: Literal["ingest", "gate", "viewer", "operator", "admin"] = Field(
        description="viewer < operator < admin; ingest only posts per-request records; gate only reads the "
                    "progressive-delivery gate (/gate, /gate/flagger)")
    expires_at: AwareDatetime | None = Field(None, description="When the token stops working (with a time zone); "
                                                               "must be in the future. Null: never.")


class TokenCreated(TokenRead):
    token: str = Field(description="Shown once; only its SHA-256 is stored.")


@router.get("/whoami", response_model=WhoAmI)
def whoami(who: Viewer) -> WhoAmI:
    return WhoAmI(name=who.name, role=who.role)


@router.get("/tokens", response_model=list[TokenRead])
def list_tokens(session: SessionDep, _: Admin) -> list[TokenRead]:
    return [TokenRead.model_validate(t) for t in repo.tokens(session)]


@router.post("/tokens", response_model=TokenCreated, status_code=201)
def new_token(body: TokenCreate, session: SessionDep, now: NowDep, who: Admin, response: Response) -> TokenCreated:
    """The plaintext token is in this response only: `Cache-Control: no-store` keeps it out of caches."""
    response.headers["Cache-Control"] = "no-store"
    try:
        row, token = create_token(session, name=body.name, role=body.role, by=who.name, now=now,
                                  expires_at=body.expires_at)
    except ValueError as exc:
        raise InvalidParameter(str(exc)) from None
    return TokenCreated(**TokenRead.model_validate(row).model_dump(), token=token)


@router.delete("/tokens/{token_id}", response_model=TokenRead, summary="Revoke a token")
def revoke_token(token_id: IntPathId, session: SessionDep, now: NowDep, _: Admin) -> TokenRead:
    row = repo.get_token(session, token_id)
    if row is None:
        raise HTTPException(404, f"token {token_id} not found")
    row.revoked_at = row.revoked_at or now
    return TokenRead.model_validate(row)
