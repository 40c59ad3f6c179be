"""A fleet row tells the truth now: a pending or firing alert of its pool is on the row (state, rule, value vs
threshold, the short window's alpha) and sorts it first, also when /fleet is served from a stored snapshot;
"below threshold" is the class's alpha_low threshold, as the alert evaluation reads it; the sparkline's
last minutes are fine enough to show a drop."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.domain.alert_config import parse_config
from backend.services import alerts, fleet
from tests.factories import make_bucket, make_pool

URL = "/api/v1/fleet"


def rules(**alpha) -> dict:
    """alpha_low on 5 min and 10 min (fires at once), code's threshold 0.45, stale after 5 min; the rules file
    order puts the page rule first."""
    rule = {"name": "alpha-low", "kind": "alpha_low", "severity": "page", "threshold": 0.55, "recover_margin": 0.03,
            "short_window": 300, "long_window": 600, "for": 0, "keep_firing_for": 120, "min_drafts": 1000,
            "overrides": [{"match": {"traffic_class": "code"}, "threshold": 0.45}]}
    rule.update(alpha)
    return {"version": 1, "rules": [rule, {"name": "stale-data", "kind": "stale_data", "after": 300, "for": 0,
                                           "keep_firing_for": 0}]}


def minutes(db: Session, pool, end: datetime, rates: list[float], drafts: float = 1000, k: int = 3) -> None:
    """One 60 s bucket per rate, the last ending at `end`."""
    for i, r in enumerate(rates):
        start = end - timedelta(seconds=60 * (len(rates) - i))
        make_bucket(db, pool, start, drafts=drafts, draft_tokens=drafts * k, accepted_tokens=r * drafts * k,
                    running_mean=4.0)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(_env_file=None, alert_rules_file=tmp_path / "none.yaml")


@pytest.fixture
def incident(db, now, settings):
    """llama-70b chat: 0.70 for 50 min, then 0.30 for the last 10 (the hour reads 0.633: healthy by the
    window's numbers), code steady at 0.60; the evaluation at `now` fires alpha-low on chat."""
    chat = make_pool(db, traffic_class="chat", first_seen=now - timedelta(hours=2), last_seen=now)
    code = make_pool(db, traffic_class="code", first_seen=now - timedelta(hours=2), last_seen=now)
    minutes(db, chat, now, [0.7] * 50 + [0.3] * 10)
    minutes(db, code, now, [0.6] * 60)
    alerts.store_config(db, rules(), source="test", by="test", now=now)
    return chat, code


def _rows(body: dict) -> dict[str, dict]:
    return {r["traffic_class"]: r for r in body["rows"]}


def _check_firing(row: dict, minutes_low: int = 10) -> None:
    """The window's rate: 50 minutes at 0.7 and `minutes_low` at 0.3 (a snapshot taken 30 s early has 9)."""
    assert row["state"] == "firing" and row["data_state"] == "healthy"
    assert row["acceptance_rate"] == pytest.approx((50 * 0.7 + minutes_low * 0.3) / (50 + minutes_low))
    (alert,) = row["alerts"]
    assert alert["rule"] == "alpha-low" and alert["kind"] == "alpha_low" and alert["severity"] == "page"
    assert alert["state"] == "firing"
    assert alert["value"] == pytest.approx(0.3) and alert["threshold"] == pytest.approx(0.55)
    assert alert["alpha_short"] == pytest.approx(0.3) and alert["short_window_seconds"] == 300
    assert alert["since"] == "2026-11-30T12:00:00Z"
    assert row["alpha_threshold"] == pytest.approx(0.55)


def test_a_firing_alert_is_on_its_row_and_sorts_it_first(client, db, now, settings, incident):
    before = _rows(client.get(URL, params={"window": "1h"}).json())
    assert before["chat"]["state"] == "healthy" and before["chat"]["alerts"] == []
    counts = alerts.evaluate(db, settings=settings, now=now)
    assert counts["transitions"] >= 1
    body = client.get(URL, params={"window": "1h"}).json()
    rows = _rows(body)
    _check_firing(rows["chat"])
    assert rows["code"]["state"] == "healthy" and rows["code"]["alerts"] == []
    assert rows["code"]["alpha_threshold"] == pytest.approx(0.45)
    # the model's mixed traffic has its own alert (0.45 over both classes' last 10 min is below 0.55)
    assert rows["mixed"]["state"] == "firing" and rows["mixed"]["alerts"][0]["value"] == pytest.approx(0.45)
    page = client.get(URL, params={"window": "1h", "sort": "state"}).json()
    assert [r["state"] for r in page["rows"]] == ["firing", "firing", "healthy"]
    assert {r["traffic_class"] for r in page["rows"][:2]} == {"chat", "mixed"}
    assert page["state_counts"]["firing"] == 2 and page["state_counts"]["healthy"] == 1
    only = client.get(URL, params={"window": "1h", "state": "firing", "model": "llama-70b"}).json()
    assert {r["traffic_class"] for r in only["rows"]} == {"chat", "mixed"}


def test_a_stored_snapshot_shows_the_alerts_of_the_moment_it_is_served(client, db, now, settings, incident):
    taken = now - timedelta(seconds=30)
    assert 3600 in fleet.refresh_snapshots(db, now=taken, settings=Settings(_env_file=None))
    alerts.evaluate(db, settings=settings, now=now)  # fires after the snapshot was stored
    for params in ({"window": "1h"}, {"window": "1h", "sort": "state"}):
        body = client.get(URL, params=params).json()
        assert body["generated_at"].startswith(taken.strftime("%Y-%m-%dT%H:%M:%S")), params  # the snapshot
        rows = _rows(body)
        _check_firing(rows["chat"], minutes_low=9)
        assert rows["code"]["state"] == "healthy"
    assert client.get(URL, params={"window": "1h", "sort": "state"}).json()["rows"][0]["state"] == "firing"
    # once the alert resolves, the same snapshot reads healthy again: it never kept the alert
    minutes(db, incident[0], now + timedelta(minutes=10), [0.9] * 10)
    for m in range(1, 6):
        alerts.evaluate(db, settings=settings, now=now + timedelta(minutes=2 * m))
    body = client.get(URL, params={"window": "1h"}).json()
    assert body["generated_at"].startswith(taken.strftime("%Y-%m-%dT%H:%M:%S"))
    assert _rows(body)["chat"]["state"] == "healthy" and _rows(body)["chat"]["alerts"] == []


def test_a_pending_alert_reads_pending(client, db, now, settings, incident):
    alerts.store_config(db, rules(**{"for": 300}), source="test", by="test", now=now)
    alerts.evaluate(db, settings=settings, now=now)
    row = _rows(client.get(URL, params={"window": "1h"}).json())["chat"]
    assert row["state"] == "pending" and row["alerts"][0]["state"] == "pending"
    assert row["alerts"][0]["since"] == "2026-11-30T12:00:00Z"


def test_below_threshold_is_the_class_threshold_of_the_rules(client, db, now):
    """code 0.45 (override), chat 0.55: at alpha 0.50 code is not below its threshold, chat is."""
    alerts.store_config(db, rules(), source="test", by="test", now=now)
    for cls in ("chat", "code"):
        pool = make_pool(db, model_name="qwen-32b", traffic_class=cls, first_seen=now - timedelta(hours=2),
                         last_seen=now)
        minutes(db, pool, now, [0.5] * 30)
    rows = _rows(client.get(URL, params={"window": "1h", "model": "qwen-32b"}).json())
    assert rows["chat"]["state"] == "below-threshold" and rows["chat"]["alpha_threshold"] == pytest.approx(0.55)
    assert rows["code"]["state"] == "healthy" and rows["code"]["alpha_threshold"] == pytest.approx(0.45)
    assert rows["chat"]["acceptance_rate"] == rows["code"]["acceptance_rate"] == pytest.approx(0.5)


def test_the_threshold_is_the_evaluators():
    """The first alpha_low rule that selects the row, after its overrides (Rule.value); none: None."""
    cfg = parse_config({"version": 1, "rules": [
        {"name": "only-llama", "kind": "alpha_low", "threshold": 0.6, "match": {"model": "llama-*"}},
        rules()["rules"][0],
        {"name": "ticket", "kind": "alpha_low", "threshold": 0.7},
    ]})
    assert cfg.alpha_threshold({"model": "llama-70b", "traffic_class": "code", "spec_mode": "eagle3"}) == 0.6
    assert cfg.alpha_threshold({"model": "qwen", "traffic_class": "code", "spec_mode": "eagle3"}) == 0.45
    assert cfg.alpha_threshold({"model": "qwen", "traffic_class": "mixed", "spec_mode": "eagle3"}) == 0.55
    stale_only = parse_config({"version": 1, "rules": [rules()["rules"][1]]})
    assert stale_only.alpha_threshold({"model": "qwen", "traffic_class": "chat", "spec_mode": "eagle3"}) is None


def test_the_sparkline_shows_a_drop_in_the_last_15_minutes(client, db, now):
    """0.70 for 23 h 45 min, 0.30 for the last 15 min: the last three points (5 min each) read 0.30 and the
    line ends at now; the step before them still reads 0.70."""
    pool = make_pool(db, traffic_class="chat", first_seen=now - timedelta(days=1), last_seen=now)
    minutes(db, pool, now - timedelta(minutes=15), [0.7] * 60, drafts=100)
    minutes(db, pool, now, [0.3] * 15, drafts=100)
    spark = _rows(client.get(URL, params={"window": "1h", "live": "true"}).json())["chat"]["sparkline"]
    assert spark["t"][-1] == "2026-11-30T12:00:00Z" and spark["fine_step_seconds"] == 300
    assert spark["acceptance_rate"][-3:] == [pytest.approx(0.3)] * 3
    assert spark["acceptance_rate"][-4] == pytest.approx(0.7)
    assert spark["acceptance_rate"][-13] == pytest.approx(0.7)  # (10:30, 11:00]: the last 30-min step
