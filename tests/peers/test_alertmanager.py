"""Alertmanager as a receiver, end to end: the simulator's two pools of one model accept too few drafts, a
real Celery worker and beat scrape them, evaluate the rules and deliver through an `alertmanager` channel
to a real `prometheus-alertmanager` (Debian package), which groups the two alerts by its own route
(`group_by: [alertname, model]`) and notifies a local webhook receiver; then both pools recover, specwatch
forwards the resolve, and Alertmanager notifies the resolved group.

Checked on Alertmanager's side: its API lists both alerts with specwatch's labels and annotations, in one
group of its route; a channel test message reaches the webhook as a short-lived test alert; the webhook receives the grouped firing notification and the resolved one; each
alert's `endsAt` is the moment specwatch resolved it, and the API no longer lists them. While they fire with
no transition, specwatch re-sends them (`SPECWATCH_ALERTMANAGER_RESEND_SECONDS`) and Alertmanager moves their
`endsAt` on: without that it would resolve them by itself once the first `endsAt` passed."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from backend.api.app import create_app
from backend.api.auth import create_token
from backend.cli.demo import scrape_targets
from backend.config import Settings
from backend.db.models_alerts import AlertStateRow, AlertTransition, OutboxMessage
from backend.db.session import session_scope
from backend.notify import alertmanager
from backend.notify.delivery import SecretBox
from backend.schemas.summary import MIXED
from backend.services import alerts, outbox
from backend.sim.server import start_in_thread
from tests.alerts.test_e2e import base_env, start_worker
from tests.support.peers import AlertmanagerServer, WebhookSink
from tests.support.skips import require_binary
from tests.support.stack import env_for, factory_for, flush_redis, start_beat, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.peers]
MODEL = "m-alertmanager"
POOLS = ("chat-eagle3", "code-eagle3")
RULES = {"version": 1, "rules": [
    {"name": "alpha-low", "kind": "alpha_low", "threshold": 0.55, "recover_margin": 0.03, "short_window": 3,
     "long_window": 8, "for": 2, "keep_firing_for": 2, "min_drafts": 100, "severity": "page",
     "runbook": "https://runbooks.example/alpha-low"}]}
CLASSES = sorted(["chat", "code", MIXED])  # the two pools and their mix (one alert each)
RESEND = 2  # seconds between re-sends of the firing alerts
RECOVER_AT = 1e6  # far in the future: brought forward once Alertmanager shows both alerts firing
DASHBOARD = "http://dash.example"


def scenario() -> dict:
    pools = [{"id": pid, "traffic_class": pid.split("-")[0], "spec_mode": "eagle3", "k": 3,
              "acceptance": {"mode": "rate", "r": 0.30}} for pid in POOLS]
    return {"name": "two-low", "tick": 0.1, "defaults": {"model": MODEL, "concurrency": 8}, "pools": pools,
            "events": [{"pool": list(POOLS), "at": RECOVER_AT, "acceptance": {"mode": "rate", "r": 0.85}}]}


def am_config(hook_url: str) -> dict:
    return {"route": {"receiver": "hook", "group_by": ["alertname", "model"], "group_wait": "2s",
                      "group_interval": "2s", "repeat_interval": "1h"},
            "receivers": [{"name": "hook", "webhook_configs": [{"url": hook_url, "send_resolved": True}]}]}


def recover_now(handle, lead: float = 1.0) -> None:
    """Bring both pools' recovery forward to `lead` seconds of simulated time from now."""
    sim = handle.sim
    with sim.lock:
        sim.fleet.advance_to(sim.tick_at(sim.clock()))
        at = sim.fleet.n + max(1, round(lead / sim.tick))
        for pool in sim.fleet.pools:
            assert pool.changes, "the scenario has a recovery event to bring forward"
            pool.changes = [(at, order, acc, conc) for _, order, acc, conc in pool.changes]


