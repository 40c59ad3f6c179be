"""Every page in headless Chromium on a fleet of every shape: models that run two spec modes beside their
baseline, a class that exists only through per-request records (filed under the spec mode of the engine
that served them: the model still runs one spec mode), a model known only through per-request records (one
spec mode, no baseline) and a model with a single pool. No page shows a backend error or a traceback, no
chart stays on "loading…", every chart draws data (a sentence only where the data cannot exist), at 1440 px
and on a phone (390 px). The per-domain and model pages show one spec mode at a time: the busiest by default,
the other on a pick, with the numbers the API gives for that mode; records never make a spec mode."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from dashboard import formatting as fm
from tests.dashboard import seeding
from tests.dashboard.a11y import axe_source, axe_violations, blocking, horizontal_overflow
from tests.dashboard.browser import stack, wait_idle
from tests.dashboard.seeding import PoolSpec
from tests.support import db as dbsupport
from tests.support.deadline import deadline, deadline_ms

pytestmark = pytest.mark.browser

TWO_ENGINE_MODES = "qwen2.5-32b"     # eagle3 (chat) and ngram (chat, summarize) beside a chat baseline
WITH_REQUESTS = "llama-3.1-70b"      # eagle3 (chat, code) + baselines; eagle3's records for chat and rag
REQUESTS_ONLY = "m1"                 # per-request records only (eagle3): one spec mode, no baseline
ONE_POOL = "mistral-7b"              # one pool, one class, no baseline
MODELS = (WITH_REQUESTS, TWO_ENGINE_MODES, REQUESTS_ONLY, ONE_POOL)

FLEET = (
    PoolSpec(WITH_REQUESTS, "chat", k=3, p0=0.86, decay=0.03, running=14),
    PoolSpec(WITH_REQUESTS, "code", k=3, p0=0.80, decay=0.10, running=14),
    PoolSpec(WITH_REQUESTS, "chat", spec_mode="off", k=None, running=14, step_ms=22, drafter=None),
    PoolSpec(WITH_REQUESTS, "code", spec_mode="off", k=None, running=14, step_ms=22, drafter=None),
    PoolSpec(TWO_ENGINE_MODES, "chat", k=5, p0=0.78, decay=0.02, running=24),
    PoolSpec(TWO_ENGINE_MODES, "chat", spec_mode="ngram", k=4, p0=0.55, decay=0.05, running=24, drafts_per_min=1500,
             drafter=None),
    PoolSpec(TWO_ENGINE_MODES, "summarize", spec_mode="ngram", k=4, p0=0.60, decay=0.05, running=24, drafter=None),
    PoolSpec(TWO_ENGINE_MODES, "chat", spec_mode="off", k=None, running=24, step_ms=20, drafter=None),
    PoolSpec(ONE_POOL, "chat", k=4, p0=0.62, decay=0.03, running=10, step_ms=45),
)

# what a page must never show: the API's words for API callers, a traceback, the guard's fault banner
BACKEND_TEXT = ("pass spec_mode", "runs several spec modes [", "Traceback", 'File "', "dashboard error",
                "could not be drawn", "loading…", "Internal Server Error", "Not Found")
# charts whose data cannot exist for a class known only through per-request records: they carry acceptance only
# (no running requests, no latency histograms), so these charts say so in a sentence
NO_ENGINE_DATA = {"md-band": "no concurrency data in this window",
                  "md-itl": "no ITL per engine step (chunk) data in this window",
                  "md-tpot": "no TPOT per token data in this window"}

CHARTS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => ({
    id: (p.closest('[id]') || {id: ''}).id,
    traces: (p.data || []).map(t => ({name: t.name || '', type: t.type || 'scatter',
        values: ['y', 'x', 'values'].filter(k => t[k] && t[k].length)
            .map(k => Array.from(t[k]).filter(v => v !== null && v !== undefined).length)
            .reduce((a, b) => Math.max(a, b), 0)})),
    notes: ((p.layout || {}).annotations || []).map(a => a.text || '')}))"""


@pytest.fixture(scope="module")
def seeded(pg_admin_url: str, pg_template: str):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_mix")
    seeding.seed_demo(url, hours=3.0, fleet=FLEET)
    # through the ingest behind POST /api/v1/requests: rag exists only in these records
    assert seeding.seed_requests(url, minutes=20, model=WITH_REQUESTS, classes=("chat", "rag")) > 0
    assert seeding.seed_requests(url, minutes=20, model=REQUESTS_ONLY, seed=5) > 0
    seeding.evaluate_rollout(url)
    yield url
    dbsupport.drop_database(pg_admin_url, name)


