"""Notification channels (admin). A channel's URL or bot token is write-only: it is encrypted at rest and
every response shows only its redacted form (scheme and host)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field

from backend.api.auth import Admin, Viewer
from backend.api.deps import IntPathId, NowDep, SessionDep, SettingsDep
from backend.api.routes.shared import FromRow
from backend.db import alert_repo as repo
from backend.db.models_alerts import Channel
from backend.notify.delivery import SecretBox
from backend.services import outbox

router = APIRouter(tags=["channels"])

ChannelKind = Literal["slack", "slack_api", "webhook", "alertmanager"]


class ChannelRead(FromRow):
    id: int
    name: str
    kind: str
    redacted: str = Field(description="Scheme and host only; the URL itself is never returned.")
    options: dict[str, Any]
    matchers: dict[str, str]
    enabled: bool
    broken: bool
    broken_reason: str | None = None
    broken_at: datetime | None = None
    created_at: datetime
    in_doubt: int = Field(0, description="Messages whose delivery was in doubt (sent, no answer).")
    possible_duplicates: int = Field(0, description="Sends made after a doubt (on_doubt: resend): each may "
                                                    "be a duplicate at the receiver.")


class ChannelCreate(BaseModel):
    name: str = Field(min_length=1, max_length=120)
    kind: ChannelKind
    url: str = Field(description="Incoming-webhook URL, webhook URL, Alertmanager base URL or Slack API base.")
    token: str | None = Field(None, description="Bot token (slack_api only).")
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="send_resolved (default true), slack_channel, min_interval, "
                                                "on_doubt (resend | skip; what to do with a message that "
                                                "may have been delivered: re-send once, or give up)")
    matchers: dict[str, str] = Field(default_factory=dict, description="Route only matching alerts (globs).")


class ChannelUpdate(BaseModel):
    url: str | None = None
    token: str | None = None
    options: dict[str, Any] | None = None
    matchers: dict[str, str] | None = None
    enabled: bool | None = None


def _box(request: Request) -> SecretBox:
    return SecretBox(request.app.state.settings.secret_key)


def _get(session, channel_id: int) -> Channel:
    ch = repo.get_channel(session, channel_id)
    if ch is None:
        raise HTTPException(404, f"channel {channel_id} not found")
    return ch


@router.get("/channels", response_model=list[ChannelRead])
def list_channels(session: SessionDep, _: Viewer) -> list[ChannelRead]:
    return [ChannelRead.model_validate(c) for c in repo.channels(session)]


@router.post("/channels", response_model=ChannelRead, status_code=201)
def create_channel(body: ChannelCreate, request: Request, session: SessionDep, now: NowDep, _: Admin) -> ChannelRead:
    try:
        ch = outbox.create_channel(session, name=body.name, kind=body.kind, url=body.url, token=body.token,
                                   options=body.options, matchers=body.matchers, box=_box(request), now=now)
    except outbox.ChannelError as exc:
        raise HTTPException(422, str(exc)) from None
    return ChannelRead.model_validate(ch)


@router.patch("/channels/{channel_id}", response_model=ChannelRead, summary="Change or repair a channel")
def update_channel(channel_id: IntPathId, body: ChannelUpdate, request: Request, session: SessionDep, now: NowDep,
                   settings: SettingsDep, _: Admin) -> ChannelRead:
    ch = _get(session, channel_id)
    try:
        outbox.update_channel(session, ch, url=body.url, token=body.token, options=body.options,
                              matchers=body.matchers, enabled=body.enabled, box=_box(request), now=now,
                              settings=settings)
    except outbox.ChannelError as exc:
        raise HTTPException(422, str(exc)) from None
    return ChannelRead.model_validate(ch)


@router.delete("/channels/{channel_id}", status_code=204)
def delete_channel(channel_id: IntPathId, session: SessionDep, _: Admin) -> None:
    repo.delete_channel(session, _get(session, channel_id))


@router.post("/channels/{channel_id}/test", status_code=202, summary="Queue a test message")
def test_channel(channel_id: IntPathId, session: SessionDep, now: NowDep, who: Admin) -> dict:
    ch = _get(session, channel_id)
    key = f"test-{ch.id}-{now.timestamp():.6f}"
    repo.enqueue(session, idempotency_key=key, channel_id=ch.id, incident_id=None, kind="test",
                 payload={"title": "specwatch test message", "model": None, "at": now.isoformat(),
                          "items": [], "requested_by": who.name},
                 status="pending", attempts=0, next_attempt_at=now, created_at=now, in_doubt=False)
    return {"queued": key}
