"""The savings in headless Chromium on a priced fleet (simulator history with baselines, 2.00 CHF a GPU-hour):
the overview's two window savings, the model page's capacity card and the weekly report's "saved this week so
far (N h of data)" read what the API returns, with the same name and the configured currency."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from backend.domain import money
from tests.dashboard import seeding
from tests.dashboard.browser import browser_context, stack, wait_idle
from tests.support import db as dbsupport
from tests.support.deadline import deadline, deadline_ms

pytestmark = pytest.mark.browser

PRICED = {"gpu_hour_price": json.dumps({"*": 2.0}), "pool_replicas": json.dumps({"*": {"*": 1}}), "currency": "chf"}


@pytest.fixture(scope="module")
def seeded(pg_admin_url: str, pg_template: str):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_money")
    end = seeding.seed_sim(url, hours=1.0, tick=5.0)
    yield url, end
    dbsupport.drop_database(pg_admin_url, name)


@pytest.fixture(scope="module")
def running(seeded, tmp_path_factory, chromium_bin):
    with stack(seeded[0], tmp_path_factory.mktemp("money-logs"), api_settings=PRICED) as s:
        yield s


@pytest.fixture(scope="module")
def page(running, chromium_bin):
    with browser_context(chromium_bin) as ctx:
        pg = ctx.new_page()
        pg.set_default_timeout(deadline_ms(120))  # every wait ends on its event; this only catches a hang
        yield pg


def _api(running, path: str, **params) -> dict:
    r = httpx.get(f"{running.api_url}/api/v1{path}", params=params, timeout=deadline(120), headers=running.headers)
    r.raise_for_status()
    return r.json()


def _window(seeded) -> dict[str, str]:
    end = datetime.fromtimestamp(seeded[1], UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    return {"start": (end - timedelta(minutes=40)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "end": end.strftime("%Y-%m-%dT%H:%M:%SZ")}


def test_the_overview_and_model_page_show_the_window_savings_of_the_api(running, page, seeded):
    window = _window(seeded)
    fleet = _api(running, "/fleet", **window)
    priced = [r for r in fleet["rows"] if r["saved_in_window"] is not None]
    assert priced and all(r["currency"] == "CHF" for r in fleet["rows"])
    page.goto(running.dash_url + "/?" + "&".join(f"{k}={v}" for k, v in window.items()))
    wait_idle(page)
    page.wait_for_selector(".ag-center-cols-container .ag-row")
    for field, header in (("saved_in_window", money.SAVED_IN_WINDOW),
                          ("per_week_at_window_rate", money.PER_WEEK_AT_WINDOW_RATE)):
        page.evaluate(f"() => dash_ag_grid.getApi('ov-grid').ensureColumnVisible('{field}')")
        assert page.inner_text(f'.ag-header-cell[col-id="{field}"]').strip() == header
        for row in priced:
            rid = f'{row["model_name"]}|{row["traffic_class"]}|{row["spec_mode"]}'
            cell = f'.ag-center-cols-container .ag-row[row-id="{rid}"] [col-id="{field}"]'
            page.wait_for_selector(cell)
            assert page.inner_text(cell).strip() == money.money_text(row[field], "CHF"), (rid, field)

    model = priced[0]["model_name"]
    cap = _api(running, "/capacity", model=model, **window)["total"]
    page.goto(running.dash_url + f"/model?model={model}&" + "&".join(f"{k}={v}" for k, v in window.items()))
    wait_idle(page)
    page.wait_for_selector("#md-capacity-total")
    text = page.inner_text("#md-capacity-total")
    assert f"{money.SAVED_IN_WINDOW} {money.money_text(cap['saved_in_window'], 'CHF')}" in text
    assert f"{money.PER_WEEK_AT_WINDOW_RATE} {money.money_text(cap['per_week_at_window_rate'], 'CHF')}" in text


def test_the_report_page_shows_saved_this_week_so_far_of_the_api(running, page, seeded):
    week = _api(running, "/reports/weekly", week=datetime.fromtimestamp(seeded[1], UTC).strftime("%G-W%V"))
    total = week["capacity_total"]
    assert total["saved_this_week_so_far"] is not None and total["currency"] == "CHF"
    assert 0.9 <= total["hours_of_data"] <= 1.0  # one hour of seeded history
    page.goto(running.dash_url + f"/report?week={week['week']}")
    wait_idle(page)
    page.wait_for_selector("#rp-savings")
    text = page.inner_text("#rp-savings")
    assert money.SAVED_WEEK_SO_FAR in text
    want = money.saved_week_cell(total["saved_this_week_so_far"], total["hours_of_data"], "CHF")
    assert want in text and "per week" not in text
