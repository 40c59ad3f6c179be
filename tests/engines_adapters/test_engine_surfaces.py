"""The fleet rows, alert rules and weekly report on a three-engine fleet (vLLM seeded, llama.cpp and SGLang
collected through the real direct scrape: tests/dashboard/engine_seeding.py): each row names its engines;
an SGLang row shows its estimate apart from the exact figures; a model mixing vLLM and SGLang keeps its
mixed row exact and names the SGLang pools it leaves out; no rule fires on a figure an engine does not
give as a count, and says why; the report words every such figure as the pages do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backend.config import Settings
from backend.services.fleet import fleet
from backend.services.windows import Range
from tests.collect.test_scrape_hardening import WIDTH
from tests.dashboard.engine_seeding import (
    LLAMA_ALPHA,
    LLAMA_MODEL,
    LLAMA_TAU,
    SGLANG_ALPHA,
    SGLANG_MODEL,
    SGLANG_TAU,
    VLLM_MODEL,
    seed_engines,
)
from tests.support import db as dbsupport
from tests.support.stack import factory_for


@pytest.fixture(scope="module")
def seeded(pg_admin_url: str, pg_template: str):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_eng")
    seed_engines(url)
    yield url
    dbsupport.drop_database(pg_admin_url, name)


def _settings(url: str) -> Settings:
    return Settings(_env_file=None, database_url=url, bucket_seconds=WIDTH)


def test_fleet_rows_name_engines_and_keep_estimates_apart(seeded):
    now = datetime.now(UTC)
    with factory_for(seeded)() as session:
        got = fleet(session, rng=Range(now - timedelta(hours=1), now), now=now, settings=_settings(seeded),
                    alerts=False)
    rows = {(r.model_name, r.traffic_class): r for r in got.rows}
    sg, ll, code, mixed = (rows[(SGLANG_MODEL, "chat")], rows[(LLAMA_MODEL, "chat")], rows[(SGLANG_MODEL, "code")],
                           rows[(SGLANG_MODEL, "mixed")])
    assert (sg.engines, ll.engines, code.engines, rows[(VLLM_MODEL, "chat")].engines) == (
        ["sglang"], ["llamacpp"], ["vllm"], ["vllm"])
    # SGLang: no exact figure (null, never 0); the estimate from τ = 2, r = 0.5 apart, with its basis
    assert (sg.acceptance_rate, sg.mean_acceptance_length, sg.drafts) == (None, None, None)
    assert sg.acceptance_rate_estimate == pytest.approx(SGLANG_ALPHA)
    assert sg.mean_acceptance_length_estimate == pytest.approx(SGLANG_TAU)
    assert "spec_accept_length" in sg.estimate_basis
    # its state says so: not "no data" (the row shows figures), not judged against the threshold either
    assert (sg.state, sg.data_state, ll.data_state) == ("estimated", "estimated", "healthy")
    # llama.cpp: exact counters, 1000 accepted of 1600 drafted in 400 verify steps per interval, 3 intervals
    assert (ll.acceptance_rate, ll.mean_acceptance_length, ll.drafts) == pytest.approx((LLAMA_ALPHA, LLAMA_TAU, 1200))
    assert ll.acceptance_rate_estimate is None and ll.estimated_excluded == []
    # the mixed row of vLLM + SGLang: the vLLM counts only (its numbers are the code row's), SGLang named
    assert mixed.engines == ["sglang", "vllm"] and mixed.estimated_excluded == ["sglang"]
    assert (mixed.acceptance_rate, mixed.drafts) == (code.acceptance_rate, code.drafts)
    assert mixed.acceptance_rate_estimate is None


def _rules():
    import yaml

    from backend.domain.alert_config import parse_config
    from tests.support.paths import FIXTURES
    return {r.kind: r for r in reversed(parse_config(yaml.safe_load((FIXTURES.parents[1] / "alerts.example.yaml").read_text())).rules)}


def test_alert_rules_on_engine_pools(seeded):
    from backend.services import alert_eval, alert_rules
    rules = _rules()
    s = _settings(seeded)
    now = datetime.now(UTC)
    with factory_for(seeded)() as session:
        targets = alert_eval.snapshot(session, windows={300.0, 3600.0}, now=now, settings=s)
    ev = lambda kind, key, at=now: alert_rules.evaluate(rules[kind], targets[key], now=at,
                                                         stale_after_seconds=300)
    sg, ll, mixed = ((SGLANG_MODEL, "chat", "eagle3"), (LLAMA_MODEL, "chat", "eagle3"),
                     (SGLANG_MODEL, "mixed", "eagle3"))
    # SGLang: alpha and margin rules never read an estimate as a count, nor a missing one as 0
    a = ev("alpha_low", sg)
    assert (a.status, a.value) == ("no_data", None)
    assert a.reason == "acceptance rate not exposed by SGLang as a count: only estimated from gauges, not alerted on"
    assert ev("margin_negative", sg).status == "no_data"
    assert "mean accepted length not exposed by SGLang" in ev("margin_negative", sg).reason
    assert ev("acceptance_drift", sg).reason == "per-position acceptance not exposed by SGLang: not evaluated"
    assert ev("latency_regression", sg).reason == "TPOT not exposed by SGLang: not evaluated"
    # llama.cpp: alpha on its exact counters (0.625 over the long window); no latency histogram
    a = ev("alpha_low", ll)
    assert a.status == "ok" and a.value == pytest.approx(LLAMA_ALPHA)
    assert ev("latency_regression", ll).reason == "TPOT not exposed by llama.cpp: not evaluated"
    # the mix: evaluated on the vLLM counts, saying SGLang's pools are left out
    a = ev("alpha_low", mixed)
    assert a.status == "ok" and "SGLang pools excluded" in a.reason
    # stale works for both engines: fresh now, breached ten minutes on
    for key in (sg, ll):
        assert ev("stale_data", key).status == "ok"
        assert ev("stale_data", key, now + timedelta(minutes=10)).status == "breached"


def test_weekly_report_words_engine_figures(seeded):
    from backend.services import report, report_csv, report_export
    s = _settings(seeded)
    now = datetime.now(UTC)
    with factory_for(seeded)() as session:
        r = report.weekly(session, week=report.week_of(now, s.report_timezone), now=now, settings=s)
    models = {m["model"]: m for m in r["models"]}
    summary = {row[0]: row for row in r["summary"]["rows"]}
    assert r["summary"]["head"][:4] == ["model", "engine", "stage", "alpha mixed"]
    assert summary[LLAMA_MODEL][1:4:2] == ["llama.cpp", "0.625"]
    assert summary[SGLANG_MODEL][1] == "vLLM + SGLang"
    sg = next(c for c in models[SGLANG_MODEL]["classes"] if c["scope"] == "chat")
    assert (sg["engine"], sg["alpha"], sg["alpha_text"], sg["tau_text"]) == ("SGLang", None, "0.500 (estimated)",
                                                                           "2.000 (estimated)")
    assert sg["margin_text"] == "not exposed by SGLang" and sg["tpot_text"] == "not exposed by SGLang"
    ll = next(c for c in models[LLAMA_MODEL]["classes"] if c["scope"] == "chat")
    assert (ll["alpha_text"], ll["itl_text"]) == ("0.625", "not exposed by llama.cpp")
    mixed = next(c for c in models[SGLANG_MODEL]["classes"] if c["scope"] == "mixed")
    assert "SGLang pools excluded" in mixed["excluded"]
    md = report_export.markdown(r)
    assert "| chat | SGLang | " in md and "0.500 (estimated)" in md and "| chat | llama.cpp | " in md
    csv = report_csv.csv_text(r)
    assert "alpha 0.500 (estimated)" in csv and "P99 ITL not exposed by llama.cpp" in csv