def prepare(db_url: str, am_url: str) -> tuple[int, str]:
    """Rules, the channel and an admin token: (channel id, token)."""
    factory = factory_for(db_url)
    now = datetime.now(UTC)
    with session_scope(factory) as s:
        alerts.store_config(s, RULES, source="test", by="test", now=now)
        ch = outbox.create_channel(s, name="alertmanager", kind="alertmanager", url=am_url, token=None, options={},
                                   matchers={}, box=SecretBox(Settings(_env_file=None).secret_key), now=now).id
        _, token = create_token(s, name="admin", role="admin", by=None, now=now)
    factory.kw["bind"].dispose()
    return ch, token


def queue_test_message(db_url: str, channel_id: int, token: str) -> None:
    """What an admin's `POST /api/v1/channels/{id}/test` does."""
    with TestClient(create_app(Settings(_env_file=None, database_url=db_url))) as api:
        resp = api.post(f"/api/v1/channels/{channel_id}/test", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 202, resp.text


def resolved_alerts(notifications: list[dict]) -> dict[str, dict]:
    """{traffic_class: the alert} of this model's alerts that some notification reported resolved."""
    return {a["labels"]["traffic_class"]: a for n in notifications for a in n["alerts"]
            if a["status"] == "resolved" and a["labels"].get("model") == MODEL}


def ours(am: AlertmanagerServer) -> list[dict]:
    return [a for a in am.alerts() if a["labels"].get("model") == MODEL]


def resolved_at(db_url: str) -> tuple[dict[str, datetime], list[str]]:
    """({traffic_class: when specwatch resolved its alert}, the outbox's statuses)."""
    factory = factory_for(db_url)
    with session_scope(factory) as s:
        out = {}
        for t in s.scalars(select(AlertTransition).where(AlertTransition.notification == "resolved")):
            out[s.get(AlertStateRow, t.alert_id).labels["traffic_class"]] = t.at
        statuses = [m.status for m in s.scalars(select(OutboxMessage))]
    factory.kw["bind"].dispose()
    return out, statuses


def parse(ts: str) -> datetime:
    """Alertmanager's RFC 3339 times (nanoseconds or none, `Z` or an offset); Python reads microseconds."""
    m = re.fullmatch(r"([^.]+?)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", ts)
    assert m, ts
    return datetime.fromisoformat(f"{m[1]}.{((m[2] or '') + '000000')[:6]}{m[3].replace('Z', '+00:00')}")


def test_alertmanager_groups_the_forwarded_alerts_and_resolves_them(fresh_db_url, redis_url, tmp_path):
    binary = require_binary("prometheus-alertmanager", "alertmanager")
    flush_redis(redis_url)
    with WebhookSink() as hook, AlertmanagerServer(am_config(hook.url), binary, tmp_path / "am") as am, \
            start_in_thread(scenario(), seed=4) as sim:
        channel_id, token = prepare(fresh_db_url, am.url)
        env = env_for(base_env(fresh_db_url, redis_url, source="scrape", bucket_seconds=1, scrape_interval_seconds=1,
                               settle_seconds=1, stale_after_seconds=30, dashboard_base_url=DASHBOARD,
                               alertmanager_resend_seconds=RESEND,
                               scrape_targets=json.dumps(scrape_targets(sim.url))))
        worker, beat = start_worker(env, tmp_path), start_beat(env, tmp_path)
        procs = (worker, beat, am.proc)
        try:
            # the channel's test message: a short-lived test alert, routed and notified like any other
            queue_test_message(fresh_db_url, channel_id, token)
            tested = wait_until(lambda: [n for n in hook.notifications()
                                         if n["groupLabels"].get("alertname") == alertmanager.TEST_ALERTNAME], 120,
                                "the test alert's notification", procs, seen=lambda: (am.alerts(), hook.notifications()))
            firing = wait_until(lambda: len(ours(am)) == len(CLASSES) and ours(am), 300, "the alerts in Alertmanager", procs,
                                seen=lambda: (am.alerts(), hook.notifications()))
            groups = wait_until(lambda: [g for g in am.groups() if g["labels"].get("model") == MODEL
                                         and len(g["alerts"]) == len(CLASSES)], 120, "one group of the alerts", procs,
                                seen=am.groups)
            grouped = wait_until(lambda: [n for n in hook.notifications() if n["status"] == "firing"
                                          and len(n["alerts"]) == len(CLASSES)], 120, "the grouped firing notification",
                                 procs, seen=hook.notifications)
            # with no transition, the firing alerts are re-sent: Alertmanager moves their endsAt on
            ends = {a["fingerprint"]: parse(a["endsAt"]) for a in ours(am)}
            wait_until(lambda: all(parse(a["endsAt"]) > ends[a["fingerprint"]] for a in ours(am)), 120,
                       "the re-sent alerts' later endsAt", procs, seen=lambda: (ends, ours(am)))
            refreshed = ours(am)
            recover_now(sim)
            # the three resolve on specwatch's evaluations, maybe not the same one: Alertmanager notifies a
            # resolved alert in the group's next flush (inside a "firing" notification while others still fire)
            # and then drops it from the group, so the last notification ("resolved") may hold only the last ones
            done = wait_until(lambda: sorted(resolved_alerts(hook.notifications())) == CLASSES
                              and [n for n in hook.notifications() if n["status"] == "resolved"], 300,
                              "every alert resolved in a notification", procs,
                              seen=lambda: (am.alerts(), hook.notifications()))
            resolved = resolved_alerts(hook.notifications())
            listed_after = ours(am)
        finally:
            worker.stop()
            beat.stop()

    [test_alert] = tested[0]["alerts"]
    assert test_alert["labels"] == {"alertname": "SpecwatchTest", "severity": "info", "source": "specwatch"}
    assert test_alert["status"] == "firing" and test_alert["annotations"]["summary"] == "specwatch test message"
    # the alerts as Alertmanager holds them: specwatch's labels and annotations, active
    by_class = {a["labels"]["traffic_class"]: a for a in firing}
    assert sorted(by_class) == CLASSES
    for klass, a in by_class.items():
        assert a["labels"] == {"alertname": "alpha-low", "severity": "page", "source": "specwatch", "model": MODEL,
                               "traffic_class": klass, "spec_mode": "eagle3"}, a["labels"]
        assert a["status"]["state"] == "active"
        assert a["annotations"]["runbook"] == RULES["rules"][0]["runbook"]
        assert a["annotations"]["threshold"] == "0.55"
        assert float(a["annotations"]["value"]) < 0.55
        assert a["annotations"]["summary"] and a["annotations"]["window"]
        assert a["generatorURL"].startswith(DASHBOARD)
        assert [r["name"] for r in a["receivers"]] == ["hook"]
    # a re-send updates the alerts, never their start
    assert {a["fingerprint"]: a["startsAt"] for a in refreshed} == {a["fingerprint"]: a["startsAt"] for a in firing}
    # grouped by the route, not by specwatch: one group keyed by alertname and model
    assert len(groups) == 1 and groups[0]["labels"] == {"alertname": "alpha-low", "model": MODEL}
    assert groups[0]["receiver"]["name"] == "hook"
    # the webhook got the group in one notification
    first = grouped[0]
    assert first["groupLabels"] == {"alertname": "alpha-low", "model": MODEL}
    assert first["receiver"] == "hook"
    assert sorted(a["labels"]["traffic_class"] for a in first["alerts"]) == CLASSES
    assert all(a["status"] == "firing" for a in first["alerts"])
    # the resolve: forwarded, notified, endsAt = when specwatch resolved it, no longer listed
    last = done[-1]
    assert last["groupLabels"] == {"alertname": "alpha-low", "model": MODEL}
    assert last["alerts"] and all(a["status"] == "resolved" for a in last["alerts"])
    when, statuses = resolved_at(fresh_db_url)
    assert sorted(when) == CLASSES
    for a in resolved.values():
        assert abs((parse(a["endsAt"]) - when[a["labels"]["traffic_class"]]).total_seconds()) < 1e-3, (a, when)
    assert listed_after == []
    assert statuses and all(s == "delivered" for s in statuses), statuses