@pytest.fixture(scope="module")
def running(seeded, tmp_path_factory, chromium_bin):
    with stack(seeded, tmp_path_factory.mktemp("mix-logs")) as s:
        yield s


@pytest.fixture(scope="module")
def browser(desktop_and_phone):
    return desktop_and_phone


def _api(running, path: str, **params) -> dict:
    r = httpx.get(f"{running.api_url}/api/v1{path}", params=params, timeout=deadline(120), headers=running.headers)
    r.raise_for_status()
    return r.json()


def _modes(running, model: str) -> list[str]:
    """The model's spec modes as the pickers order them: still reporting first, then the busiest (drafts of
    each mode's pooled mix in the default window)."""
    classes = _api(running, "/summary", model=model)["classes"]
    drafts = {k["spec_mode"]: k["volume"]["drafts"] or 0 for k in classes if k["traffic_class"] == "mixed"}
    fresh = {m: any(not k["freshness"]["stale"] for k in classes if k["spec_mode"] == m) for m in drafts}
    return sorted(drafts, key=lambda m: (not fresh[m], -drafts[m], m))


def _open(page, url: str) -> None:
    page.goto(url)
    wait_idle(page)


def _check_page(page, *, no_data: dict[str, str] | None = None) -> list[dict]:
    """No backend text, no fault or unreachable banner, no script error; every chart drawn with data, or with
    exactly the sentence `no_data` allows for it. Returns the charts."""
    body = page.inner_text("body")
    for text in BACKEND_TEXT:
        assert text not in body, (text, page.url)
    assert page.query_selector_all(".sw-page-fault, #sw-error-banner, .alert-danger") == [], page.url
    assert not page.js_errors, page.js_errors
    charts = page.evaluate(CHARTS)
    for chart in charts:
        allowed = (no_data or {}).get(chart["id"])
        if allowed and allowed in chart["notes"]:
            continue
        drawn = [t for t in chart["traces"] if t["values"] > 0]
        assert drawn, (page.url, chart)
    return charts


def _picker(page, picker: str) -> tuple[str, list[str]]:
    """A dropdown's shown value and its options (opened, read, closed)."""
    value = page.inner_text(f"#{picker}-value").strip()
    page.click(f"#{picker}")
    page.wait_for_selector("[role=option]")
    options = [o.inner_text().strip() for o in page.query_selector_all("[role=option]")]
    page.keyboard.press("Escape")
    page.wait_for_selector("[role=option]", state="detached")
    return value, options


def _choose(page, picker: str, option: str) -> None:
    page.click(f"#{picker}")
    page.click(f"[role=option]:has-text('{option}')")
    page.wait_for_url(f"**mode={option}**", timeout=deadline_ms(60))
    wait_idle(page)


def _query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}


# --- every page, every model --------------------------------------------------------------------------------

def _paths() -> list[tuple[str, dict[str, str]]]:
    out: list[tuple[str, dict[str, str]]] = [("/", {}), ("/calculator", {}), ("/rollout", {}), ("/report", {}),
                                             ("/alerts", {}), ("/acceptance", {}), ("/model", {})]
    for model in MODELS:
        out += [(f"/acceptance?model={model}", {}), (f"/model?model={model}", {})]
    out += [(f"/model?model={WITH_REQUESTS}&cls=rag", {"mode": "eagle3"}),
            (f"/model?model={WITH_REQUESTS}&mode=eagle3&cls=chat", {}),
            (f"/model?model={TWO_ENGINE_MODES}&mode=eagle3", {}),
            (f"/acceptance?model={WITH_REQUESTS}&mode=eagle3", {}),
            (f"/acceptance?model={TWO_ENGINE_MODES}&mode=eagle3", {}),
            (f"/requests?model={WITH_REQUESTS}", {}), (f"/requests?model={REQUESTS_ONLY}", {})]
    return out


@pytest.mark.parametrize(("path", "why"), _paths(), ids=[p for p, _ in _paths()])
def test_every_page_draws_for_every_fleet_shape(running, page, path, why):
    _open(page, running.dash_url + path)
    q = _query(page)
    model = q.get("model")
    # a page of a class known only through per-request records: its engine-only charts say so
    shown_mode = q.get("mode") or (_modes(running, model)[0] if model and path.startswith("/model") else None)
    records_only = path.startswith("/model") and (model == REQUESTS_ONLY or q.get("cls") == "rag")
    no_data = NO_ENGINE_DATA if records_only else None
    assert why.get("mode") in (None, shown_mode)
    _check_page(page, no_data=no_data)
    if path.startswith(("/acceptance", "/model")):
        picker = "ac-model" if path.startswith("/acceptance") else "md-model"
        value, options = _picker(page, picker)
        assert value == model and sorted(options) == sorted(MODELS)  # the model picker is always filled


