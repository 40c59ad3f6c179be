"""Engines end to end on the direct scrape (real HTTP targets, real Postgres): llama.cpp (current and older
names) and SGLang targets stored with their engine, exact counters in the exact columns, SGLang's estimate in
the `est_*` columns only, the not-exposed figures NULL, refusals for a llama.cpp target without a model and
a target whose exposition is not its declared engine; the pools listing says each pool's engine and how it
gets each figure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from backend.config import Settings
from backend.services.fleet import list_pools
from tests.collect.test_scrape_hardening import WIDTH, cycle, rejections
from tests.support.engine_expositions import exposition
from tests.support.hostile import ExpositionServer
from tests.support.make_vllm_fixtures import served
from tests.support.stack import factory_for

SCRAPES = 4  # three intervals; every counter grows by its fixture value per interval


def _sglang(n: int) -> str:
    return exposition("sglang-spec.prom", scale=n + 1, values={"sglang:spec_accept_length": 2.0,
                                                               "sglang:spec_accept_rate": 0.5})


def test_llamacpp_and_sglang_targets_are_stored_with_their_engine(fresh_db_url):
    with ExpositionServer() as srv:
        llama = srv.route("/llama", lambda n: exposition("llamacpp-spec.prom", scale=n + 1))
        old = srv.route("/old", lambda n: exposition("llamacpp-n_drafted.prom", scale=n + 1))
        sgl = srv.route("/sglang", _sglang)
        nomodel = srv.route("/nomodel", lambda n: exposition("llamacpp-spec.prom", scale=n + 1))
        wrong = srv.route("/wrong", lambda n: served("vllm-0.11.0-spec.prom", "m-v", n + 1))
        targets = [{"url": llama, "labels": {"model_name": "llama-1b", "traffic_class": "chat"}},
                   {"url": old, "labels": {"model_name": "llama-old", "traffic_class": "chat"},
                    "engine": "llamacpp"},
                   {"url": sgl, "labels": {"traffic_class": "chat"}, "engine": "sglang"},
                   {"url": nomodel, "labels": {"traffic_class": "chat"}},
                   {"url": wrong, "labels": {"traffic_class": "chat"}, "engine": "sglang"}]
        s = Settings(database_url=fresh_db_url, source="scrape", bucket_seconds=WIDTH, settle_seconds=0,
                     scrape_interval_seconds=1, initial_lookback_seconds=600, scrape_targets=targets)
        cycle(fresh_db_url, s, scrapes=SCRAPES)

    with factory_for(fresh_db_url)() as session:
        engines = dict(session.execute(text("select model_name, engine from pools")).all())
        sums = {r[0]: r[1:] for r in session.execute(text(
            "select p.model_name, sum(drafts), sum(draft_tokens), sum(accepted_tokens), count(accepted_per_pos), "
            "sum(generation_tokens), sum(est_weight_tokens), sum(est_verify_steps), sum(est_accepted_tokens), "
            "sum(est_draft_tokens), count(drafts) from pool_buckets b join pools p on p.id = b.pool_id "
            "group by p.model_name")).all()}
    assert engines == {"llama-1b": "llamacpp", "llama-old": "llamacpp", "qwen-7b": "sglang"}
    n = SCRAPES - 1
    assert sums["llama-1b"][:3] == pytest.approx((400 * n, 1600 * n, 1000 * n))
    assert sums["llama-1b"][3] > 0 and sums["llama-1b"][4] == pytest.approx(2000 * n)
    assert sums["llama-1b"][5:9] == (None, None, None, None)
    # the older build: draft and accepted tokens exact, no drafts and no positions (NULL, not 0)
    assert sums["llama-old"][0] is None and sums["llama-old"][9] == 0 and sums["llama-old"][3] == 0
    assert sums["llama-old"][1:3] == pytest.approx((1600 * n, 1000 * n))
    # SGLang: no exact spec-decode count; the estimate from τ = 2, r = 0.5 over 3000 tokens an interval
    assert sums["qwen-7b"][:4] == (None, None, None, 0)
    assert sums["qwen-7b"][4] == pytest.approx(3000 * n)
    assert sums["qwen-7b"][5:9] == pytest.approx((3000 * n, 1500 * n, 1500 * n, 3000 * n))

    refused = {rule: detail for rule, _model, detail in rejections(fresh_db_url)}
    assert set(refused) == {"no_model_label", "engine_mismatch"}
    assert "llama.cpp exposes no model label" in refused["no_model_label"]
    assert "declared as engine 'sglang'" in refused["engine_mismatch"]

    with factory_for(fresh_db_url)() as session:
        listing = list_pools(session, now=datetime.now(UTC), settings=s)
    by_model = {p.model_name: p for p in listing.pools}
    assert {m: p.engine for m, p in by_model.items()} == engines
    sg = {f.figure: f for f in by_model["qwen-7b"].figures}
    assert sg["acceptance_rate"].exact is False and "generated tokens" in sg["acceptance_rate"].estimate_basis
    assert sg["drafts"].exposed is False and sg["drafts"].exact is None
    ll = {f.figure: f for f in by_model["llama-1b"].figures}
    assert ll["acceptance_rate"].exact is True and ll["acceptance_rate"].estimate_basis is None
