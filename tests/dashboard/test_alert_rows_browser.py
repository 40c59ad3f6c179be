"""A fleet row tells the truth, in headless Chromium against the running API: on a seeded fleet whose alerts
were evaluated until they fire, the overview's first rows (1440 px) and first phone cards (390 px) are the
firing pools, each naming its rule and value vs threshold as the API has them, with the alert's
short-window rate beside the window's; the per-domain page says the same. With the example rules' class
thresholds (code 0.45, else 0.55), a code row and a chat row both at alpha 0.50 read healthy and "below
threshold 0.55" (API and page alike)."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from backend.schemas.fleet import FleetRowRead
from dashboard import formatting as fm
from tests.dashboard import seeding
from tests.dashboard.a11y import axe_source, axe_violations, blocking, horizontal_overflow
from tests.dashboard.alerting_stack import fire_alerts
from tests.dashboard.browser import stack, wait_idle
from tests.support import db as dbsupport
from tests.support.deadline import deadline

pytestmark = pytest.mark.browser

FIRING_MODEL = "mistral-7b"  # demo fleet: acceptance far below 0.55 -> alpha-low fires on chat
EVEN = "phi-3"  # K = 1 at p = 0.50 in two classes, seeded after the evaluation (no alert of its own)
EVEN_FLEET = (seeding.PoolSpec(EVEN, "chat", k=1, p0=0.5), seeding.PoolSpec(EVEN, "code", k=1, p0=0.5))


@pytest.fixture(scope="module")
def running(pg_admin_url, pg_template, tmp_path_factory, chromium_bin):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_dash_rows")
    try:
        end = seeding.seed_demo(url, hours=2.0)
        fired = fire_alerts(url, now=end + timedelta(seconds=30))
        assert fired.get("evaluated"), fired
        seeding.seed_demo(url, hours=2.0, now=end + timedelta(seconds=30), fleet=EVEN_FLEET, seed=11)
        with stack(url, tmp_path_factory.mktemp("rows-logs")) as s:
            yield s
    finally:
        dbsupport.drop_database(pg_admin_url, name)


def _fleet(running, **params) -> list[FleetRowRead]:
    r = httpx.get(f"{running.api_url}/api/v1/fleet", params={"window": "1h", **params}, timeout=deadline(120),
                  headers=running.headers)
    r.raise_for_status()
    return [FleetRowRead.model_validate(x) for x in r.json()["rows"]]


def _rid(r: FleetRowRead) -> str:
    return f"{r.model_name}|{r.traffic_class}|{r.spec_mode}"


def _firing_chat(rows: list[FleetRowRead]) -> FleetRowRead:
    row = next(r for r in rows if r.model_name == FIRING_MODEL and r.traffic_class == "chat")
    assert row.state == "firing" and row.alerts[0].rule == "alpha-low", row
    assert row.alerts[0].alpha_short is not None and row.alerts[0].threshold == pytest.approx(0.55)
    return row


def test_the_overview_grid_shows_firing_rows_first_with_their_alert(running, page):
    rows = _fleet(running)
    chat = _firing_chat(rows)
    firing = {_rid(r) for r in rows if r.state == "firing"}
    page.goto(running.dash_url + "/?window=1h")
    wait_idle(page)
    pinned = ".ag-pinned-left-cols-container .ag-row"
    page.wait_for_selector(f'{pinned}[row-index="{len(rows) - 1}"]')
    order = page.eval_on_selector_all(pinned, "els => els.map(e => [+e.getAttribute('row-index'), "
                                              "e.getAttribute('row-id')]).sort((a, b) => a[0] - b[0]).map(x => x[1])")
    assert set(order[:len(firing)]) == firing, order  # every firing row above every other
    cell = page.inner_text(f'{pinned}[row-id="{_rid(chat)}"] [col-id="state_text"]').strip()
    assert cell == fm.row_state_label(chat)
    alert = chat.alerts[0]
    assert cell.startswith("▲ firing: alpha-low ")
    assert f"{fm.fmt_rate(alert.value)} vs {fm.fmt_rate(alert.threshold)}" in cell
    rate = page.inner_text(f'.ag-center-cols-container .ag-row[row-id="{_rid(chat)}"] [col-id="acceptance_rate"]')
    assert rate.strip() == f"{fm.fmt_rate(chat.acceptance_rate)} · 5m {fm.fmt_rate(alert.alpha_short)}"
    assert page.inner_text("#ov-kpi-firing").strip() == str(len(firing))


def test_the_phone_cards_show_the_firing_pool_first(running, page):
    rows = _fleet(running)
    chat = _firing_chat(rows)
    n_firing = sum(r.state == "firing" for r in rows)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(running.dash_url + "/?window=1h")
    wait_idle(page)
    page.wait_for_selector("#ov-cards article")
    cards = page.eval_on_selector_all("#ov-cards article", "els => els.map(e => e.id)")
    assert set(cards[:n_firing]) == {f"ov-card-{_rid(r)}" for r in rows if r.state == "firing"}, cards
    card = f'[id="ov-card-{_rid(chat)}"]'
    assert page.inner_text(f'{card} [data-field="state"]').strip() == fm.row_state_label(chat)
    alert_alpha = page.inner_text(f'{card} [data-field="alert-alpha"]')
    assert "r 5m" in alert_alpha and fm.fmt_rate(chat.alerts[0].alpha_short) in alert_alpha
    assert page.is_visible(f'{card} [data-field="state"]')
    assert horizontal_overflow(page) == 0
    assert blocking(axe_violations(page, axe_source())) == []


def test_the_per_domain_rows_show_the_alert(running, page):
    rows = _fleet(running, model=FIRING_MODEL)
    chat = _firing_chat(rows)
    page.goto(running.dash_url + f"/acceptance?window=1h&model={FIRING_MODEL}")
    wait_idle(page)
    page.wait_for_selector("#ac-chat-state")
    assert page.inner_text("#ac-chat-state").strip() == fm.row_state_label(chat)
    assert page.inner_text("#ac-chat-alert-alpha").strip() == f"· 5m {fm.fmt_rate(chat.alerts[0].alpha_short)}"


def test_class_thresholds_decide_below_threshold_in_the_api_and_the_overview(running, page):
    rows = {r.traffic_class: r for r in _fleet(running, model=EVEN)}
    assert rows["chat"].acceptance_rate == pytest.approx(0.5, abs=0.01)
    assert rows["code"].acceptance_rate == pytest.approx(0.5, abs=0.01)
    assert rows["chat"].state == "below-threshold" and rows["chat"].alpha_threshold == pytest.approx(0.55)
    assert rows["code"].state == "healthy" and rows["code"].alpha_threshold == pytest.approx(0.45)
    page.goto(running.dash_url + "/?window=1h")
    wait_idle(page)
    pinned = ".ag-pinned-left-cols-container .ag-row"
    page.wait_for_selector(f'{pinned}[row-id="{_rid(rows["code"])}"]')
    assert page.inner_text(f'{pinned}[row-id="{_rid(rows["chat"])}"] [col-id="state_text"]').strip() == \
        "▼ below threshold 0.55"
    assert page.inner_text(f'{pinned}[row-id="{_rid(rows["code"])}"] [col-id="state_text"]').strip() == "✔ healthy"
    assert "▼ below threshold\n" in page.inner_text("#ov-kpis")  # no one number: the thresholds differ by class
    page.goto(running.dash_url + f"/acceptance?window=1h&model={EVEN}")
    wait_idle(page)
    page.wait_for_selector("#ac-code-state")
    assert page.inner_text("#ac-code-state").strip() == "✔ healthy"
    assert page.inner_text("#ac-chat-state").strip() == "▼ below threshold 0.55"