def test_the_rollout_page_lists_every_model_of_the_mix(running, page):
    _open(page, running.dash_url + "/rollout")
    _check_page(page)
    body = page.inner_text("body")
    for model in MODELS:
        assert model in body
    assert "rag" in body  # the class only per-request records have is a scope of its own


def test_the_plan_page_plans_a_model_with_two_spec_modes(running, page):
    _open(page, running.dash_url + "/plan")
    page.fill("#pl-model", TWO_ENGINE_MODES)
    page.fill("#pl-traffic", "chat=0.6,summarize=0.4")
    page.click("#pl-submit")
    page.wait_for_selector(".sw-plan table", timeout=deadline_ms(120))
    wait_idle(page)
    _check_page(page)
    assert f"Rollout plan: {TWO_ENGINE_MODES}" in page.inner_text(".sw-plan")


# --- the per-domain page: one spec mode at a time ------------------------------------------------------------

@pytest.mark.parametrize("model", [TWO_ENGINE_MODES])
def test_the_per_domain_page_shows_the_busiest_mode_then_the_picked_one(running, page, model):
    modes = _modes(running, model)
    assert len(modes) == 2 and "off" not in modes
    _open(page, f"{running.dash_url}/acceptance?model={model}")
    shown, options = _picker(page, "ac-mode")
    assert shown == modes[0] and options == modes and "mode" not in _query(page)  # the default is not written
    assert f"This model runs 2 spec modes: showing {modes[0]}" in page.inner_text("#ac-status")
    for mode in (modes[0], modes[1]):
        if mode != modes[0]:
            _choose(page, "ac-mode", mode)
        charts = {ch["id"]: ch for ch in _check_page(page)}
        summary = _api(running, "/summary", model=model)
        classes = [k for k in summary["classes"] if k["spec_mode"] == mode]
        lines = [t["name"] for t in charts["ac-chart"]["traces"] if not t["name"].startswith("break-even")]
        assert sorted(n.split(" ")[0] for n in lines) == sorted(k["traffic_class"] for k in classes)
        assert all(t["values"] > 0 for t in charts["ac-chart"]["traces"])
        assert sorted(t["name"] for t in charts["ac-tau-chart"]["traces"]) == sorted(k["traffic_class"]
                                                                                  for k in classes)
        _table_shows_the_api(running, page, model, mode)
    assert _query(page)["mode"] == modes[1]


def _table_shows_the_api(running, page, model: str, mode: str) -> None:
    """The per-class table shows this mode's numbers for the window, as the API gives them. The 1 h window
    slides with the clock, so a minute passing between the page's reads and the test's own can move them:
    the page is read again (reloaded) until the API answers the same before and after it."""
    def api_rows() -> dict[str, tuple[str, str]]:
        return {k["traffic_class"]: (fm.fmt_rate(k["acceptance_rate"]), str(k["num_spec_tokens"]))
                for k in _api(running, "/summary", model=model)["classes"] if k["spec_mode"] == mode}

    for _ in range(3):
        before = api_rows()
        page.reload()
        wait_idle(page)
        shown = {cls: (page.inner_text(f"#ac-{cls}-acceptance_rate").strip(),
                       page.inner_text(f"#ac-{cls}-num_spec_tokens").strip()) for cls in before}
        if api_rows() == before:
            assert shown == before
            return
    pytest.fail("the API's numbers for the window changed during every read of the page")


def test_a_mode_the_model_does_not_run_falls_back_to_the_busiest(running, page):
    modes = _modes(running, TWO_ENGINE_MODES)
    _open(page, f"{running.dash_url}/acceptance?model={TWO_ENGINE_MODES}&mode=medusa")
    _check_page(page)
    assert _picker(page, "ac-mode")[0] == modes[0]


# --- the model page: bars labelled, one mode at a time ---------------------------------------------------------

