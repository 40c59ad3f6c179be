"""α by context length on the model page (and the weekly report page) in headless Chromium, at 1440 px and on
a phone (390 px), over the real API and dashboard: hand-computed bands with their 95 % intervals, the
`context_drift` alert's own evaluation when it fires, and a sentence (never a blank) for a model whose
records carry no prompt_tokens and for a model without per-request records. axe finds no serious WCAG 2.1 AA
violation and the page does not scroll sideways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backend.domain import context_view as cv
from tests.api.test_per_request_ingest import record
from tests.dashboard.a11y import axe_source, axe_violations, blocking, horizontal_overflow
from tests.dashboard.browser import browser_context, stack, wait_idle
from tests.support import db as dbsupport
from tests.support.deadline import deadline_ms

pytestmark = pytest.mark.browser

MODEL, NO_PROMPTS, ENGINE_ONLY = "ctx-m", "ctx-noprompt", "ctx-engine"
# K = 3 records of MODEL (a = accepted, d = drafted = 9, 3 steps each):
#   chat 1,500 prompt tokens: s1 [0,1,1,1] a = 6, s2 [0,0,0,3] a = 9      -> band 1,024–2,047
#   chat 200,000 prompt tokens: l1, l2 [0,3,0,0] a = 3 each               -> band 131,072+
#   code 5,000 prompt tokens: k1 [0,0,3,0] a = 6                           -> band 4,096–8,191, one request
RECORDS = [("s1", [0, 1, 1, 1], 1500, "chat"), ("s2", [0, 0, 0, 3], 1500, "chat"),
           ("l1", [0, 3, 0, 0], 200_000, "chat"), ("l2", [0, 3, 0, 0], 200_000, "chat"),
           ("k1", [0, 0, 3, 0], 5000, "code")]
# band 1,024–2,047: pooled 15/18 = 0.8333; the ratio estimator's se = sqrt(2/1 · ((6 − 7.5)² + (9 − 7.5)²)) / 18
#   = 3/18 = 0.16667, ± 1.95996 · se = ± 0.32666 -> 0.50667 .. 1.16 (clipped to 1). Request-weighted: mean of
#   6/9 and 9/9 = 0.8333, sd = 0.23570, ± 1.95996 · sd / sqrt(2) = ± 0.32666: the same interval.
SHORT_ROW = ["chat", "eagle3", "1,024–2,047", "2", "6", "0.833 (0.507–1.000)", "0.833 (0.507–1.000)"]
# band 131,072+: 6/18 = 0.3333, both requests alike: zero spread, the interval is the point
LONG_ROW = ["chat", "eagle3", "131,072+", "2", "6", "0.333 (0.333–0.333)", "0.333 (0.333–0.333)"]
CODE_ROW = ["code", "eagle3", "4,096–8,191", "1", "3", "0.667 (one request: no interval)",
            "0.667 (one request: no interval)"]
# context_drift (boundary 32,768): short side = the 1,500-token band (0.8333, se 0.16667), long side the
# 200,000-token band (0.3333, se 0); difference 0.5 ± 1.95996 · 0.16667 = 0.17334 .. 0.82666 > margin 0.05
DRIFT_TEXT = ("long-context α 0.333 (prompts of 32,768+ tokens) vs 0.833 below: difference 0.500, 95 % interval "
              "0.173 to 0.827, margin 0.05, over the last 1h")
RULES = {"version": 1, "rules": [{"name": "context-drift", "kind": "context_drift", "boundary": 32768,
                                  "margin": 0.05, "recover_margin": 0.02, "window": 3600, "min_drafts": 1,
                                  "for": 0, "keep_firing_for": 0}]}

ROWS = """(sel) => [...document.querySelectorAll(sel + ' tbody tr')].map(tr =>
    [...tr.children].map(td => (td.querySelector('.sw-cell-value') || td).innerText.trim()))"""


def _seed(url: str, rules_dir) -> None:
    from backend.config import Settings
    from backend.db.session import make_engine, make_sessionmaker, session_scope
    from backend.services import alerts, request_ingest
    from tests.factories import make_pool

    now = datetime.now(UTC)
    # the rules below, not a rules file's (none at this path)
    settings = Settings(_env_file=None, database_url=url, alert_rules_file=rules_dir / "none.yaml")
    batch = [{**record(rid, hist, now=now, cls=cls, model=MODEL), "prompt_tokens": p} for rid, hist, p, cls in RECORDS]
    batch += [record("n1", [0, 1, 1, 1], now=now, model=NO_PROMPTS)]  # no prompt_tokens
    engine = make_engine(url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            assert request_ingest.ingest(session, batch, settings=settings, now=now).stored == len(batch)
            make_pool(session, model_name=ENGINE_ONLY, first_seen=now - timedelta(hours=1), last_seen=now)
            alerts.store_config(session, RULES, source="test", by="test", now=now)
            alerts.evaluate(session, settings=settings, now=now)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def running(pg_admin_url: str, pg_template: str, tmp_path_factory, chromium_bin):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_ctx")
    try:
        _seed(url, tmp_path_factory.mktemp("ctx-rules"))
        with stack(url, tmp_path_factory.mktemp("ctx-logs")) as s:
            yield s
    finally:
        dbsupport.drop_database(pg_admin_url, name)


@pytest.fixture(scope="module", params=[(1440, 900), (390, 844)], ids=["desktop", "phone"])
def browser(request, chromium_bin):
    width, height = request.param
    with browser_context(chromium_bin, width=width, height=height) as ctx:
        yield ctx


def _section(page, url: str) -> str:
    page.goto(url)
    wait_idle(page)
    page.wait_for_selector("#md-context > *", timeout=deadline_ms(120))
    wait_idle(page)
    return page.inner_text("#md-context")


def test_the_model_page_shows_hand_computed_bands_and_the_firing_alert(running, page):
    text = _section(page, f"{running.dash_url}/model?model={MODEL}&window=1h")
    assert page.evaluate(ROWS, "#md-context-table") == [SHORT_ROW, LONG_ROW, CODE_ROW]
    drift = page.inner_text("[data-field=context-drift]")
    assert "context_drift firing" in drift and "chat eagle3" in drift and DRIFT_TEXT in drift
    assert page.query_selector("[data-field=context-drift][data-class=code]") is None  # one request: no data
    assert cv.NOTE.split(".")[0] in text
    traces = page.evaluate("() => document.querySelector('#md-context-chart .js-plotly-plot').data"
                           ".map(t => [t.name, Array.from(t.y)])")
    assert ["chat pooled", [15 / 18, 6 / 18]] in traces and ["code request-weighted", [6 / 9]] in traces
    assert blocking(axe_violations(page, axe_source())) == []
    assert horizontal_overflow(page) == 0


def test_records_without_prompt_tokens_and_no_records_say_so(running, page):
    text = _section(page, f"{running.dash_url}/model?model={NO_PROMPTS}&window=1h")
    assert f"chat (eagle3): {cv.NO_PROMPT_TOKENS}" in text and page.query_selector("#md-context-table") is None
    assert page.query_selector("#md-context-chart") is None
    text = _section(page, f"{running.dash_url}/model?model={ENGINE_ONLY}&window=1h")
    assert cv.NO_RECORDS in text
    assert blocking(axe_violations(page, axe_source())) == []
    assert horizontal_overflow(page) == 0


def test_the_report_page_shows_the_same_bands(running, page):
    page.goto(f"{running.dash_url}/report")
    wait_idle(page)
    sel = f"#rp-context-{MODEL}"
    page.wait_for_selector(sel, timeout=deadline_ms(120))
    assert page.evaluate(ROWS, sel) == [SHORT_ROW, LONG_ROW, CODE_ROW]
    assert blocking(axe_violations(page, axe_source())) == []
