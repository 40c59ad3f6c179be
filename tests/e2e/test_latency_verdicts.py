"""One latency verdict everywhere, end to end, on simulator history seeded through the collector code (the
demo fleet's `steady` and `long-context` scenarios side by side, one model each).

Long-context: speculation past the drafter's max length collapses acceptance and P99 TPOT moves up a
bucket. /summary calls it `worse` with its interval and reason, and every consumer reads that very object
for the same window: /fleet, /latency, the rollout gate (fails on latency), the latency_regression alert
(fires, quoting the reason), the weekly report, and the model page in Chromium. The steady scenario's chat
class, where speculation cuts TPOT, reads `better`. Waits are on events (a stage, a phase, a selector),
never on elapsed time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from backend.config import Settings
from backend.db import rollout_repo as repo
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.services import alerts, report, rollout
from backend.services.history import seed_history
from dashboard import formatting as fm
from tests.alerts.conftest import state as alert_state
from tests.alerts.conftest import transitions
from tests.dashboard import seeding
from tests.dashboard.browser import browser_context, stack, wait_idle
from tests.support import db as dbsupport
from tests.support.stack import factory_for

LONG = seeding.SIM_MODELS["long-context"]
STEADY = seeding.SIM_MODELS["steady"]
SEED_MINUTES = 32  # simulated history, through the collector code
WINDOW_MINUTES = 30  # the window every view is asked about: 30 one-minute verdict bins


def _past_wednesday_noon() -> float:
    """A fixed instant in the middle of a past ISO week, so the seeded hour lies inside one week."""
    now = datetime.now(UTC)
    days = (now.isoweekday() - 3) % 7 or 7
    return (now - timedelta(days=days)).replace(hour=12, minute=0, second=0, microsecond=0).timestamp()


def _scenario() -> dict:
    """The demo fleet's steady and long-context models (the dashboard tests' simulator fleet, less drift)."""
    doc = seeding.demo_scenario()
    keep = ("steady-", "long-context-")
    return {**doc, "pools": [p for p in doc["pools"] if p["id"].startswith(keep)], "events": []}


@pytest.fixture(scope="module")
def seeded(pg_admin_url: str, pg_template: str):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_verdict")
    end = _past_wednesday_noon()
    engine = make_engine(url)
    try:
        seed_history(make_sessionmaker(engine), Settings(_env_file=None, database_url=url), scenario=_scenario(),
                     seconds=SEED_MINUTES * 60, end=end, tick=5.0)
    finally:
        engine.dispose()
    yield url, datetime.fromtimestamp(end, UTC)
    dbsupport.drop_database(pg_admin_url, name)


@pytest.fixture(scope="module")
def running(seeded, tmp_path_factory):
    with stack(seeded[0], tmp_path_factory.mktemp("verdict-logs")) as s:
        yield s


@pytest.fixture(scope="module")
def window(seeded) -> dict[str, str]:
    end = seeded[1].replace(second=0, microsecond=0) - timedelta(minutes=1)
    return {"start": (end - timedelta(minutes=WINDOW_MINUTES)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "end": end.strftime("%Y-%m-%dT%H:%M:%SZ")}


def _end(window: dict[str, str]) -> datetime:
    return datetime.fromisoformat(window["end"])


def _api(running, path: str, **params) -> dict:
    r = httpx.get(f"{running.api_url}/api/v1{path}", params=params, timeout=120, headers=running.headers)
    r.raise_for_status()
    return r.json()


def _p99(summary: dict, cls: str, family: str) -> dict:
    row = next(k for k in summary["classes"] if k["traffic_class"] == cls)
    return next(q for q in row[family]["quantiles"] if q["q"] == 0.99)


@pytest.fixture(scope="module")
def long_tpot(running, window) -> dict:
    """/summary's P99 TPOT verdict of the long-context class: the object every other view must repeat."""
    return _p99(_api(running, "/summary", model=LONG, **window), "long-context", "tpot")["verdict"]


def test_summary_long_context_tpot_is_worse_and_steady_chat_is_better(running, window, long_tpot):
    v = long_tpot
    assert v["verdict"] == "worse", v["reason"]
    assert v["resolved"] and v["delta_low"] >= 0 and v["delta_high"] > v["delta_low"]
    assert v["spec_bucket_low"] >= v["base_bucket_high"]  # different buckets, spec above
    assert v["spec_exceedance_low"] > 0.01 >= v["base_exceedance_high"]
    assert v["reason"].startswith("P99 (") and "spec slower by" in v["reason"]
    steady = _p99(_api(running, "/summary", model=STEADY, **window), "chat", "tpot")["verdict"]
    assert steady["verdict"] == "better", steady["reason"]
    assert steady["delta_high"] <= 0 and "spec faster by" in steady["reason"]


def test_fleet_and_latency_repeat_the_summarys_verdict(running, window, long_tpot):
    fleet = _api(running, "/fleet", **window)
    row = next(r for r in fleet["rows"] if r["model_name"] == LONG and r["traffic_class"] == "long-context")
    assert (row["p99_tpot_verdict"], row["p99_tpot_reason"]) == (long_tpot["verdict"], long_tpot["reason"])
    assert (row["p99_tpot_delta_low"], row["p99_tpot_delta_high"]) == (long_tpot["delta_low"], long_tpot["delta_high"])
    table = _api(running, "/latency", family="tpot", q="0.99", model=LONG, **window)
    spec = next(r for r in table["rows"] if r["pool"]["traffic_class"] == "long-context"
                and r["pool"]["spec_mode"] != "off")
    assert spec["quantiles"][0]["verdict"] == long_tpot