@pytest.mark.parametrize("model", [TWO_ENGINE_MODES])
def test_the_model_page_shows_one_mode_and_its_bars_side_by_side(running, page, model):
    modes = _modes(running, model)
    _open(page, f"{running.dash_url}/model?model={model}")
    shown, options = _picker(page, "md-mode")
    assert shown == modes[0] and options == modes
    for mode in modes:
        if mode != shown:
            _choose(page, "md-mode", mode)
        charts = {ch["id"]: ch for ch in _check_page(page)}
        bars = page.evaluate("() => document.querySelector('#md-speedup .js-plotly-plot').data.map(t => t.x)")
        classes = [k["traffic_class"] for k in _api(running, "/summary", model=model)["classes"]
                   if k["spec_mode"] == mode]
        for x in bars:  # one column per class of this mode: no two "mixed" bars in one column
            assert list(x) == classes and len(set(x)) == len(x)
        assert charts["md-position"]["traces"][0]["values"] > 0
        assert f"showing {mode}" in page.inner_text("#md-status")


def test_records_classes_are_rows_of_the_engines_one_spec_mode(running, page):
    """Records for chat and rag of an eagle3 engine that labels chat and code: one spec mode, chat and code
    from the engine, rag from the records, one mixed row (the engine's): no second mode, no second mixed."""
    classes = _api(running, "/summary", model=WITH_REQUESTS)["classes"]
    assert [(k["traffic_class"], k["spec_mode"], k["source"]) for k in classes] == [
        ("chat", "eagle3", "engine"), ("code", "eagle3", "engine"), ("rag", "eagle3", "records"),
        ("mixed", "eagle3", "engine")]
    for path in (f"/acceptance?model={WITH_REQUESTS}", f"/model?model={WITH_REQUESTS}"):
        _open(page, running.dash_url + path)
        _check_page(page)
        body = page.inner_text("body")
        assert "runs 2 spec modes" not in body and "several spec modes" not in body
        if path.startswith("/acceptance"):  # the class read from records says so; the engine's do not
            assert "from per-request records" in page.inner_text("#ac-rag-class")
            assert "records" not in page.inner_text("#ac-chat-class")
    bars = page.evaluate("() => document.querySelector('#md-speedup .js-plotly-plot').data.map(t => t.x)")
    for x in bars:  # one column per class: one "mixed"
        assert list(x) == [k["traffic_class"] for k in classes] and len(set(x)) == len(x)


def test_a_class_only_per_request_records_have_opens_in_the_engines_mode(running, page):
    """rag exists only in per-request records: its page shows the records' numbers under eagle3."""
    _open(page, f"{running.dash_url}/model?model={WITH_REQUESTS}&cls=rag")
    assert _picker(page, "md-class")[0] == "rag"
    _check_page(page, no_data=NO_ENGINE_DATA)
    rag = next(k for k in _api(running, "/summary", model=WITH_REQUESTS)["classes"]
               if (k["traffic_class"], k["spec_mode"]) == ("rag", "eagle3"))
    assert page.inner_text("#md-kpi-acceptance_rate").strip() == fm.fmt_rate(rag["acceptance_rate"])
    assert "per-request records" in page.inner_text("#md-status")


def test_overview_rows_link_to_their_own_spec_mode(running, page, browser):
    if browser.width < 768:
        pytest.skip("the grid's links (the phone's cards are the overview's own tests)")
    _open(page, running.dash_url + "/")
    fleet = _api(running, "/fleet")
    modes = {(r["model_name"], r["spec_mode"]) for r in fleet["rows"]}
    assert {(WITH_REQUESTS, "eagle3"), (TWO_ENGINE_MODES, "ngram"), (REQUESTS_ONLY, "eagle3")} <= modes
    assert not any(mode == "per-request" for _, mode in modes)
    hrefs = page.evaluate("() => [...document.querySelectorAll('a[href^=\"/model?\"]')].map(a => a.getAttribute('href'))")
    linked = {(q["model"][0], q["mode"][0]) for q in (parse_qs(urlsplit(h).query) for h in hrefs) if "mode" in q}
    assert (TWO_ENGINE_MODES, "ngram") in linked and (TWO_ENGINE_MODES, "eagle3") in linked


# --- accessibility and layout of the pickers ----------------------------------------------------------------------

@pytest.mark.parametrize("path", [f"/acceptance?model={TWO_ENGINE_MODES}", f"/model?model={WITH_REQUESTS}"])
def test_the_mode_pickers_pass_axe_and_fit_the_screen(running, page, browser, path):
    _open(page, running.dash_url + path)
    assert blocking(axe_violations(page, axe_source())) == []
    if path.startswith("/acceptance"):  # the model page's phone layout is checked by its own tests
        assert horizontal_overflow(page) == 0
    picker = page.query_selector("#ac-mode, #md-mode").bounding_box()
    assert picker["x"] >= 0 and picker["x"] + picker["width"] <= browser.width
