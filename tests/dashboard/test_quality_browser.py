"""Every page at a desktop (1440x900) and a phone (390x844) viewport, in both themes, in headless Chromium
against the real API and dashboard on the demo fleet (every state present, alerts firing, logged in as an
operator, a few per-request records posted): axe-core finds no serious or critical WCAG 2.1 AA violation,
nothing makes the page (or a table in it) scroll sideways, what matters on each page is inside the viewport
with its text uncut, and the overview's and the per-domain page's state, model, class, alpha, margin and
latency verdicts are inside the viewport (a grid or table at 1440 px, one card per row on the phone)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import httpx
import pytest

from dashboard import formatting as fm
from tests.api.test_per_request_ingest import record
from tests.dashboard import seeding
from tests.dashboard.a11y import (
    axe_source,
    axe_violations,
    blocking,
    caption_width_share,
    horizontal_overflow,
    outside_viewport,
    sideways_scrollers,
    stacked_pairs,
)
from tests.dashboard.alerting_stack import auth_stack, fire_alerts, login, make_token
from tests.dashboard.browser import browser_context, wait_idle

pytestmark = pytest.mark.browser

PAGES = {
    "overview": "/?window=1h",
    "acceptance": "/acceptance?window=1h&model=llama-3.1-70b",
    "model": "/model?window=1h&model=llama-3.1-70b&cls=chat",
    "calculator": "/calculator",
    "rollout": "/rollout",
    "report": "/report",
    "plan": "/plan?model=llama-3.1-70b",
    "alerts": "/alerts?window=1h",
    "requests": "/requests?window=1h&model=m1",
    "compare": "/compare?model=llama-3.1-70b",
}
SIZES = {"desktop": (1440, 900), "phone": (390, 844)}
# the requests table's columns that must be on screen, text uncut (1440 px: all of them; on a phone the
# table scrolls sideways inside its own box for the share below the threshold and the quantiles)
REQUEST_COLUMNS = {"phone": ("class", "requests", "α draft-token-weighted", "α request-weighted"),
                   "desktop": ("class", "requests", "α draft-token-weighted", "α request-weighted", "share below",
                               "P10", "P50", "P90")}
# the overview's columns that must be on screen at 1440 px without scrolling the grid
OVERVIEW_COLUMNS = ("state_text", "model_link", "class_link", "acceptance_rate", "margin", "itl_verdict",
                    "tpot_verdict")
# what matters on each of the other pages, inside the viewport and uncut at both sizes: (selector, at least n)
KEY_CELLS = {
    "acceptance": (".sw-class-table td", 3 * 10),  # chat, code, mixed x every column
    "model": (".sw-kpi, #md-verdict-itl, #md-verdict-tpot", 9 + 2),
    "calculator": (".sw-kpi", 6),
    "rollout": (".sw-stack td", 11),
    "report": (".sw-stack td", 11),
    "plan": (".sw-form-field", 6),
    "alerts": (".sw-al-table td", 10),
    "requests": (".sw-table td", 2 * 8),
}
# the per-domain table's cells of each llama-3.1-70b class that must be readable: state, class, alpha,
# margin and both latency verdicts
CLASS_CELLS = ("class", "state", "acceptance_rate", "margin", "p99_itl", "p99_tpot")


@pytest.fixture(scope="module")
def demo(pg_admin_url, pg_template, tmp_path_factory, chromium_bin):
    with seeding.demo_clone(pg_admin_url, pg_template, "specwatch_dash_quality") as url:
        logs = tmp_path_factory.mktemp("quality-logs")
        seeding.seed_empty_pool(url, model="empty-model")
        assert seeding.seed_requests(url) > 100
        fire_alerts(url)
        seeding.evaluate_rollout(url)
        token = make_token(url, "operator", "alice")
        ingest = make_token(url, "ingest", "collector")
        with auth_stack(url, logs) as (api_url, dash_url):
            now = datetime.now(UTC)
            batch = [record(f"r{i}", [1, 2, 3, 4] if i % 2 else [4, 3, 1, 0], now=now, model="req-model",
                            cls=("chat", "code")[i % 2], output=50 + 40 * i, ago=60 + i) for i in range(12)]
            stored = httpx.post(f"{api_url}/api/v1/requests", json=batch, timeout=60,
                                headers={"Authorization": f"Bearer {ingest}"}).raise_for_status().json()
            assert stored["stored"] == 12
            yield {"dash": dash_url, "token": token}


@pytest.fixture(scope="module")
def axe() -> str:
    return axe_source()


@contextmanager
def _logged_in(chromium: str, demo: dict, size: str = "desktop") -> Iterator:
    """A page of a fresh browser at `size`, logged in as the operator."""
    width, height = SIZES[size]
    with browser_context(chromium, width=width, height=height) as ctx:
        page = ctx.new_page()
        login(page, demo["dash"], demo["token"])
        yield page


def _open(page, url: str) -> None:
    page.goto(url)
    wait_idle(page)
    page.mouse.wheel(0, 3000)  # charts below the fold render when scrolled to
    page.wait_for_timeout(300)
    wait_idle(page)


def _set_theme(page, dark: bool) -> None:
    if page.is_checked("#theme-switch") != dark:
        page.click("#theme-switch")
    page.wait_for_function(f"() => document.documentElement.getAttribute('data-bs-theme') === "
                           f"'{'dark' if dark else 'light'}'")
    wait_idle(page)


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("size", list(SIZES))
def test_every_page_passes_axe_and_has_no_sideways_scrolling(demo, axe, chromium_bin, size, theme):
    problems: dict[str, object] = {}
    with _logged_in(chromium_bin, demo, size) as page:
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        _set_theme(page, theme == "dark")
        for name, path in PAGES.items():
            _open(page, demo["dash"] + path)
            assert page.get_attribute("html", "data-bs-theme") == theme, name
            bad = blocking(axe_violations(page, axe))
            if bad:
                problems[f"{name}: axe"] = bad
            overflow = horizontal_overflow(page)
            if overflow:
                problems[f"{name}: wider than the viewport by"] = overflow
            scrollers = sideways_scrollers(page)
            if scrollers:
                problems[f"{name}: scrolls sideways inside"] = scrollers
        assert not errors, errors
    assert not problems, problems


def test_overview_at_1440_shows_the_verdict_columns_uncut(demo, chromium_bin):
    with _logged_in(chromium_bin, demo) as page:
        _open(page, demo["dash"] + PAGES["overview"])
        page.wait_for_selector(".ag-row[row-id]", timeout=30_000)
        for col in OVERVIEW_COLUMNS:
            assert page.locator(f'.ag-header-cell[col-id="{col}"]').count() == 1, col
        headers = ", ".join(f'.ag-header-cell[col-id="{col}"]' for col in OVERVIEW_COLUMNS)
        assert outside_viewport(page, headers, uncut=False) == []
        cells = ", ".join(f'.ag-row .ag-cell[col-id="{col}"]' for col in OVERVIEW_COLUMNS)
        assert page.locator(cells).count() >= 5 * len(OVERVIEW_COLUMNS)
        assert outside_viewport(page, cells) == []
        verdicts = page.locator('.ag-cell[col-id="itl_verdict"]').all_inner_texts()
        words = [fm.VERDICTS[k][1] for k in ("no-significant-change", "worse", "better")]  # the one mapping's words
        assert any(w in v for v in verdicts for w in words), verdicts
        spark = page.locator('.ag-cell[col-id="spark"] svg polyline').first
        box = spark.bounding_box()
        cell = page.locator('.ag-cell[col-id="spark"]').first.bounding_box()
        assert box and box["width"] > 0.6 * (cell["width"] - 20), (box, cell)  # the line spans the cell


@pytest.mark.parametrize("size", list(SIZES))
def test_requests_page_shows_its_columns_and_classes(demo, chromium_bin, size):
    with _logged_in(chromium_bin, demo, size) as page:
        _open(page, demo["dash"] + PAGES["requests"])
        page.mouse.wheel(0, -3000)
        page.wait_for_selector(".sw-rq-table td")
        headers = page.eval_on_selector_all(".sw-rq-table th", "els => els.map(e => e.innerText.trim())")
        cells = page.eval_on_selector_all(".sw-rq-table tbody tr td:first-child", "els => els.map(e => e.innerText)")
        assert cells == ["chat", "code"]
        for i, want in enumerate(REQUEST_COLUMNS[size]):
            assert headers[i].startswith(want), headers
            sel = f".sw-rq-table tr > :nth-child({i + 1})"
            assert outside_viewport(page, sel) == [], want


def test_on_a_phone_every_stacked_value_sits_beside_its_own_column_label(demo, chromium_bin):
    """Every table that stacks into cards on a phone (components.stacked: the model page's capacity and
    replica tables, the per-request table, the per-domain, rollout and report tables): each cell draws the
    label of its own column beside its value, whatever the row's cells are (a row header counts), and a
    caption spans its card column instead of being squeezed into one word per line."""
    problems: dict[str, object] = {}
    with _logged_in(chromium_bin, demo, "phone") as page:
        checked = 0
        for name, path in PAGES.items():
            _open(page, demo["dash"] + path)
            tables = page.evaluate("""() => [...document.querySelectorAll('table.sw-stack')].map((t, i) => {
                t.setAttribute('data-test-stack', String(i));  // a selector for each table, with or without id
                return {i, heads: [...t.querySelectorAll('thead th')].map(h => h.textContent.trim()),
                        caption: !!t.querySelector('caption')};
            })""")
            for t in tables:
                sel = f"table[data-test-stack='{t['i']}']"
                for r, cells in enumerate(stacked_pairs(page, sel)):
                    drawn = [cell["shown"] for cell in cells]
                    if drawn != t["heads"][:len(drawn)]:
                        problems[f"{name} {sel} row {r}"] = list(zip(drawn, [x["text"] for x in cells], strict=True))
                    checked += 1
                if t["caption"] and caption_width_share(page, sel) < 0.9:
                    problems[f"{name} {sel}: caption squeezed"] = caption_width_share(page, sel)
        assert checked >= 10  # rows of the model, requests, per-domain, rollout and report tables
    assert not problems, problems


def test_overview_on_a_phone_stacks_one_card_per_row(demo, chromium_bin):
    with _logged_in(chromium_bin, demo, "phone") as page:
        _open(page, demo["dash"] + PAGES["overview"])
        page.wait_for_selector(".sw-ov-card", timeout=30_000)
        assert not page.is_visible("#ov-grid")
        cards = page.locator(".sw-ov-card")
        assert cards.count() >= 8
        texts = cards.all_inner_texts()
        assert any("llama-3.1-70b" in t and "code" in t for t in texts), texts
        assert all(any(text in t for _, text, _ in fm.STATES.values()) for t in texts), texts
        for field in ("state", "model", "class", "alpha", "margin", "itl", "tpot"):
            assert outside_viewport(page, f".sw-ov-card [data-field='{field}']") == [], field
        assert page.locator(".sw-ov-card [data-field='class']").count() == cards.count()
        nav = page.locator(".sw-navbar").bounding_box()
        assert nav["height"] <= 120, nav  # the nav bar leaves the screen to the content
        assert horizontal_overflow(page) == 0


@pytest.mark.parametrize("path,data_outputs", [
    (PAGES["overview"], ["ov-grid.rowData"]),
    (PAGES["model"], ["md-kpis.children", "md-band.figure"]),
])
def test_first_data_in_one_round_of_callbacks(demo, chromium_bin, path, data_outputs):
    """Each data callback runs once on load (no second run from the theme store or the window control),
    and the model page's cards come from a callback that does not compute the time-slice charts."""
    with _logged_in(chromium_bin, demo) as page:
        outputs: list[str] = []
        page.on("request", lambda r: outputs.append(json.loads(r.post_data)["output"])
                if "/_dash-update-component" in r.url else None)
        _open(page, demo["dash"] + path)
        for name in data_outputs:
            assert sum(name in o for o in outputs) == 1, (name, outputs)
        if "md-kpis.children" in data_outputs:
            cards = next(o for o in outputs if "md-kpis.children" in o)
            assert "md-band.figure" not in cards and "md-itl.figure" not in cards


