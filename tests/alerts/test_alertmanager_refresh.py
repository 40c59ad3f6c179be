"""Firing alerts are re-sent to Alertmanager channels once per `alertmanager_resend_seconds`: Alertmanager
resolves an alert by itself once its `endsAt` passes, so without re-sends a long incident would show resolved
there while specwatch still has it firing (tests/peers/test_alertmanager.py shows it on a real one)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from pydantic import ValidationError

from backend.config import Settings
from backend.notify import alertmanager
from backend.notify.delivery import SecretBox, render
from backend.services import alerts, outbox
from tests.alerts.conftest import outbox_rows, run_minutes, setup, state


def channel(db, settings: Settings, now: datetime, name: str, kind: str = "alertmanager", **matchers: str):
    return outbox.create_channel(db, name=name, kind=kind, url=f"http://{name}.example:9093", token=None, options={},
                                 matchers=matchers, box=SecretBox(settings.secret_key), now=now)


def refreshes(db, ch=None) -> list:
    return [m for m in outbox_rows(db) if m.kind == "refresh" and (ch is None or m.channel_id == ch.id)]


def test_firing_alerts_are_re_sent_once_per_period_to_each_alertmanager_channel(db, settings, now):
    pool = setup(db, settings, now, channel=True)  # a Slack channel too: it gets no refresh
    am = channel(db, settings, now, "am")
    other = channel(db, settings, now, "am-code", traffic_class="code")  # routes nothing of this chat pool
    t = run_minutes(db, settings, pool, now - timedelta(hours=1), [0.45] * 14)
    assert state(db).phase == "firing" and state(db).notified_firing
    fired = [m for m in outbox_rows(db) if m.kind == "firing" and m.channel_id == am.id]
    assert len(fired) == 1
    period = settings.alertmanager_resend_seconds
    sent = refreshes(db)
    # one per channel and period while it fires (14 minutes at a 10-minute period: 2 or 3 periods)
    assert sent and {m.channel_id for m in sent} == {am.id}
    slots = [int(datetime.fromisoformat(m.payload["at"]).timestamp() // period) for m in sent]
    assert len(slots) == len(set(slots))
    # again in the same period: nothing more
    alerts.evaluate(db, settings=settings, now=t)
    assert len(refreshes(db)) == len(sent)
    # the re-send keeps the alert's start and moves its end 4 h past the re-send
    [a] = render("alertmanager", sent[-1].payload, idempotency_key="k", options={})
    assert a["labels"] == {"alertname": "alpha-low", "severity": "warning", "source": "specwatch",
                           "model": pool.model_name, "traffic_class": "chat", "spec_mode": "eagle3"}
    assert a["startsAt"] == fired[0].payload["items"][0]["since"]
    assert datetime.fromisoformat(a["endsAt"]) == datetime.fromisoformat(sent[-1].payload["at"]) + alertmanager.FIRING_TTL
    # resolved: no more re-sends
    t = run_minutes(db, settings, pool, t, [0.70] * 14)
    assert state(db).phase == "resolved"
    count = len(refreshes(db))
    run_minutes(db, settings, pool, t, [0.70] * 21)
    assert len(refreshes(db)) == count
    assert refreshes(db, other) == []


@pytest.mark.parametrize("bad", ["0", "-5", "3601"])
def test_resend_period_outside_its_range_is_refused(bad):
    with pytest.raises(ValidationError, match="alertmanager_resend_seconds"):
        Settings(_env_file=None, alertmanager_resend_seconds=bad)


def test_an_internal_alert_is_re_sent_to_every_alertmanager_channel_but_its_own(db, settings, now):
    am, other = channel(db, settings, now, "am"), channel(db, settings, now, "am-2", traffic_class="code")
    outbox.raise_internal(db, name="channel-broken", labels={"channel": "am"}, firing=True, reason="HTTP 404",
                          now=now, settings=settings, exclude_channel=am.id)
    outbox.enqueue_refresh(db, now=now, settings=settings)
    assert refreshes(db, am) == []
    [sent] = refreshes(db, other)
    assert [i["labels"] for i in sent.payload["items"]] == [{"channel": "am", "rule": "channel-broken"}]
