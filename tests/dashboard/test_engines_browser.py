"""The overview and the model page of a three-engine fleet (vLLM seeded, llama.cpp and SGLang collected
through the real direct scrape: engine_seeding.py) in headless Chromium, at 1440 px and on a phone: the
engine column and filter, "not exposed by <engine>" where an engine has no figure (never 0 or blank),
"estimated" with its basis for SGLang, the vLLM + SGLang mix kept exact and saying what it leaves out, and
no blocking axe violation nor sideways scrolling."""

from __future__ import annotations

import pytest

from tests.dashboard import engine_seeding as es
from tests.dashboard.a11y import axe_source, axe_violations, blocking, horizontal_overflow
from tests.dashboard.browser import stack, wait_idle
from tests.support import db as dbsupport
from tests.support.deadline import deadline_ms

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def seeded(pg_admin_url: str, pg_template: str):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_engui")
    es.seed_engines(url)
    yield url
    dbsupport.drop_database(pg_admin_url, name)


@pytest.fixture(scope="module")
def running(seeded, tmp_path_factory, chromium_bin):
    # the scraped buckets are a second wide and a few seconds old: the API reads them at that width
    with stack(seeded, tmp_path_factory.mktemp("engines-logs"), api_settings={"bucket_seconds": 1}) as s:
        yield s


@pytest.fixture(scope="module")
def browser(desktop_and_phone):
    return desktop_and_phone


def _open(page, url: str) -> str:
    page.goto(url)
    wait_idle(page)
    assert not page.js_errors, page.js_errors
    return page.inner_text("body")


def _rows(page) -> dict[str, dict[str, str]]:
    """The overview grid's rows (desktop): {model · class: {column field: shown text}}."""
    return page.evaluate("""() => {
        const byIndex = new Map();
        for (const row of document.querySelectorAll('#ov-grid .ag-row')) {
            const i = row.getAttribute('row-index');
            const cells = byIndex.get(i) || {};
            for (const c of row.querySelectorAll('[col-id]')) cells[c.getAttribute('col-id')] = c.innerText.trim();
            byIndex.set(i, cells);
        }
        return Object.fromEntries(Array.from(byIndex.values()).map(r => [r.model_link + ' · ' + r.class_link, r]));
    }""")


def _cards(page) -> dict[str, str]:
    return {c.get_attribute("id"): c.inner_text() for c in page.query_selector_all(".sw-ov-card")}


def test_overview_engine_column_and_wording(running, page, browser):
    body = _open(page, running.dash_url + "/")
    if browser.width >= 768:
        rows = _rows(page)
        sg, ll = rows[f"{es.SGLANG_MODEL} · chat"], rows[f"{es.LLAMA_MODEL} · chat"]
        mixed, vllm = rows[f"{es.SGLANG_MODEL} · mixed"], rows[f"{es.VLLM_MODEL} · chat"]
        assert (sg["engine_text"], ll["engine_text"], vllm["engine_text"], mixed["engine_text"]) == (
            "SGLang", "llama.cpp", "vLLM", "vLLM + SGLang")
        assert sg["acceptance_rate"] == "0.500 (estimated)" and sg["mean_acceptance_length"] == "2.00 (estimated)"
        assert sg["drafts"] == "not exposed by SGLang" and sg["margin"] == "not exposed by SGLang"
        assert sg["tpot_verdict"] == "not exposed by SGLang"
        assert ll["acceptance_rate"] == "0.625" and ll["mean_acceptance_length"] == "3.50"
        assert ll["itl_verdict"] == ll["tpot_verdict"] == "not exposed by llama.cpp"
        assert rows[f"{es.SGLANG_MODEL} · code"]["acceptance_rate"] == mixed["acceptance_rate"]  # vLLM counts only
    else:
        cards = _cards(page)
        sg = next(t for i, t in cards.items() if i.startswith(f"ov-card-{es.SGLANG_MODEL}|chat"))
        ll = next(t for i, t in cards.items() if i.startswith(f"ov-card-{es.LLAMA_MODEL}|chat"))
        assert "SGLang" in sg and "0.500 (estimated)" in sg and "not exposed by SGLang" in sg
        assert "llama.cpp" in ll and "0.625" in ll and "not exposed by llama.cpp" in ll
    assert " 0.000" not in body
    assert blocking(axe_violations(page, axe_source())) == []
    assert horizontal_overflow(page) == 0


def test_overview_engine_filter(running, page, browser):
    _open(page, running.dash_url + "/")
    page.click("#ov-engine")
    page.click("[role=option]:has-text('llama.cpp')")
    page.wait_for_function("() => !document.body.innerText.includes('qwen-7b')", timeout=deadline_ms(60))
    page.mouse.move(0, 0)  # no cell tooltip left open under the pointer
    wait_idle(page)
    if browser.width >= 768:  # the grid's rows (its model cells), not the text of a tooltip
        assert {key.split(" · ")[0] for key in _rows(page)} == {es.LLAMA_MODEL}
    else:
        shown = page.inner_text("#ov-cards")
        assert es.LLAMA_MODEL in shown and es.VLLM_MODEL not in shown and es.SGLANG_MODEL not in shown


def test_model_page_pools_and_kpis(running, page, browser):
    _open(page, running.dash_url + f"/model?model={es.SGLANG_MODEL}&cls=chat&mode={es.MODE}")
    kpi = page.inner_text("#md-kpi-acceptance_rate")
    assert "0.500 (estimated)" in kpi
    assert "not exposed by SGLang" in page.inner_text("#md-kpi-drafts")
    table = page.inner_text("#md-engine-pools")
    assert "SGLang" in table and "vLLM" in table and "not exposed by SGLang" in table
    assert "0.500 (estimated)" in table
    notes = page.inner_text("#md-engine-notes")
    assert "estimated from SGLang's spec_accept_length" in notes
    assert "SGLang pools excluded" in page.inner_text("#md-mixed-excluded")
    assert "2.00 (estimated)" in page.inner_text("#md-kpi-mean_acceptance_length")
    assert "not exposed by SGLang" in page.inner_text("#md-kpi-margin")
    assert "not exposed by SGLang" in page.inner_text("#md-kpi-p99-tpot")
    assert blocking(axe_violations(page, axe_source())) == []
    assert horizontal_overflow(page) == 0, page.evaluate("""() => [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
        .map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + (e.innerText || '').slice(0, 40)).slice(0, 15)""")
    _open(page, running.dash_url + f"/model?model={es.LLAMA_MODEL}")
    assert "not exposed by llama.cpp" in page.inner_text("#md-kpi-p99-itl")
    assert "0.625" in page.inner_text("#md-kpi-acceptance_rate")
    assert "llama.cpp" in page.inner_text("#md-engine-pools")
