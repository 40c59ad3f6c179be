"""The three savings on one seeded fleet (gamma-8b of tests/rollout/test_report.py), hand-computed, and each
read back from every surface that shows it: the API, the overview and model page (their API client calling the
real app), the weekly report's web page, Markdown, CSV and PDF, and the Slack digest. Same value, same name,
same currency everywhere.

By hand, at Tue 24 Nov 16:00 (2026-W48 in progress), 2 replicas a pool at 4 GPUs x 2.00 EUR (a replica-hour
costs 8.00 EUR); each seeded hour holds 30 one-minute buckets:

* the 24 h window (Mon 16:00 to Tue 16:00) holds the two >128 hours only (Tue 14:00, 15:00): spec 6,000 tokens
  a bucket at 50 tok/s per replica, baseline 62.5, so saved in this window = 0.36 M x 8/3600 x (1/62.5 - 1/50)
  x 1e6 / 1e6 = -3.20 EUR, and per week at this window's rate = -3.20 x 7 = -22.40 EUR;
* the 40 h window Mon 00:00 to Tue 16:00 holds every seeded hour: 16.00 - 3.20 = 12.80 EUR saved in this
  window, 12.80 x 168 / 40 = 53.76 EUR per week at this window's rate;
* the weekly report's "saved this week so far" is that same week-to-date saving, 12.80 EUR, not extrapolated,
  from 4 hours x 30 minutes = 2 h of data.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
from pypdf import PdfReader

from backend.config import Settings
from backend.notify.delivery import render as render_notification
from backend.services import report, report_csv, report_digest, report_export
from dashboard.api_client import REQUEST_HEADERS, ApiClient, weekly_export
from dashboard.app import create_app as create_dash_app

DASH = create_dash_app("http://127.0.0.1:9")  # pages register on import, which needs the app first
from dashboard import capacity_view, fleet_grid, state
from dashboard.pages import overview as overview_page
from dashboard.pages import report as report_page
from tests.rollout.test_report import seeded  # noqa: F401  (fixture)
from tests.support.auth import app_on_session
from tests.support.components import text as _text

MID_WEEK = datetime(2026, 11, 24, 16, 0, tzinfo=UTC)
MODEL = "gamma-8b"
WINDOW_SAVED, WINDOW_WEEK = "-3.20 EUR", "-22.40 EUR"  # the 24 h window, by hand (docstring)
WEEK_SAVED = "12.80 EUR"


@pytest.fixture
def settings() -> Settings:
    return Settings(_env_file=None, gpu_hour_price={MODEL: 2.0}, gpus_per_replica={"*": 4},
                    pool_replicas={MODEL: {"*": 2}}, currency="eur")


@pytest.fixture
def api(db, settings):
    """The real app on the rollback-per-test session, its clock at MID_WEEK, priced in EUR."""
    http = app_on_session(db, MID_WEEK, token_role="viewer", config=settings)  # reads need a viewer token
    given = REQUEST_HEADERS.set({"Authorization": http.headers["Authorization"]})  # what the dashboard's calls carry (dashboard.auth sets it per request)
    yield http, ApiClient("http://testserver", transport=http._transport)
    REQUEST_HEADERS.reset(given)


def test_the_three_savings_match_the_hand_computation(seeded, api):  # noqa: F811
    http, _client = api
    day = http.get("/api/v1/capacity", params={"model": MODEL, "window": "24h"}).json()
    assert day["currency"] == day["total"]["currency"] == "EUR"  # "eur" in the settings, upper-cased
    assert day["total"]["saved_in_window"] == pytest.approx(-3.2)
    assert day["total"]["per_week_at_window_rate"] == pytest.approx(-22.4)
    so_far = http.get("/api/v1/capacity", params={"model": MODEL, "start": "2026-11-23T00:00:00Z",
                                                  "end": "2026-11-24T16:00:00Z"}).json()["total"]
    assert so_far["saved_in_window"] == pytest.approx(12.8)
    assert so_far["per_week_at_window_rate"] == pytest.approx(12.8 * 168 / 40)  # 53.76
    week = http.get("/api/v1/reports/weekly", params={"week": "2026-W48"}).json()
    assert not week["complete"] and week["currency"] == "EUR"
    total = next(m for m in week["models"] if m["model"] == MODEL)["capacity"]["total"]
    assert total["saved_this_week_so_far"] == pytest.approx(12.8)  # the week to date, never extrapolated
    assert total["hours_of_data"] == pytest.approx(2.0) and total["label"] == "saved this week so far (2 h of data)"
    assert "saved_in_window" not in total and "per_week_at_window_rate" not in total


def test_the_window_savings_read_the_same_on_the_api_overview_and_model_page(seeded, api):  # noqa: F811
    http, client = api
    cap = http.get("/api/v1/capacity", params={"model": MODEL, "window": "24h"}).json()
    fleet_cap = http.get("/api/v1/capacity/fleet", params={"window": "24h"}).json()
    rows = http.get("/api/v1/fleet", params={"window": "24h"}).json()["rows"]
    (cls,) = cap["classes"]
    (cap_row,) = [r for r in fleet_cap["rows"] if r["model_name"] == MODEL]
    fleet_rows = {r["traffic_class"]: r for r in rows if r["model_name"] == MODEL}
    assert list(fleet_rows) == ["chat"]  # one class: no mixed row
    for money in (cls["money"], cap["total"], cap_row, fleet_cap["models"][MODEL], fleet_rows["chat"]):
        assert money["saved_in_window"] == pytest.approx(-3.2) and money["currency"] == "EUR"
        assert money["per_week_at_window_rate"] == pytest.approx(-22.4)
    assert fleet_cap["currency"] == cls["currency"] == "EUR"

    view = state.View(window="24h", model=MODEL, cls="chat")
    grid = {r["traffic_class"]: r for r in overview_page.render(client, view)[3] if r["model_name"] == MODEL}
    heads = {c["field"]: c["headerName"] for c in fleet_grid.COLUMNS}
    assert heads["saved_in_window"] == "saved in this window"
    assert heads["per_week_at_window_rate"] == "per week at this window's rate"
    assert grid["chat"]["saved_in_window"] == pytest.approx(-3.2)
    assert grid["chat"]["saved_in_window_text"] == WINDOW_SAVED
    assert grid["chat"]["per_week_at_window_rate_text"] == WINDOW_WEEK

    text = _text(capacity_view.render_capacity(client, view))
    assert f"saved in this window {WINDOW_SAVED}" in text and f"per week at this window's rate {WINDOW_WEEK}" in text
    assert "saved in this window 95 % interval per week at this window's rate" in text  # the class table's heads
    assert "saving / week" not in text and "per week " not in text.replace("per week at this window's rate", "")


def test_saved_this_week_so_far_reads_the_same_on_every_report_surface(seeded, api, settings):  # noqa: F811
    http, client = api
    r = http.get("/api/v1/reports/weekly", params={"week": "2026-W48"}).json()
    gamma = next(m for m in r["models"] if m["model"] == MODEL)
    total, (line,) = gamma["capacity"]["total"], gamma["capacity"]["lines"]
    lo, hi = total["saved_this_week_so_far_low"], total["saved_this_week_so_far_high"]
    assert lo < 12.8 < hi
    cell = f"{WEEK_SAVED} (2 h of data)"
    interval = f"{lo:,.2f} EUR to {hi:,.2f} EUR"

    web = _text(report_page.render(client, "2026-W48", "light")[0])
    md = weekly_export(client, "2026-W48", "md").decode()
    pages = PdfReader(io.BytesIO(weekly_export(client, "2026-W48", "pdf"))).pages
    pdf = " ".join(" ".join(p.extract_text() for p in pages).split())  # a narrow cell breaks its line
    for name, text in (("web", web), ("markdown", md), ("pdf", pdf)):
        assert "saved this week so far" in text, name
        assert text.count(cell) == 3, name  # gamma-8b's total, the fleet's, and its capacity line
        assert interval in text, name
        assert "per week" not in text and "saving this week" not in text, name
    assert f"| fleet | {cell} | {interval} |" in md

    rows = list(csv.DictReader(io.StringIO(weekly_export(client, "2026-W48", "csv").decode())))
    (model_total,) = [x for x in rows if x["model"] == MODEL and x["row"] == "model total"]
    (chat,) = [x for x in rows if x["model"] == MODEL and x["row"] == "class"]
    for row in (model_total, chat):
        assert float(row["saved_this_week_so_far (EUR)"]) == pytest.approx(12.8)
        assert float(row["hours_of_data"]) == pytest.approx(2.0)
    assert float(model_total["saved_this_week_so_far_low (EUR)"]) == pytest.approx(lo)
    assert float(chat["cost_per_mtok_spec (EUR)"]) == pytest.approx(line["cost_per_mtok_spec"])

    payload = report_digest.digest_payload(r, settings)
    slack = str(render_notification("slack", payload, idempotency_key="digest-test", options={}))
    assert f"saved this week so far (2 h of data): {WEEK_SAVED} (95 %: {interval})" in slack


def test_a_currency_symbol_is_written_before_the_amount_everywhere(seeded, db, settings):  # noqa: F811
    euro = settings.model_copy(update={"currency": "€"})
    r = report.weekly(db, week="2026-W48", now=MID_WEEK, settings=euro)
    md, text = report_export.markdown(r), report_csv.csv_text(r)
    assert "€12.80 (2 h of data)" in md and "GPU-hour price €2.00" in md and "12.80 EUR" not in md
    assert "saved_this_week_so_far (€)" in text.splitlines()[0]
    assert "saved this week so far (2 h of data): €12.80" in str(report_digest.digest_payload(r, euro))
