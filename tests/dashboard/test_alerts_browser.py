"""Alerts in the running stack, in headless Chromium: the API (token mode) and the dashboard (token mode) as
subprocesses on seeded data whose alerts were evaluated until they fire; tokens made by
`specwatch tokens create`. Without a login every page goes to /login; an operator sees the firing alert on
the overview and on the Alerts page and silences it from the UI (the silence is then read back from the
API); a viewer sees the silence actions disabled."""

from __future__ import annotations

import httpx
import pytest

from tests.dashboard import seeding
from tests.dashboard.alerting_stack import auth_stack, fire_alerts, login, make_token
from tests.dashboard.browser import wait_idle
from tests.support.deadline import deadline, deadline_ms

pytestmark = pytest.mark.browser

MODEL = "mistral-7b"  # demo fleet: acceptance far below 0.55 -> alpha-low fires
ROW = f'#al-firing-table tr:has-text("{MODEL} · chat"):has-text("alpha-low")'


@pytest.fixture(scope="module")
def alert_stack(pg_admin_url, pg_template, tmp_path_factory, chromium_bin):
    with seeding.demo_clone(pg_admin_url, pg_template, "specwatch_dash_alerts") as url:
        logs = tmp_path_factory.mktemp("alerts-logs")
        fired = fire_alerts(url)
        assert fired.get("evaluated"), fired
        tokens = {"operator": make_token(url, "operator", "alice"), "viewer": make_token(url, "viewer", "victor")}
        with auth_stack(url, logs) as (api_url, dash_url):  # the API's default auth mode is token
            yield {"api": api_url, "dash": dash_url, "tokens": tokens, "logs": logs}


def _api(stack, path: str, role: str = "operator") -> list[dict]:
    r = httpx.get(f"{stack['api']}/api/v1{path}", headers={"Authorization": f"Bearer {stack['tokens'][role]}"},
                  timeout=deadline(120))
    r.raise_for_status()
    return r.json()


def test_without_login_pages_redirect_to_login(alert_stack, page):
    page.context.clear_cookies()
    for path in ("/alerts", "/"):
        page.goto(alert_stack["dash"] + path)
        page.wait_for_url("**/login?next=**", timeout=deadline_ms(60))
        assert page.is_visible("#sw-token")
    page.fill("#sw-token", "sw_not_a_token")
    page.click("#sw-login-submit")
    assert "invalid or revoked token" in page.inner_text(".sw-login-error")
    assert httpx.get(alert_stack["dash"] + "/_dash-layout").status_code == 401


def test_an_operator_sees_the_firing_alert_and_silences_it(alert_stack, page):
    firing = [a for a in _api(alert_stack, "/alerts") if a["phase"] == "firing"
              and a["labels"].get("model") == MODEL and a["rule"] == "alpha-low"]
    assert len(firing) == 1, firing
    login(page, alert_stack["dash"], alert_stack["tokens"]["operator"], "/?window=1h")
    assert "alice" in page.inner_text("#nav-user-name") and "operator" in page.inner_text("#nav-user-name")
    banner = page.wait_for_selector(".sw-al-banner", timeout=deadline_ms(120))
    assert f"{MODEL} · chat" in banner.inner_text() and "alpha-low" in banner.inner_text()
    href = page.get_attribute(f'.sw-al-banner a:has-text("{MODEL} · chat")', "href")
    assert href.startswith("/model?") and f"model={MODEL}" in href and "cls=chat" in href

    page.click("#nav-alerts")
    page.wait_for_url("**/alerts**", timeout=deadline_ms(60))
    wait_idle(page)
    row = page.wait_for_selector(ROW, timeout=deadline_ms(120)).inner_text()
    assert f"{firing[0]['last_value']:.3f}" in row and "0.550" in row
    assert "pending" in page.inner_text("#al-history-table") and "firing" in page.inner_text("#al-history-table")
    page.click(f"{ROW} button:has-text('silence…')")
    page.wait_for_function(f"() => document.querySelector('#al-form-model').value === '{MODEL}'", timeout=deadline_ms(60))
    assert page.input_value("#al-form-class") == "chat" and page.input_value("#al-form-rule") == "alpha-low"
    page.fill("#al-form-reason", "drafter swap in progress")
    page.click("#al-form-submit")
    assert "by alice" in page.wait_for_selector("#al-silence-created", timeout=deadline_ms(120)).inner_text()

    silences = [s for s in _api(alert_stack, "/silences", "viewer") if s["reason"] == "drafter swap in progress"]
    assert len(silences) == 1 and silences[0]["created_by"] == "alice" and silences[0]["active"]
    assert silences[0]["matchers"] == {"model": MODEL, "traffic_class": "chat", "rule": "alpha-low"}
    page.wait_for_selector(f'#al-silenced-table tr:has-text("{MODEL} · chat")', timeout=deadline_ms(120))
    silenced = next(a for a in _api(alert_stack, "/alerts") if a["id"] == firing[0]["id"])
    assert silenced["silenced_by"] == silences[0]["id"]

    page.click("#nav-logout")
    page.wait_for_url("**/login**", timeout=deadline_ms(60))
    page.goto(alert_stack["dash"] + "/alerts")
    page.wait_for_url("**/login?next=**", timeout=deadline_ms(60))


def test_a_viewer_sees_the_silence_actions_disabled(alert_stack, page):
    login(page, alert_stack["dash"], alert_stack["tokens"]["viewer"], "/alerts")
    assert "victor" in page.inner_text("#nav-user-name") and "viewer" in page.inner_text("#nav-user-name")
    page.wait_for_selector("#al-firing-table", timeout=deadline_ms(120))
    assert page.is_disabled("#al-form-submit")
    assert "operators only" in page.inner_text("#al-form-why")
    buttons = page.query_selector_all("#al-firing-table button")
    assert buttons and all(b.is_disabled() for b in buttons)
    assert "operators only" in buttons[0].get_attribute("title")
