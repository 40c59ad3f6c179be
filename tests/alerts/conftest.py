"""Helpers for alert tests: rules in seconds, a minute of seeded acceptance data, one evaluation."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db.models_alerts import AlertStateRow, AlertTransition, OutboxMessage
from backend.notify.delivery import SecretBox
from backend.services import alerts, outbox
from tests.factories import make_bucket, make_pool

SLACK_URL = "https://hooks.slack.com/services/T0SECRET/B0SECRET/sEcReTsEcReTsEcReT"


def rules(**alpha: Any) -> dict:
    """A small config in seconds: alpha_low 2m/10m, for 2m, keep 2m; stale after 5m."""
    rule = {"name": "alpha-low", "kind": "alpha_low", "threshold": 0.55, "recover_margin": 0.03,
            "short_window": 120, "long_window": 600, "for": 120, "keep_firing_for": 120, "min_drafts": 1000}
    rule.update(alpha)
    return {"version": 1, "rules": [rule, {"name": "stale-data", "kind": "stale_data", "after": 300, "for": 0,
                                           "keep_firing_for": 0}]}


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(_env_file=None, alert_rules_file=tmp_path / "none.yaml", dashboard_base_url="http://dash.local")


def seed_minute(db: Session, pool, end: datetime, rate: float, drafts: float = 1000, k: int = 3):
    """One 60 s bucket ending at `end` with acceptance rate `rate` (D = drafts * K)."""
    return make_bucket(db, pool, end - timedelta(seconds=60), drafts=drafts, draft_tokens=drafts * k,
                       accepted_tokens=rate * drafts * k)


def setup(db: Session, settings: Settings, now: datetime, config: dict | None = None, channel: bool = True, **pool_kw):
    pool = make_pool(db, first_seen=now - timedelta(hours=1), last_seen=now - timedelta(hours=1), **pool_kw)
    alerts.store_config(db, config or rules(), source="test", by="test", now=now)
    if channel:
        outbox.create_channel(db, name="slack-main", kind="slack", url=SLACK_URL, token=None, options={},
                              matchers={}, box=SecretBox(settings.secret_key), now=now)
    return pool


def run_minutes(db: Session, settings: Settings, pool, start: datetime, rates: list[float | None], drafts: float = 1000):
    """For each minute: add the bucket ending then (None: no data), evaluate at that instant."""
    t = start
    for r in rates:
        t += timedelta(seconds=60)
        if r is not None:
            seed_minute(db, pool, t, r, drafts)
        alerts.evaluate(db, settings=settings, now=t)
    return t


def outbox_rows(db: Session) -> list[OutboxMessage]:
    return list(db.scalars(select(OutboxMessage).order_by(OutboxMessage.id)))


def state(db: Session, rule: str = "alpha-low", traffic_class: str = "chat") -> AlertStateRow | None:
    return next((s for s in db.scalars(select(AlertStateRow)) if s.rule == rule
                 and s.labels.get("traffic_class") == traffic_class), None)


def transitions(db: Session) -> list[AlertTransition]:
    return list(db.scalars(select(AlertTransition).order_by(AlertTransition.id)))
