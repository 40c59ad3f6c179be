"""The running dashboard in headless Chromium against the running API, on simulator history seeded
through the collector code: every page shows the numbers the API returns for the same pool and window,
a window change redraws the charts, an empty pool says since when it has no data, and a stopped backend
gives a plain "backend unreachable — retrying" banner (no traceback) that clears when it is back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from dashboard import components as c
from dashboard import formatting as fm
from dashboard.k_advice_view import slug
from tests.dashboard import seeding
from tests.dashboard.a11y import axe_source, axe_violations, blocking, horizontal_overflow, outside_viewport
from tests.dashboard.browser import stack, start_api, start_dashboard, wait_idle
from tests.support import db as dbsupport
from tests.support.deadline import deadline, deadline_ms
from tests.support.procs import free_port

pytestmark = pytest.mark.browser

MODEL = "llama-3.1-8b"  # steady scenario: chat K=3 and code K=5 beside baselines


@pytest.fixture(scope="module")
def seeded(pg_admin_url: str, pg_template: str):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_dash")
    end = seeding.seed_sim(url, hours=1.0, tick=5.0)
    seeding.seed_empty_pool(url, model="empty-model")
    yield url, end
    dbsupport.drop_database(pg_admin_url, name)


@pytest.fixture(scope="module")
def running(seeded, tmp_path_factory, chromium_bin):
    with stack(seeded[0], tmp_path_factory.mktemp("dash-logs")) as s:
        yield s


@pytest.fixture(scope="module")
def window(seeded) -> dict[str, str]:
    """A fixed window inside the seeded history: the dashboard and the test ask the API the same question."""
    end = datetime.fromtimestamp(seeded[1], UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
    return {"start": (end - timedelta(minutes=40)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "end": end.strftime("%Y-%m-%dT%H:%M:%SZ")}


def _qs(window: dict[str, str], **kw: str) -> str:
    return "?" + "&".join(f"{k}={v}" for k, v in {**window, **kw}.items())


def _api(running, path: str, **params) -> dict:
    r = httpx.get(f"{running.api_url}/api/v1{path}", params=params, timeout=deadline(120), headers=running.headers)
    r.raise_for_status()
    return r.json()


def _text(page, selector: str) -> str:
    page.wait_for_selector(selector, timeout=deadline_ms(120))
    return page.inner_text(selector).strip()


def _no_traceback(page) -> None:
    body = page.inner_text("body")
    assert "Traceback" not in body and 'File "' not in body
    assert not page.js_errors, page.js_errors


def test_overview_shows_the_fleet_numbers_of_the_api(running, page, window):
    page.goto(running.dash_url + "/" + _qs(window))
    wait_idle(page)
    fleet = _api(running, "/fleet", **window)
    assert len(fleet["rows"]) >= 4
    for row in fleet["rows"]:
        rid = f'{row["model_name"]}|{row["traffic_class"]}|{row["spec_mode"]}'
        cell = f'.ag-center-cols-container .ag-row[row-id="{rid}"]'
        assert _text(page, f'{cell} [col-id="acceptance_rate"]') == fm.fmt_rate(row["acceptance_rate"]), rid
        assert _text(page, f'{cell} [col-id="mean_acceptance_length"]') == fm.fmt_tau(row["mean_acceptance_length"])
        assert _text(page, f'{cell} [col-id="margin"]') == fm.fmt(row["margin"], "+.3f")
        state = page.inner_text(f'.ag-pinned-left-cols-container .ag-row[row-id="{rid}"] [col-id="state_text"]')
        assert fm.STATES[row["state"]][1] in state
    assert _text(page, "#ov-kpi-rows") == str(len(fleet["rows"]))
    _no_traceback(page)


def test_acceptance_page_shows_the_summary_of_the_api(running, page, window):
    page.goto(running.dash_url + "/acceptance" + _qs(window, model=MODEL))
    wait_idle(page)
    summary = _api(running, "/summary", model=MODEL, **window)
    for k in summary["classes"]:
        cls = k["traffic_class"]
        assert _text(page, f"#ac-{cls}-acceptance_rate") == fm.fmt_rate(k["acceptance_rate"])
        assert _text(page, f"#ac-{cls}-mean_acceptance_length") == fm.fmt_tau(k["mean_acceptance_length"])
        assert _text(page, f"#ac-{cls}-break_even_alpha") == fm.fmt_rate(k["break_even_alpha"])
    names = page.evaluate("() => document.querySelector('#ac-chart .js-plotly-plot').data.map(t => t.name)")
    lines = [n for n in names if not n.startswith("break-even ")]
    assert {n.split(" ")[0] for n in lines} == {k["traffic_class"] for k in summary["classes"]}
    # every class with a break-even alpha has its own dotted line, named with its value
    assert sorted(n for n in names if n.startswith("break-even ")) == sorted(
        f"break-even {k['traffic_class']} {k['break_even_alpha']:.3f}" for k in summary["classes"]
        if k["break_even_alpha"] is not None)
    _no_traceback(page)


def test_model_page_shows_the_summary_of_the_api(running, page, window):
    page.goto(running.dash_url + "/model" + _qs(window, model=MODEL, cls="chat"))
    wait_idle(page)
    chat = next(k for k in _api(running, "/summary", model=MODEL, **window)["classes"] if k["traffic_class"] == "chat")
    assert _text(page, "#md-kpi-acceptance_rate") == fm.fmt_rate(chat["acceptance_rate"])
    assert _text(page, "#md-kpi-mean_acceptance_length") == fm.fmt_tau(chat["mean_acceptance_length"])
    p99 = next(q for q in chat["itl"]["quantiles"] if q["q"] == 0.99)
    v = p99["verdict"]  # the card shows the verdict's interval from bucket edges, its label and its reason
    assert _text(page, "#md-kpi-p99-itl") == fm.fmt_delta_ms(p99["delta"])
    assert _text(page, "#md-interval-itl") == "interval " + fm.fmt_interval(v["delta_low"], v["delta_high"])
    assert _text(page, "#md-verdict-itl").endswith(fm.VERDICTS[v["verdict"]][1])
    assert _text(page, "#md-reason-itl") == v["reason"]
    assert "per engine step" in page.inner_text("body") and "per token" in page.inner_text("body")
    # the speedup card: measured and the estimate from step times, each epsilon named with its source
    assert _text(page, "#md-kpi-speedup") == (f"{fm.fmt_speedup(chat['measured_speedup'])} / "
                                              f"{fm.fmt_speedup(chat['estimated_speedup'])}")
    assert chat["eps_step_source"] == "measured"  # the seeded pools report ITL sums against a baseline
    assert fm.fmt_eps_step(chat["eps_step"], "measured") in page.inner_text("body")
    bars = page.evaluate("() => document.querySelector('#md-position .js-plotly-plot').data[0].y")
    assert [round(v, 6) for v in bars] == [round(v, 6) for v in chat["per_position_conditional"]]
    _no_traceback(page)


def _grid_cell(page, row_id: str, col: str) -> str:
    """A cell of the overview grid, scrolled into view first (the grid renders only the visible columns)."""
    page.evaluate("""async ([col]) => {
        const api = await dash_ag_grid.getApiAsync('ov-grid');
        api.ensureColumnVisible(col);
    }""", [col])
    return _text(page, f'.ag-center-cols-container .ag-row[row-id="{row_id}"] [col-id="{col}"]')


def test_model_page_latency_delta_reads_as_on_the_overview(running, page, window):
    """One number, one name: the model page's P99 ITL / TPOT Δ card shows the overview grid's text for the
    same row and window (the API's point delta), and the verdict's bucket interval under its own name."""
    fleet = _api(running, "/fleet", **window)
    rows = [r for r in fleet["rows"] if r["model_name"] == MODEL and r["spec_mode"] != "off"]
    assert {r["traffic_class"] for r in rows} >= {"chat", "code"}
    page.goto(running.dash_url + "/" + _qs(window))
    wait_idle(page)
    shown = {}
    for r in rows:
        rid = f'{r["model_name"]}|{r["traffic_class"]}|{r["spec_mode"]}'
        for family in ("itl", "tpot"):
            text = _grid_cell(page, rid, f"p99_{family}_delta")
            assert text == fm.fmt_delta_ms(r[f"p99_{family}_delta"]) != fm.NO_DATA, (rid, family, text)
            shown[(r["traffic_class"], family)] = text
    for r in rows:
        page.goto(running.dash_url + "/model" + _qs(window, model=MODEL, cls=r["traffic_class"]))
        wait_idle(page)
        for family in ("itl", "tpot"):
            assert _text(page, f"#md-kpi-p99-{family}") == shown[(r["traffic_class"], family)], (r, family)
            interval = fm.fmt_interval(r[f"p99_{family}_delta_low"], r[f"p99_{family}_delta_high"])
            assert _text(page, f"#md-interval-{family}") == f"interval {interval}"
    _no_traceback(page)


def test_calculator_shows_the_calc_api_numbers(running, page):
    page.goto(running.dash_url + "/calculator")
    wait_idle(page)
    speed = httpx.post(f"{running.api_url}/api/v1/calc/speedup", json={"k": 5, "alpha": 0.7, "overhead": 0.1},
                       headers=running.headers).json()
    assert _text(page, "#ca-kpi-speedup") == fm.fmt_speedup(speed["values"]["speedup"])
    req = httpx.post(f"{running.api_url}/api/v1/calc/required-alpha",
                     json={"k": 5, "speedup": 2, "overhead": 0.1}, headers=running.headers).json()
    assert _text(page, "#ca-kpi-alpha-2x") == fm.fmt_rate(req["values"]["alpha_required"])
    _no_traceback(page)


def test_a_window_change_updates_the_url_and_the_charts(running, page):
    page.goto(running.dash_url + f"/acceptance?window=1h&model={MODEL}")
    wait_idle(page)
    points = ("() => { const p = document.querySelector('#ac-chart .js-plotly-plot');"
              " return p && p.data && p.data[0] && p.data[0].x ? p.data[0].x.length : -1; }")
    before = page.evaluate(points)
    assert before > 0
    page.select_option("#window-select", "6h")
    page.wait_for_url("**window=6h**", timeout=deadline_ms(60))
    page.wait_for_function(f"() => ![-1, {before}].includes(({points})())", timeout=deadline_ms(120))
    wait_idle(page)
    assert page.evaluate(points) > before
    assert "last 6h" in page.inner_text("#ac-status")
    # the window is kept across pages: the navbar links carry it
    page.click("#nav-overview")
    page.wait_for_url("**/?window=6h**", timeout=deadline_ms(60))
    wait_idle(page)
    assert page.input_value("#window-select") == "6h"
    _no_traceback(page)


def test_an_empty_pool_shows_since_when_it_has_no_data(running, page):
    page.goto(running.dash_url + "/acceptance?window=1h&model=empty-model")
    wait_idle(page)
    last_seen = next(p["last_seen"] for p in _api(running, "/pools")["pools"] if p["model_name"] == "empty-model")
    text = _text(page, ".sw-empty")
    since = fm.fmt_time(datetime.fromisoformat(last_seen))
    assert "no data for empty-model" in text and f"since {since}" in text
    assert _text(page, "#ac-chat-acceptance_rate") == "—"
    assert page.get_attribute("#ac-chat-acceptance_rate", "title") == "no data"
    _no_traceback(page)


def test_a_stopped_backend_shows_the_error_state_then_recovers(seeded, tmp_path: Path, page):
    port = free_port()
    api, api_url = start_api(seeded[0], tmp_path, port=port)
    dash, dash_url = start_dashboard(api_url, tmp_path)
    try:
        page.goto(dash_url + "/")
        wait_idle(page)
        page.wait_for_selector(".ag-center-cols-container .ag-row", timeout=deadline_ms(120))
        api.stop()
        for path in ("/", f"/acceptance?model={MODEL}", f"/model?model={MODEL}", "/calculator"):
            page.goto(dash_url + path)
            wait_idle(page)
            assert "backend unreachable — retrying" in _text(page, ".sw-error"), path
            _no_traceback(page)
        page.goto(dash_url + "/")
        _text(page, ".sw-error")
        api, _ = start_api(seeded[0], tmp_path, port=port)  # back on the same address
        page.wait_for_selector(".sw-error", state="detached", timeout=deadline_ms(120))
        page.wait_for_selector(".ag-center-cols-container .ag-row", timeout=deadline_ms(120))
        _no_traceback(page)
    finally:
        dash.stop()
        api.stop()
    assert "Traceback" not in (tmp_path / "dashboard.log").read_text()


def test_each_page_loads_without_script_errors(running, page):
    """How fast is `make bench` (dashboard); here each page settles and shows no traceback."""
    for path in ("/", f"/acceptance?model={MODEL}", f"/model?model={MODEL}", "/calculator"):
        page.goto(running.dash_url + path)
        wait_idle(page)
        _no_traceback(page)


def test_the_overview_changes_its_window_in_place(running, page):
    """The overview keeps its page and grid on a window change (no Dash pages re-render): URL, status, rows
    and nav links follow; back restores the previous window in the control and the rows."""
    page.goto(running.dash_url + "/?window=1h")
    page.wait_for_selector(".ag-center-cols-container .ag-row", timeout=deadline_ms(120))
    wait_idle(page)
    page.evaluate("() => { document.querySelector('#ov-grid').dataset.probe = 'kept'; }")
    outputs: list[str] = []  # what the server was asked to compute during the change
    page.on("request", lambda r: outputs.append(json.loads(r.post_data)["output"])
            if "_dash-update-component" in r.url else None)
    page.select_option("#window-select", "24h")
    page.wait_for_url("**window=24h**", timeout=deadline_ms(60))
    page.wait_for_function("() => document.querySelector('#ov-status').innerText.includes('last 24h')",
                           timeout=deadline_ms(120))
    wait_idle(page)
    # URL, query and control move in the browser: the rows are the one server round trip on the critical path
    # (a server callback on the control, e.g. the window sync, would hold the rows' request back until it
    # answered: Dash waits for every callback upstream of an input)
    assert not [o for o in outputs if "url-soft.search" in o or "ov-query.data" in o or "window-select.value" in o
                or "window-pick.data" in o], outputs
    assert sum("ov-grid.rowData" in o for o in outputs) == 1, outputs
    assert page.evaluate("() => document.querySelector('#ov-grid').dataset.probe") == "kept"  # same grid node
    assert "window=24h" in page.get_attribute("#nav-overview", "href")
    drafts = _api(running, "/fleet", window="24h")["rows"][0]
    rid = f'{drafts["model_name"]}|{drafts["traffic_class"]}|{drafts["spec_mode"]}'
    assert _text(page, f'.ag-center-cols-container .ag-row[row-id="{rid}"] [col-id="acceptance_rate"]') == \
        fm.fmt_rate(drafts["acceptance_rate"])
    page.go_back()
    page.wait_for_function("() => document.querySelector('#ov-status').innerText.includes('last 1h')",
                           timeout=deadline_ms(120))
    wait_idle(page)
    assert page.input_value("#window-select") == "1h"
    _no_traceback(page)


@pytest.mark.parametrize(("path", "probe", "status"), [
    (f"/acceptance?window=1h&model={MODEL}", "#ac-chart", "#ac-status"),
    (f"/model?window=1h&model={MODEL}&cls=chat", "#md-position", "#md-status"),
])
def test_the_charts_pages_change_their_window_in_place(running, page, path, probe, status):
    """As the overview: a window change keeps the page (no Dash pages re-render), only the page's data
    callback goes to the server, and back restores the window."""
    page.goto(running.dash_url + path)
    wait_idle(page)
    page.evaluate(f"() => {{ document.querySelector('{probe}').dataset.probe = 'kept'; }}")
    outputs: list[str] = []
    page.on("request", lambda r: outputs.append(json.loads(r.post_data)["output"])
            if "_dash-update-component" in r.url else None)
    page.select_option("#window-select", "6h")
    page.wait_for_url("**window=6h**", timeout=deadline_ms(60))
    assert f"model={MODEL}" in page.url  # the rest of the view is kept
    page.wait_for_function(f"() => document.querySelector('{status}').innerText.includes('last 6h')", timeout=deadline_ms(120))
    wait_idle(page)
    assert page.evaluate(f"() => document.querySelector('{probe}').dataset.probe") == "kept"
    assert not [o for o in outputs if "_pages_content" in o or "url-soft.search" in o or "window-select.value" in o],\
        outputs
    page.go_back()
    page.wait_for_function(f"() => document.querySelector('{status}').innerText.includes('last 1h')", timeout=deadline_ms(120))
    wait_idle(page)
    assert page.input_value("#window-select") == "1h"
    _no_traceback(page)


@pytest.mark.parametrize(("start", "end", "shown_start", "shown_end"), [
    ("2026-11-30T08:00:00Z", "2026-11-30T09:30:00Z", "2026-11-30T08:00", "2026-11-30T09:30"),
    # as dashboard.state._iso reads them: naive is UTC, an offset is converted
    ("2026-11-30T08:00", "2026-11-30T10:15:00+02:00", "2026-11-30T08:00", "2026-11-30T08:15"),
])
def test_back_to_a_custom_range_restores_it_in_the_control(running, page, start, end, shown_start, shown_end):
    """Back from an in-place change to a custom range: the control (worked out in the browser, as
    dashboard.state.from_params would) shows "custom" and the range again, and the rows follow."""
    page.goto(running.dash_url + "/?" + urlencode({"start": start, "end": end}))
    page.wait_for_function("() => (document.querySelector('#ov-status') || {innerText: ''}).innerText.includes('→')",
                           timeout=deadline_ms(120))
    wait_idle(page)
    assert page.input_value("#window-select") == "custom"
    page.select_option("#window-select", "24h")
    page.wait_for_function("() => document.querySelector('#ov-status').innerText.includes('last 24h')",
                           timeout=deadline_ms(120))
    wait_idle(page)
    assert page.input_value("#window-select") == "24h" and not page.is_visible("#window-custom-box")
    page.go_back()
    page.wait_for_function("() => document.querySelector('#ov-status').innerText.includes('→')", timeout=deadline_ms(120))
    wait_idle(page)
    assert page.input_value("#window-select") == "custom" and page.is_visible("#window-custom-box")
    assert (page.input_value("#window-custom-start"), page.input_value("#window-custom-end")) == \
        (shown_start, shown_end)
    assert f"{shown_start.replace('T', ' ')} → {shown_end.replace('T', ' ')} UTC" in page.inner_text("#ov-status")
    _no_traceback(page)


def test_a_pick_off_the_in_place_pages_navigates(running, page):
    """On a page that reads the window but is not changed in place (per-request), picking a window goes
    through the server's window sync."""
    page.goto(running.dash_url + "/requests?window=1h")
    wait_idle(page)
    page.select_option("#window-select", "7d")
    page.wait_for_url("**/requests?window=7d**", timeout=deadline_ms(60))
    wait_idle(page)
    assert page.input_value("#window-select") == "7d"
    assert "window=7d" in page.get_attribute("#nav-overview", "href")
    _no_traceback(page)


def test_custom_opens_when_the_url_holds_unusable_times(running, page):
    """A URL with a start and an end that are not a range shows the default window and is rewritten to it on
    load, so the window gate (which takes any start and end for a custom range) sees the default; picking
    "custom" then opens the range inputs."""
    page.goto(running.dash_url + "/?" + urlencode({"start": "yesterday", "end": "2026-11-30T10:00"}))
    page.wait_for_function("() => (document.querySelector('#ov-status') || {innerText: ''}).innerText.includes('last 1h')",
                           timeout=deadline_ms(120))
    wait_idle(page)
    assert page.input_value("#window-select") == "1h" and not page.is_visible("#window-custom-box")
    assert page.url.endswith("/?window=1h")  # the load rewrote the URL: the window gate only sees usable ones
    page.select_option("#window-select", "custom")
    page.wait_for_selector("#window-custom-box", state="visible", timeout=deadline_ms(60))
    assert page.input_value("#window-select") == "custom"
    _no_traceback(page)


def _k_tables(adv: dict):
    for mode in adv["modes"]:
        for cls in mode["classes"] + ([mode["mix"]] if mode["mix"] else []):
            yield f"md-k-{slug(mode['spec_mode'])}-{slug(cls['name'])}", cls


def test_model_page_k_advisor_shows_the_api_with_the_best_k_in_bold(running, page, window):
    page.goto(running.dash_url + "/model" + _qs(window, model=MODEL, cls="chat"))
    wait_idle(page)
    adv = _api(running, "/k-advice", model=MODEL, **window)
    tables = list(_k_tables(adv))
    assert {cls["name"] for _, cls in tables} >= {"chat", "code"}, adv
    for tid, cls in tables:
        for row in cls["rows"]:
            assert _text(page, f"#{tid}-{row['k']}-speedup") == fm.fmt_speedup(row["speedup"]), (tid, row)
            note = page.inner_text(f"#{tid}-{row['k']}-speedup + td")
            assert ("extrapolated" in note) == row["extrapolated"], (tid, row)
        best = page.locator(f"#{tid} tr.sw-k-best")
        assert best.count() == 1 and best.locator("td").first.inner_text() == str(cls["best_k"]), tid
        weight = page.evaluate(f"() => getComputedStyle(document.querySelector('#{tid} tr.sw-k-best td')).fontWeight")
        assert int(weight) >= 700, (tid, weight)
        assert _text(page, f"#{tid}-best").startswith(f"best K = {cls['best_k']}")
    _no_traceback(page)


@pytest.mark.parametrize("width,height", [(1440, 900), (390, 844)])
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_model_page_k_advisor_is_accessible_and_fits(running, page, window, width, height, theme):
    page.set_viewport_size({"width": width, "height": height})
    page.goto(running.dash_url + "/model" + _qs(window, model=MODEL, cls="chat"))
    wait_idle(page)
    if page.is_checked("#theme-switch") != (theme == "dark"):
        page.click("#theme-switch")
        page.wait_for_function(f"() => document.documentElement.getAttribute('data-bs-theme') === '{theme}'")
        wait_idle(page)
    page.wait_for_selector("#md-kadvice table")
    page.locator("#md-kadvice").scroll_into_view_if_needed()
    bad = blocking(axe_violations(page, axe_source()))
    assert not bad, bad
    assert horizontal_overflow(page) == 0
    assert outside_viewport(page, "#md-kadvice table td, #md-kadvice table th") == []
    _no_traceback(page)


@pytest.mark.parametrize("width,height", [(1440, 900), (390, 844)])
def test_verdicts_say_it_in_words_with_the_reason_on_hover_and_tap(running, page, window, width, height):
    """Each P99 verdict reads the one mapping's words (never the API's value); its meaning and reason are
    the summary's title (hover) and open in text on Enter (keyboard) or a tap (phone), and the page
    passes axe with the disclosures open."""
    page.set_viewport_size({"width": width, "height": height})
    page.goto(running.dash_url + "/acceptance" + _qs(window, model=MODEL))
    wait_idle(page)
    rows = [r for r in _api(running, "/fleet", **window, limit=1000)["rows"] if r["model_name"] == MODEL]
    checked = 0
    for r in rows:
        for field in ("p99_itl", "p99_tpot"):
            verdict = r[f"{field}_verdict"]
            if verdict is None:
                continue
            cell = f"#ac-{r['traffic_class']}-{field}"
            summary = page.locator(f"{cell} details.sw-why > summary")
            why = c.verdict_reason(verdict, r[f"{field}_reason"])
            assert summary.get_attribute("title") == why
            assert summary.inner_text().strip().endswith(fm.VERDICTS[verdict][1]), summary.inner_text()
            assert not page.is_visible(f"{cell} .sw-why-text")
            if width < 768:
                summary.click()  # a tap: the phone has no hover, the reason opens in text
            else:
                summary.focus()
                page.keyboard.press("Enter")
            page.wait_for_selector(f"{cell} details[open] .sw-why-text", state="visible")
            assert page.inner_text(f"{cell} .sw-why-text").strip() == why
            checked += 1
    assert checked >= 2, "the seeded fleet has P99 verdicts"
    body = page.inner_text("body")
    assert "unresolved" not in body and "no-significant-change" not in body
    bad = blocking(axe_violations(page, axe_source()))
    assert not bad, bad
    assert horizontal_overflow(page) == 0
    _no_traceback(page)


def test_the_window_control_shows_only_where_the_window_counts(running, page):
    """Pages that read the window show its control; rollout, report, plan, calculator and alerts hide it,
    also after client-side navigation between them."""
    from dashboard.app import WINDOW_PAGES

    assert set(WINDOW_PAGES) == {"overview", "acceptance", "model", "requests"}
    shown = {"/": True, f"/acceptance?model={MODEL}": True, f"/model?model={MODEL}": True, "/rollout": False,
             "/report": False, "/plan": False, "/calculator": False, "/alerts": False}
    for path, visible in shown.items():
        page.goto(running.dash_url + path)
        wait_idle(page)
        page.wait_for_function("([v]) => (getComputedStyle(document.getElementById('window-box')).display !== "
                               "'none') === v", arg=[visible])
        assert page.is_visible("#window-select") == visible, path
    page.click("#nav-overview")  # from /alerts (hidden) to the overview (shown), without a reload
    page.wait_for_selector("#window-select", state="visible")
    page.click("#nav-report")
    page.wait_for_selector("#window-select", state="hidden")
