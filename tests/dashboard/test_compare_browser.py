"""The A/B page in headless Chromium against the real API and dashboard, drawing a real comparison of seeded
data (tests/support/compare_seed.py, hand-computed): the sentence and every figure, interval and verdict on
the page are the API's, and axe-core finds no serious or critical WCAG 2.1 AA violation once it is drawn, at
1440 px and on a phone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy.orm import Session

from backend.db.session import make_engine
from backend.domain import ab_compare as ab
from backend.domain.wording import verdict_text
from dashboard.pages.compare import NAMES, _num
from tests.dashboard.a11y import axe_source, axe_violations, blocking, horizontal_overflow
from tests.dashboard.browser import browser_context, stack, wait_idle
from tests.support import db as dbsupport
from tests.support.compare_seed import ALPHA_CHANGE, MODEL, SPEEDUP_CHANGE, seed
from tests.support.deadline import deadline, deadline_ms

pytestmark = pytest.mark.browser
PARAMS = {"model": MODEL, "a": "eagle3", "b": "eagle3.1", "range": "1h"}


@pytest.fixture(scope="module")
def running(pg_admin_url: str, pg_template: str, tmp_path_factory, chromium_bin):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_compare_page")
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            seed(session, (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0))
            session.commit()
        with stack(url, tmp_path_factory.mktemp("compare-logs")) as s:
            yield s
    finally:
        engine.dispose()
        dbsupport.drop_database(pg_admin_url, name)


def _rows(page) -> list[list[str]]:
    return page.evaluate("""() => Array.from(document.querySelectorAll('#cp-body tbody tr')).map(
        tr => Array.from(tr.querySelectorAll('td')).map(td => td.innerText.trim()))""")


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)], ids=["desktop", "phone"])
def test_the_page_draws_the_apis_comparison(running, chromium_bin, size):
    r = httpx.get(f"{running.api_url}/api/v1/compare", params=PARAMS, timeout=deadline(120), headers=running.headers)
    r.raise_for_status()
    api = r.json()
    (chat,) = api["scopes"] if len(api["scopes"]) == 1 else [s for s in api["scopes"] if s["scope"] == "chat"]
    with browser_context(chromium_bin, width=size[0], height=size[1]) as ctx:
        page = ctx.new_page()
        page.set_default_timeout(deadline_ms(120))  # every wait ends on its event; this only catches a hang
        page.goto(running.dash_url + "/compare?" + "&".join(f"{k}={v}" for k, v in PARAMS.items()))
        wait_idle(page)
        page.click("#cp-submit")
        page.wait_for_selector("#cp-sentence")
        wait_idle(page)
        # the sentence, as the API says it (and as hand-computed)
        assert page.inner_text("#cp-sentence").strip() == api["sentence"] == (
            "EAGLE-3.1 vs EAGLE-3 on llama-70b: speedup +25 % (12–40 %) on chat; "
            "saving per week n/a (no GPU price or replica count)")
        rows = {row[0]: row for row in _rows(page)}
        for m in chat["metrics"]:  # every figure: A, B, change with its interval, verdict
            name = NAMES.get(m["metric"], m["metric"])
            row = rows[name]
            assert row[1:4] == [_num(m["a"], m["metric"]), _num(m["b"], m["metric"]),
                                ab.percent_text(m["change"], m["change_low"], m["change_high"])], name
            assert verdict_text(m["verdict"]) in row[4], (name, row[4])
        for fam, v in chat["p99"].items():  # the latency verdicts: B's P99 against A's
            row = rows[f"P99 {fam.upper()}"]
            assert row[1:3] == ["—" if x is None else f"{x * 1000:.1f} ms" for x in (v["a"], v["b"])], fam
            assert verdict_text(v["verdict"]) in row[4], (fam, row[4])
        alpha = next(m for m in chat["metrics"] if m["metric"] == "alpha")
        speedup = next(m for m in chat["metrics"] if m["metric"] == "measured_speedup")
        assert (alpha["change"], alpha["change_low"], alpha["change_high"]) == pytest.approx(ALPHA_CHANGE, rel=1e-9)
        assert (speedup["change"], speedup["change_low"], speedup["change_high"]) == pytest.approx(SPEEDUP_CHANGE,
                                                                                                    rel=1e-9)
        assert rows["alpha"][1:4] == ["0.500", "0.600", "+20 % (15–25 %)"]
        assert rows["measured speedup"][3] == "+25 % (12–40 %)"
        assert horizontal_overflow(page) == 0
        bad = blocking(axe_violations(page, axe_source()))
        assert not bad, [(v["id"], v["help"], [n["target"] for n in v["nodes"][:3]]) for v in bad]
