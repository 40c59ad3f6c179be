"""Alerts, their transitions and silences, alert-rule checks, and the caller (GET /whoami)."""

from datetime import datetime
from typing import Any

from pydantic import Field

from backend.schemas.common import Wire


class RulesCheckRead(Wire):
    valid: bool
    errors: list[str] = Field(default_factory=list)


class RulesErrorRead(Wire):
    """422 of the alert-rules endpoints: `detail` names each invalid field."""

    detail: RulesCheckRead


class AlertRead(Wire):
    id: int
    rule: str
    kind: str
    severity: str
    labels: dict[str, str]
    phase: str
    pending_since: datetime | None = None
    firing_since: datetime | None = None
    resolved_at: datetime | None = None
    last_eval_at: datetime | None = None
    last_status: str | None = None
    last_value: float | None = None
    last_values: dict[str, Any] | None = None
    incident_id: int | None = None
    silenced_by: int | None = Field(None, description="Id of the silence that currently matches.")
    acked_by: str | None = None
    acked_at: datetime | None = None


class TransitionRead(Wire):
    id: int
    alert_id: int
    rule: str
    labels: dict[str, str]
    at: datetime
    from_phase: str
    to_phase: str
    status: str
    value: float | None = None
    threshold: float | None = None
    reason: str
    values: dict[str, Any] | None = None
    notification: str | None = None
    silence_id: int | None = None


class SilenceRead(Wire):
    id: int
    matchers: dict[str, str]
    starts_at: datetime
    ends_at: datetime
    created_by: str
    reason: str
    created_at: datetime
    expired_by: str | None = None
    active: bool = False


class WhoAmI(Wire):
    name: str
    role: str