def test_rollout_gate_fails_on_latency(seeded, window, long_tpot, tmp_path):
    """With the alpha gate out of the way (threshold 0, and no alpha_low rule whose class threshold the gate
    would use instead), the latency step reads the same verdict and fails."""
    url, _ = seeded
    s = Settings(_env_file=None, database_url=url, rollout_gate_alpha=0.0, rollout_min_drafts=1000,
                 alert_rules_file=tmp_path / "none.yaml")
    factory, now = factory_for(url), _end(window)
    seen = []
    for _ in range(6):  # one stage per evaluation: measuring, gate_passed, latency_failed
        with session_scope(factory) as sess:
            rollout.evaluate(sess, settings=s, now=now, window_seconds=WINDOW_MINUTES * 60, model=LONG)
            track = repo.track(sess, LONG, "long-context")
            seen.append(track.stage)
            if track.stage == "latency_failed":
                break
    assert seen[-1] == "latency_failed", seen
    with session_scope(factory) as sess:
        track = repo.track(sess, LONG, "long-context")
        assert track.latency_result == "fail" and long_tpot["reason"] in track.reason
        last = repo.measurements(sess, track_id=track.id)[0]
        assert last.latency_result == "fail"
        ev = repo.events(sess, track_id=track.id)[0]
        assert ev.to_stage == "latency_failed"
        assert ev.values["tpot_p99"]["verdict"] == "worse" and ev.values["tpot_p99"]["reason"] == long_tpot["reason"]


def test_latency_regression_fires_with_the_verdicts_reason(seeded, window, long_tpot, tmp_path):
    url, _ = seeded
    s = Settings(_env_file=None, database_url=url, alert_rules_file=tmp_path / "none.yaml")
    rule = {"name": "latency-regression", "kind": "latency_regression", "window": WINDOW_MINUTES * 60,
            "metrics": ["tpot"], "for": 0, "keep_firing_for": 0, "min_drafts": 1000}
    factory, now = factory_for(url), _end(window)
    with session_scope(factory) as sess:
        alerts.store_config(sess, {"version": 1, "rules": [rule]}, source="test", by="test", now=now)
    phases = []
    for i in range(3):  # inactive -> (pending) -> firing, one evaluation at a time
        with session_scope(factory) as sess:
            alerts.evaluate(sess, settings=s, now=now + timedelta(seconds=i))
            st = alert_state(sess, rule="latency-regression", traffic_class="long-context")
            phases.append(st.phase if st else None)
            if st is not None and st.phase == "firing":
                assert st.last_status == "breached" and st.last_values["verdicts"] == {"tpot": "worse"}
                fired = next(t for t in transitions(sess) if t.alert_id == st.id and t.to_phase == "firing")
                assert fired.reason == f"P99 TPOT worse than baseline (TPOT {long_tpot['reason']})"
                assert fired.values["reasons"]["tpot"] == long_tpot["reason"]
                break
    assert phases[-1] == "firing", phases


@pytest.mark.browser
def test_weekly_report_and_model_page_show_the_same_verdict(running, window, long_tpot, chromium_bin):
    week = report.week_of(_end(window), "UTC")
    weekly = _api(running, "/reports/weekly", week=week, model=LONG)
    (m,) = weekly["models"]
    row = next(r for r in m["classes"] if r["scope"] == "long-context")
    assert row["tpot_p99_verdict"] == "worse"
    md = httpx.get(f"{running.api_url}/api/v1/reports/weekly/export", params={"week": week, "model": LONG},
                   timeout=120, headers=running.headers).text
    assert f"- long-context P99 TPOT slower than baseline: {row['tpot_p99_reason']}" in md
    week_window = {k: datetime.fromisoformat(weekly[k]).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                   for k in ("start", "end")}
    week_summary = _p99(_api(running, "/summary", model=LONG, **week_window), "long-context", "tpot")["verdict"]
    assert (week_summary["verdict"], week_summary["reason"]) == (row["tpot_p99_verdict"], row["tpot_p99_reason"])

    with browser_context(chromium_bin) as ctx:
        page = ctx.new_page()
        for win, verdict in ((window, long_tpot), (week_window, week_summary)):
            page.goto(f"{running.dash_url}/model?{urlencode({**win, 'model': LONG, 'cls': 'long-context'})}")
            wait_idle(page)
            try:
                page.wait_for_selector("#md-verdict-tpot", timeout=60_000)
            except PlaywrightTimeout:
                raise AssertionError(f"no verdict on {page.url}:\n{page.inner_text('body')[:3000]}") from None
            assert page.inner_text("#md-verdict-tpot").strip() == "✖ slower than baseline"
            assert page.inner_text("#md-reason-tpot").strip() == verdict["reason"]
            assert page.inner_text("#md-interval-tpot").strip() == "interval " + fm.fmt_interval(
                verdict["delta_low"], verdict["delta_high"])
            assert "−0.0" not in page.inner_text("body")
        page.close()
