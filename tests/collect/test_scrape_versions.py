"""Older vLLM metric names on the direct scrape, end to end (real HTTP targets, real Postgres): a target of the
0.8.5 – 0.10.1 line (ITL only under `vllm:time_per_output_token_seconds`), one of 0.11 (ITL under both names,
the same observations) and one running the V0 engine. The first two store their ITL once per engine step
(1.04 x the drafts over the run, as the fixtures are built; 2.08 x if both names were summed); the V0 one
is refused with its own rule and nothing of it is stored."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from tests.collect.test_scrape_hardening import cycle, rejections, settings
from tests.support.hostile import ExpositionServer
from tests.support.make_vllm_fixtures import served
from tests.support.stack import fact_rows, factory_for

ITL_PER_DRAFT = 104 / 100  # tests/support/make_vllm_fixtures.py
TPOT_PER_DRAFT = 10 / 100


def test_older_names_are_read_once_and_a_v0_target_is_refused(fresh_db_url):
    with ExpositionServer() as srv:
        targets = {srv.route("/old", lambda n: served("vllm-0.10.1-spec.prom", "m-old", n + 1)): "chat",
                   srv.route("/both", lambda n: served("vllm-0.11.0-spec.prom", "m-both", n + 1)): "chat",
                   srv.route("/v0", lambda n: served("vllm-0.10.1-v0-spec.prom", "m-v0", n + 1)): "chat"}
        cycle(fresh_db_url, settings(fresh_db_url, targets), scrapes=4)

    rows = fact_rows(fresh_db_url, "drafts, itl_count, tpot_count")
    assert {k[0] for k in rows} == {"m-old", "m-both"}
    # a bucket holds its share of each interval, rounded per counter: the ratio is exact over the run
    totals = {model: [sum(v[i] or 0 for k, v in rows.items() if k[0] == model) for i in range(3)]
              for model in ("m-old", "m-both")}
    for model, (drafts, itl, tpot) in totals.items():
        assert drafts > 0
        assert itl == pytest.approx(ITL_PER_DRAFT * drafts, rel=1e-9), (model, drafts, itl)
        assert tpot == (0 if model == "m-old" else pytest.approx(TPOT_PER_DRAFT * drafts, rel=1e-9)), (model, tpot)
    assert all(v[2] is None for k, v in rows.items() if k[0] == "m-old")  # no TPOT before 0.11

    refused = rejections(fresh_db_url)
    assert refused and {rule for rule, _, _ in refused} == {"unsupported_vllm_version"}
    assert all("/v0" in model and "0.8.5 or later" in detail for _, model, detail in refused)
    with factory_for(fresh_db_url)() as session:
        assert session.execute(text("select count(*) from raw_scrapes where target like '%/v0'")).scalar() == 0
