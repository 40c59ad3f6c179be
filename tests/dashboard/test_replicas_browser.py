"""The model page's replica table in headless Chromium against the running API, on the `bad-replica`
scenario seeded through the collector code: each cell shows what GET /models/{model}/replicas returns, the
bad replica is marked in text (not by colour alone), no WCAG 2.1 AA violation, readable at 1440 and 390 px;
on a phone every value sits beside its own label (the pairs read from the page match the API's replica)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from urllib.parse import quote

import httpx
import pytest

from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker
from backend.services.history import seed_history
from dashboard import formatting as fm
from tests.dashboard import a11y
from tests.dashboard.browser import browser_context, stack, wait_idle
from tests.support import db as dbsupport
from tests.support.deadline import deadline, deadline_ms

pytestmark = pytest.mark.browser

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(scope="module")
def running(pg_admin_url, pg_template, tmp_path_factory, chromium_bin):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_rep")
    engine = make_engine(url)
    end = int(time.time()) // 600 * 600  # 40 minutes up to the last 10-minute edge; replica-2 bad from minute 15
    try:
        seed_history(make_sessionmaker(engine), Settings(_env_file=None), scenario="bad-replica", seconds=2400,
                     end=end, seed=5, scrape_interval=30.0, tick=5.0)
    finally:
        engine.dispose()
    try:
        with stack(url, tmp_path_factory.mktemp("rep-logs")) as s:
            yield s
    finally:
        dbsupport.drop_database(pg_admin_url, name)


def _replicas(running, window: str) -> dict:
    r = httpx.get(f"{running.api_url}/api/v1/models/{quote(MODEL, safe='/')}/replicas", params={"window": window},
                  timeout=deadline(120), headers=running.headers)
    r.raise_for_status()
    return r.json()


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)])
def test_the_replica_table_shows_the_api_numbers_readably(running, chromium_bin, width, height):
    body = _replicas(running, "30m")
    (pool,) = [p for p in body["pools"] if p["spec_mode"] == "eagle3"]
    assert len(pool["replicas"]) == 4
    with browser_context(chromium_bin, width=width, height=height) as ctx:
        page = ctx.new_page()
        page.set_default_timeout(deadline_ms(120))
        page.goto(running.dash_url + f"/model?window=30m&model={quote(MODEL, safe='')}")
        wait_idle(page)
        page.wait_for_selector("#md-replica-table", timeout=deadline_ms(120))
        for r in pool["replicas"]:
            name = f"{r['instance']}/{r['engine']}" if r["engine"] else r["instance"]
            alpha = page.inner_text(f"[id='md-rep-{name}-alpha']").strip()
            assert alpha.startswith(fm.fmt_rate(r["acceptance_rate"])), (name, alpha)
            low = r["others_acceptance_rate"] - r["acceptance_rate"] > 0.10
            assert ("below the others" in alpha) == low == (r["instance"] == "replica-2"), (name, alpha)
            assert page.inner_text(f"[id='md-rep-{name}-others']").strip() == fm.fmt_rate(r["others_acceptance_rate"])
            assert page.inner_text(f"[id='md-rep-{name}-tau']").strip() == fm.fmt_tau(r["mean_acceptance_length"])
            assert page.inner_text(f"[id='md-rep-{name}-drafts']").strip() == fm.fmt_count(r["drafts"])
            assert page.inner_text(f"[id='md-rep-{name}-tpot']").strip() == fm.fmt_ms(r["tpot_p99"])
        assert a11y.horizontal_overflow(page) == 0  # the table scrolls inside its own box, the page does not
        assert a11y.outside_viewport(page, "#md-replicas-title", uncut=False) == []
        violations = a11y.blocking(a11y.axe_violations(page, a11y.axe_source()))
        assert violations == [], violations
        page.close()


def test_on_a_phone_each_replica_value_sits_beside_its_own_label(running, chromium_bin):
    """At 390x844 the table stacks into a card per replica: read every (label drawn, value) pair from the
    page and compare it with the API's value for that label; the caption spans the card width."""
    body = _replicas(running, "30m")
    expected = {}
    for p in body["pools"]:
        for r in p["replicas"]:
            name = f"{r['instance']}/{r['engine']}" if r["engine"] else r["instance"]
            expected[name] = {
                "class · mode": f"{p['traffic_class']} · {p['spec_mode']}", "replica": name,
                "α (A/D)": fm.fmt_rate(r["acceptance_rate"]), "α others (pooled)": fm.fmt_rate(r["others_acceptance_rate"]),
                "τ": fm.fmt_tau(r["mean_acceptance_length"]), "drafts": fm.fmt_count(r["drafts"]),
                "P99 TPOT": fm.fmt_ms(r["tpot_p99"]), "P99 ITL": fm.fmt_ms(r["itl_p99"]),
                "last seen": f"{datetime.fromisoformat(r['last_seen']).astimezone(UTC):%Y-%m-%d %H:%M} UTC",
                "labels": ", ".join(f"{k}={v}" for k, v in sorted(r["labels"].items())) or fm.NO_DATA}
    assert len(expected) >= 5  # four eagle3 replicas and the baseline's
    with browser_context(chromium_bin, width=390, height=844) as ctx:
        page = ctx.new_page()
        page.set_default_timeout(deadline_ms(120))
        page.goto(running.dash_url + f"/model?window=30m&model={quote(MODEL, safe='')}")
        wait_idle(page)
        page.wait_for_selector("#md-replica-table", timeout=deadline_ms(120))
        rows = a11y.stacked_pairs(page, "#md-replica-table")
        assert len(rows) == len(expected)
        seen = set()
        for cells in rows:
            pairs = {cell["shown"]: cell["text"] for cell in cells if cell["visible"]}
            assert all(cell["shown"] == cell["label"] for cell in cells), cells  # the label drawn is the cell's own
            name = pairs["replica"]
            seen.add(name)
            want = expected[name]
            assert {k: pairs.get(k) for k in want if k != "α (A/D)"} == {k: v for k, v in want.items() if k != "α (A/D)"}
            assert pairs["α (A/D)"].startswith(want["α (A/D)"]), (name, pairs)
        assert seen == set(expected)
        assert a11y.caption_width_share(page, "#md-replica-table") > 0.9
        assert a11y.horizontal_overflow(page) == 0
        page.close()
