"""Alerts, their history (the transitions with the values that caused them), acknowledgements,
silences and the rules in force. Viewers read; operators silence and acknowledge; admins change rules."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

import yaml
from fastapi import APIRouter, Body, HTTPException, Query
from pydantic import BaseModel, Field, field_validator

from backend.api.auth import Admin, Operator, Viewer
from backend.api.deps import MAX_ID, IntPathId, NowDep, PathId, SessionDep
from backend.api.routes.shared import FromRow
from backend.db import alert_repo as repo
from backend.db.models_alerts import AlertRuleConfig
from backend.domain import safe_yaml
from backend.domain.alert_config import ConfigError, parse_config
from backend.schemas import AlertRead, ErrorRead, SilenceRead, TransitionRead
from backend.services import alerts

router = APIRouter(tags=["alerts"])
SILENCE_LABELS = ("model", "traffic_class", "spec_mode", "rule", "channel", "replica")


class AckCreate(BaseModel):
    comment: str = ""


class AckRead(FromRow):
    id: int
    alert_id: int
    by: str
    comment: str
    at: datetime


class SilenceCreate(BaseModel):
    matchers: dict[str, str] = Field(description="Label -> value or glob; labels: " + ", ".join(SILENCE_LABELS))
    reason: str = Field(min_length=1)
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    duration_seconds: float | None = Field(None, gt=0)

    @field_validator("matchers")
    @classmethod
    def _matchers(cls, v: dict[str, str]) -> dict[str, str]:
        if not v:
            raise ValueError("at least one matcher is required")
        for k, val in v.items():
            if k not in SILENCE_LABELS:
                raise ValueError(f"matchers.{k}: unknown label (one of {', '.join(SILENCE_LABELS)})")
            if not val:
                raise ValueError(f"matchers.{k}: empty value")
        return v


class RulesRead(FromRow):
    id: int
    version: int
    source: str
    created_by: str | None = None
    created_at: datetime
    content: dict[str, Any]


class CheckRead(BaseModel):
    valid: bool
    errors: list[str] = Field(default_factory=list)


@router.get("/alerts", response_model=list[AlertRead], summary="Alerts that are not inactive")
def list_alerts(session: SessionDep, now: NowDep, _: Viewer) -> list[AlertRead]:
    return [AlertRead.model_validate(s).model_copy(update={"silenced_by": sid})
            for s, sid in alerts.states_view(session, now=now)]


@router.get("/alerts/history", response_model=list[TransitionRead], summary="Transitions, newest first")
def alert_history(session: SessionDep, _: Viewer,
                  alert_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 200) -> list[TransitionRead]:
    return [TransitionRead(**{k: getattr(t, k) for k in TransitionRead.model_fields if hasattr(t, k)},
                           rule=s.rule, labels=s.labels)
            for t, s in repo.transitions(session, alert_id=alert_id, limit=limit)]


@router.post("/alerts/{alert_id}/ack", response_model=AckRead, status_code=201, summary="Acknowledge an alert")
def ack_alert(alert_id: PathId, session: SessionDep, now: NowDep, who: Operator,
              body: Annotated[AckCreate | None, Body(description="Optional: a comment. No body acknowledges "
                                                                 "without one.")] = None) -> AckRead:
    comment = body.comment if body is not None else ""
    try:
        return AckRead.model_validate(alerts.acknowledge(session, alert_id, by=who.name, comment=comment, now=now))
    except alerts.AlertNotFound as exc:
        raise HTTPException(404, f"{exc} not found") from None


@router.get("/silences", response_model=list[SilenceRead])
def list_silences(session: SessionDep, now: NowDep, _: Viewer) -> list[SilenceRead]:
    return [SilenceRead.model_validate(s).model_copy(update={"active": s.starts_at <= now < s.ends_at})
            for s in repo.silences(session)]


@router.post("/silences", response_model=SilenceRead, status_code=201)
def create_silence(body: SilenceCreate, session: SessionDep, now: NowDep, who: Operator) -> SilenceRead:
    start = body.starts_at or now
    end = body.ends_at or (start + timedelta(seconds=body.duration_seconds) if body.duration_seconds else None)
    if end is None or end <= start:
        raise HTTPException(422, "give ends_at after starts_at, or duration_seconds")
    s = alerts.create_silence(session, matchers=body.matchers, starts_at=start, ends_at=end, by=who.name,
                              reason=body.reason, now=now)
    return SilenceRead.model_validate(s).model_copy(update={"active": start <= now < end})


@router.delete("/silences/{silence_id}", response_model=SilenceRead, summary="Expire a silence now")
def expire_silence(silence_id: IntPathId, session: SessionDep, now: NowDep, who: Operator) -> SilenceRead:
    try:
        return SilenceRead.model_validate(alerts.expire_silence(session, silence_id, by=who.name, now=now))
    except alerts.AlertNotFound as exc:
        raise HTTPException(404, f"{exc} not found") from None


@router.get("/alerts/rules", response_model=RulesRead, summary="The rules in force",
            responses={404: {"model": ErrorRead, "description": "No rules stored yet"}})
def get_rules(session: SessionDep, _: Viewer) -> RulesRead:
    row = repo.latest_config(session)
    if row is None:
        raise HTTPException(404, "no rules stored yet (the first evaluation imports the rules file)")
    return RulesRead.model_validate(row)


def _parse_body(body: Any) -> Any:
    if isinstance(body, dict) and set(body) == {"yaml"}:
        try:
            return safe_yaml.load(body["yaml"]) if isinstance(body["yaml"], str) else body["yaml"]
        except yaml.YAMLError as exc:
            raise HTTPException(422, {"valid": False, "errors": [f"not valid YAML: {exc}"]}) from None
    return body


@router.post("/alerts/rules/check", response_model=CheckRead, summary="Validate rules without storing them")
def check_rules(_: Viewer, body: Annotated[Any, Body()]) -> CheckRead:
    try:
        parse_config(_parse_body(body))
    except ConfigError as exc:
        return CheckRead(valid=False, errors=exc.errors)
    return CheckRead(valid=True)


@router.put("/alerts/rules", response_model=RulesRead, summary="Store a new rules version (admin)",
            responses={422: {"description": "Invalid rules; `errors` names each field"}})
def put_rules(session: SessionDep, now: NowDep, who: Admin, body: Annotated[Any, Body()]) -> RulesRead:
    raw = _parse_body(body)
    try:
        config_id = alerts.store_config(session, raw, source="api", by=who.name, now=now)
    except ConfigError as exc:
        raise HTTPException(422, {"valid": False, "errors": exc.errors}) from None
    return RulesRead.model_validate(session.get(AlertRuleConfig, config_id))
