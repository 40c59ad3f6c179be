"""One story on every surface. On one seeded fleet with an incident in progress (a pool whose acceptance fell
in its last minutes, its alpha-low alert firing on the short windows while the hour still looks fine), rules
with per-class thresholds, a GPU-hour price and a currency, every number shown on more than one surface is
read from each surface and compared as text:

- the API (/fleet, /summary, /alerts, the weekly report's JSON),
- the rendered pages in Chromium: the overview grid, the per-domain table, the model page's cards, the
  alerts page and the weekly report page,
- the report's Markdown, CSV and PDF exports and the Slack digest built from the same report.

A row whose alert fires never reads healthy, and no row says "below threshold" unless its own class's
threshold (from the rules the evaluator uses) is crossed. All pages read one fixed window (start/end in
the URL), so the minute turning over between two reads cannot move a number."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import replace
from datetime import timedelta

import httpx
import pytest
import yaml
from pypdf import PdfReader

from backend.config import Settings
from backend.domain import money
from backend.notify.delivery import render
from backend.schemas.fleet import FleetRowRead
from backend.schemas.summary import MIXED
from backend.services import report, report_digest
from dashboard import formatting as fm
from tests.dashboard import seeding
from tests.dashboard.alerting_stack import fire_alerts, login, make_token, start_dashboard_auth
from tests.dashboard.browser import ROOT, browser_context, start_api, wait_idle
from tests.support import db as dbsupport
from tests.support.deadline import deadline

pytestmark = pytest.mark.browser

INCIDENT = ("llama-3.1-70b", "chat")  # 0.86 for hours, 0.30 over the last 6 minutes
EVEN = "phi-3"  # chat and code both at alpha 0.50: below chat's threshold 0.55, above code's 0.45
CURRENCY = "EUR"
API_SETTINGS = {"gpu_hour_price": '{"*": 2.5}', "pool_replicas": '{"*": {"*": 2}}', "currency": CURRENCY}


def _fleet() -> tuple[seeding.PoolSpec, ...]:
    out = []
    for spec in seeding.DEMO_FLEET:
        if (spec.model, spec.traffic_class, spec.spec_mode) == (*INCIDENT, "eagle3"):
            spec = replace(spec, incident_minutes=6, incident_p0=0.30, restarts_every_h=None)
        out.append(spec)
    out += [seeding.PoolSpec(EVEN, "chat", k=1, p0=0.5), seeding.PoolSpec(EVEN, "code", k=1, p0=0.5)]
    return tuple(out)


def _rules() -> dict:
    """The example rules with alpha-low on minute windows (the demo's shape: 2 and 5 minutes, one minute
    `for`) and class thresholds: code 0.45, summarize 0.40, every other class 0.55."""
    doc = yaml.safe_load((ROOT / "alerts.example.yaml").read_text())
    rules = []
    for rule in doc["rules"]:
        if rule["name"] == "alpha-low":
            rule.update({"short_window": "2m", "long_window": "5m", "for": "60s", "keep_firing_for": "60s",
                         "overrides": [{"match": {"traffic_class": "code"}, "threshold": 0.45},
                                       {"match": {"traffic_class": "summarize"}, "threshold": 0.40}]})
        elif rule["kind"] == "alpha_low":
            continue
        rules.append(rule)
    doc["rules"] = rules
    return doc


def _threshold(rules: dict, cls: str) -> float:
    rule = next(r for r in rules["rules"] if r["name"] == "alpha-low")
    return next((o["threshold"] for o in rule["overrides"] if o["match"].get("traffic_class") == cls),
                rule["threshold"])


@pytest.fixture(scope="module")
def world(pg_admin_url, pg_template, tmp_path_factory, chromium_bin):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_story")
    tmp = tmp_path_factory.mktemp("story")
    rules = _rules()
    (tmp / "rules.yaml").write_text(yaml.safe_dump(rules, sort_keys=False))
    try:
        end = seeding.seed_demo(url, hours=3.0, fleet=_fleet())
        fire_alerts(url, rules=tmp / "rules.yaml", now=end + timedelta(seconds=30))
        token = make_token(url, "operator", "sre-oncall")
        api, api_url = start_api(url, tmp, settings={**API_SETTINGS, "alert_rules_file": str(tmp / "rules.yaml")})
        try:
            dash, dash_url = start_dashboard_auth(api_url, tmp)
            try:
                start = end - timedelta(hours=1)
                window = {"start": start.strftime("%Y-%m-%dT%H:%M:%SZ"), "end": end.strftime("%Y-%m-%dT%H:%M:%SZ")}
                yield {"api": api_url, "dash": dash_url, "token": token, "window": window, "rules": rules, "end": end}
            finally:
                dash.stop()
        finally:
            api.stop()
    finally:
        dbsupport.drop_database(pg_admin_url, name)


@pytest.fixture(scope="module")
def browser(chromium_bin, world):
    with browser_context(chromium_bin) as ctx:
        pg = ctx.new_page()
        login(pg, world["dash"], world["token"])  # the session cookie serves every page of the context
        pg.close()
        yield ctx


def _get(world, path: str, **params):
    r = httpx.get(f"{world['api']}/api/v1{path}", params=params, timeout=deadline(120),
                  headers={"Authorization": f"Bearer {world['token']}"})
    r.raise_for_status()
    return r


def _rows(world) -> list[FleetRowRead]:
    return [FleetRowRead.model_validate(x) for x in _get(world, "/fleet", **world["window"]).json()["rows"]]


def _query(world, **extra) -> str:
    return "?" + "&".join(f"{k}={v}" for k, v in {**world["window"], **extra}.items())


def _rid(r: FleetRowRead) -> str:
    return f"{r.model_name}|{r.traffic_class}|{r.spec_mode}"


def _text(page, selector: str) -> str:
    return " ".join(page.inner_text(selector).split())


def test_a_firing_row_never_reads_healthy_and_thresholds_are_the_rules(world):
    rows = _rows(world)
    alerts = _get(world, "/alerts").json()
    firing = {(a["labels"].get("model_name") or a["labels"].get("model"), a["labels"].get("traffic_class"))
              for a in alerts if a["phase"] == "firing"}
    assert INCIDENT in firing and (EVEN, "chat") in firing, alerts
    by_key = {(r.model_name, r.traffic_class): r for r in rows}
    incident = by_key[INCIDENT]
    assert incident.acceptance_rate > 0.55  # the hour still looks fine ...
    assert incident.state == "firing" and incident.alerts[0].rule == "alpha-low"  # ... the row says the truth
    assert incident.alerts[0].alpha_short < 0.55
    for key in firing:
        if key in by_key:
            assert by_key[key].state == "firing", (key, by_key[key].state)
    for r in rows:
        if r.traffic_class == MIXED or r.state in ("stale", "no-data", "low-volume"):
            continue
        limit = _threshold(world["rules"], r.traffic_class)
        assert r.alpha_threshold == pytest.approx(limit), r
        if r.state == "below-threshold":
            assert r.acceptance_rate < limit, r
        if r.state == "healthy":
            assert r.acceptance_rate >= limit and not r.alerts, r
    assert by_key[(EVEN, "code")].state == "healthy"  # 0.50 is above code's 0.45
    assert by_key[(EVEN, "code")].acceptance_rate == pytest.approx(0.5, abs=0.01)


def test_overview_per_domain_and_model_page_read_the_same_numbers(world, page):
    rows = [r for r in _rows(world) if r.state not in ("stale", "no-data")]
    page.goto(world["dash"] + "/" + _query(world))
    wait_idle(page)
    pinned, center = ".ag-pinned-left-cols-container .ag-row", ".ag-center-cols-container .ag-row"
    page.wait_for_selector(f'{pinned}[row-index="{len(_rows(world)) - 1}"]')
    assert page.is_hidden("#ov-pager")  # a fleet on one page shows no pager
    overview: dict[str, dict[str, str]] = {}
    for r in rows:
        rid = _rid(r)
        cell = {col: _text(page, f'{center}[row-id="{rid}"] [col-id="{col}"]')
                for col in ("acceptance_rate", "margin", "mean_acceptance_length", "break_even_alpha",
                            "p99_itl_delta", "p99_tpot_delta", "saved_in_window", "per_week_at_window_rate")}
        cell["state"] = _text(page, f'{pinned}[row-id="{rid}"] [col-id="state_text"]')
        overview[rid] = cell
        # the API's values as the one formatter writes them
        assert cell["acceptance_rate"].split(" · ")[0] == fm.fmt_rate(r.acceptance_rate), rid
        assert cell["margin"] == fm.fmt(r.margin, "+.3f"), rid
        assert cell["mean_acceptance_length"] == fm.fmt_tau(r.mean_acceptance_length), rid
        assert cell["p99_tpot_delta"] == fm.fmt_delta_ms(r.p99_tpot_delta), rid
        assert cell["p99_itl_delta"] == fm.fmt_delta_ms(r.p99_itl_delta), rid
        assert cell["state"] == fm.row_state_label(r), rid
        assert cell["saved_in_window"] == money.money_text(r.saved_in_window, CURRENCY, none="—"), rid
        assert cell["state"] != "✔ healthy" or not r.alerts
    assert overview[_rid(next(r for r in rows if (r.model_name, r.traffic_class) == INCIDENT))]["state"].startswith(
        fm.label(fm.STATES, "firing") + ": alpha-low")

    for model in sorted({r.model_name for r in rows}):
        page.goto(world["dash"] + "/acceptance" + _query(world, model=model))
        wait_idle(page)
        for r in (x for x in rows if x.model_name == model):
            page.wait_for_selector(f"#ac-{r.traffic_class}-acceptance_rate")
            seen = overview[_rid(r)]
            assert _text(page, f"#ac-{r.traffic_class}-acceptance_rate") == seen["acceptance_rate"].split(" · ")[0]
            assert _text(page, f"#ac-{r.traffic_class}-margin") == seen["margin"]
            assert _text(page, f"#ac-{r.traffic_class}-mean_acceptance_length") == seen["mean_acceptance_length"]
            assert _text(page, f"#ac-{r.traffic_class}-break_even_alpha") == seen["break_even_alpha"]
            assert _text(page, f"#ac-{r.traffic_class}-state") == seen["state"]

    for r in rows:
        if r.traffic_class == MIXED:
            continue
        page.goto(world["dash"] + "/model" + _query(world, model=r.model_name, cls=r.traffic_class))
        wait_idle(page)
        page.wait_for_selector("#md-kpi-acceptance_rate")
        seen = overview[_rid(r)]
        assert _text(page, "#md-kpi-acceptance_rate") == seen["acceptance_rate"].split(" · ")[0], _rid(r)
        assert _text(page, "#md-kpi-margin") == seen["margin"], _rid(r)
        assert _text(page, "#md-kpi-mean_acceptance_length") == seen["mean_acceptance_length"], _rid(r)
        assert _text(page, "#md-kpi-break_even_alpha") == seen["break_even_alpha"], _rid(r)
        if seen["p99_tpot_delta"] != "—":
            assert _text(page, "#md-kpi-p99-tpot") == seen["p99_tpot_delta"], _rid(r)
            assert _text(page, "#md-kpi-p99-itl") == seen["p99_itl_delta"], _rid(r)


def test_the_alerts_page_and_the_rows_name_the_same_value_and_threshold(world, page):
    rows = {(r.model_name, r.traffic_class): r for r in _rows(world)}
    incident = rows[INCIDENT]
    alert = incident.alerts[0]
    numbers = f"{fm.fmt_rate(alert.value)} vs {fm.fmt_rate(alert.threshold)}"
    assert numbers in fm.row_state_label(incident)
    page.goto(world["dash"] + "/alerts" + _query(world))
    wait_idle(page)
    page.wait_for_selector("text=alpha-low")
    body = " ".join(page.inner_text("body").split())
    # the alerts table: model · class, rule, value, threshold
    row = f"{INCIDENT[0]} · {INCIDENT[1]} alpha-low {fm.fmt_rate(alert.value)} {fm.fmt_rate(alert.threshold)}"
    assert row in body, body[:2000]


def test_the_weekly_report_reads_the_same_on_every_surface(world, page):
    week = report.week_of(world["end"], "UTC")
    r = _get(world, "/reports/weekly", week=week).json()
    assert r["currency"] == CURRENCY
    md = _get(world, "/reports/weekly/export", week=week, format="md").text
    rows = list(csv.DictReader(io.StringIO(_get(world, "/reports/weekly/export", week=week, format="csv").text)))
    pdf = " ".join(" ".join(p.extract_text() for p in PdfReader(io.BytesIO(
        _get(world, "/reports/weekly/export", week=week, format="pdf").content)).pages).split())
    digest = str(render("slack", report_digest.digest_payload(r, Settings(_env_file=None)), idempotency_key="k", options={}))
    page.goto(world["dash"] + f"/report?week={week}")
    wait_idle(page)
    page.wait_for_selector("#rp-summary")
    web = " ".join(page.inner_text("body").split())
    checked = 0
    for m in r["models"]:
        mixed = next(x for x in m["classes"] if x["scope"] == MIXED)
        if mixed["alpha"] is None:
            continue
        # the report's alpha is /summary's over the same span
        summary = _get(world, "/summary", model=m["model"], start=r["start"], end=r["generated_at"]).json()
        api_mixed = next((k for k in summary["classes"] if k["traffic_class"] == MIXED), summary["classes"][0])
        assert mixed["alpha"] == pytest.approx(api_mixed["acceptance_rate"], abs=1e-12), m["model"]
        alpha = fm.fmt_rate(mixed["alpha"])
        summary_row = next(x for x in r["summary"]["rows"] if x[0] == m["model"])
        assert summary_row[r["summary"]["head"].index("alpha mixed")] == alpha
        assert re.search(rf"\|\s*{re.escape(m['model'])}\s*\|[^\n]*\|\s*{re.escape(alpha)}\s*\|", md), m["model"]
        assert f"alpha mixed {alpha}" in digest
        assert alpha in pdf and alpha in web
        (csv_mixed,) = [x for x in rows if x["model"] == m["model"] and x["row"] == "mixed"]
        assert fm.fmt_rate(float(csv_mixed["alpha"])) == alpha
        week_total = m["capacity"]["total"]
        if week_total.get("saved_this_week_so_far") is not None:
            text = money.money_text(week_total["saved_this_week_so_far"], CURRENCY)
            for name, surface in (("md", md), ("pdf", pdf), ("web", web), ("digest", digest)):
                assert text in surface, (m["model"], name)
            (total,) = [x for x in rows if x["model"] == m["model"] and x["row"] == "model total"]
            assert float(total[f"saved_this_week_so_far ({CURRENCY})"]) == pytest.approx(
                week_total["saved_this_week_so_far"], abs=0.005)
        checked += 1
    assert checked >= 3