@pytest.mark.parametrize("size", list(SIZES))
def test_what_matters_on_every_page_is_inside_the_viewport(demo, chromium_bin, size):
    """The overview has its own tests (grid at 1440 px, cards on the phone); every other page's key cells."""
    problems: dict[str, object] = {}
    with _logged_in(chromium_bin, demo, size) as page:
        for name, (selector, least) in KEY_CELLS.items():
            _open(page, demo["dash"] + PAGES[name])
            if name == "plan":
                page.click("#pl-submit")
                page.wait_for_selector(".sw-plan h1, .sw-plan h2, .sw-plan p", timeout=30_000)
                wait_idle(page)
            shown = page.locator(selector).count()
            if shown < least:
                problems[f"{name}: {selector} shown"] = shown
            outside = outside_viewport(page, selector)
            if outside:
                problems[f"{name}: outside the viewport or cut"] = outside
            if name == "plan" and outside_viewport(page, ".sw-plan > *"):
                problems["plan: the generated plan"] = outside_viewport(page, ".sw-plan > *")
    assert not problems, problems


@pytest.mark.parametrize("size", list(SIZES))
def test_per_domain_table_shows_state_alpha_margin_and_verdicts_without_scrolling(demo, chromium_bin, size):
    with _logged_in(chromium_bin, demo, size) as page:
        _open(page, demo["dash"] + PAGES["acceptance"])
        page.wait_for_selector("#ac-mixed-state", timeout=30_000)
        for cls in ("chat", "code", "mixed"):
            cells = ", ".join(f"#ac-{cls}-{field}" for field in CLASS_CELLS)
            assert page.locator(cells).count() == len(CLASS_CELLS), cls
            assert outside_viewport(page, cells) == [], cls
            state = page.inner_text(f"#ac-{cls}-state")
            assert any(text in state for _, text, _ in fm.STATES.values()), state
            assert page.inner_text(f"#ac-{cls}-margin")[0] in "+−", cls
        verdicts = page.locator("[id$='-p99_itl'], [id$='-p99_tpot']").all_inner_texts()
        assert any(text in v for v in verdicts for _, text, _ in fm.VERDICTS.values()), verdicts
        display = page.evaluate("() => getComputedStyle(document.querySelector('.sw-class-table tbody tr')).display")
        assert display == ("block" if size == "phone" else "table-row")  # one card per class on the phone
        if size == "phone":
            label = page.evaluate("() => getComputedStyle(document.querySelector('#ac-chat-margin').closest('td'), '::before')"
                                  ".content")
            assert label == '"margin"'  # each value says which column it is
        assert sideways_scrollers(page) == [] and horizontal_overflow(page) == 0
