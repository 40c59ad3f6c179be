"""llama.cpp and SGLang on the Prometheus path: the queries each engine adds (vLLM's unchanged), the raw-sample
estimate with a hand-computed answer, and both engines scraped by a real Prometheus and collected from it:
llama.cpp's exact counters in the exact columns, SGLang's estimate in the `est_*` columns only."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from backend.config import Settings
from backend.domain.records import PoolKey
from backend.prom.assemble import raw_estimates, series_increases
from backend.prom.client import PromClient, SeriesPoints
from backend.prom.queries import PoolLabels, cycle_queries, estimate_queries, raw_queries
from backend.services.collect import run_prometheus
from tests.support.engine_expositions import exposition
from tests.support.hostile import ExpositionServer, wait_for
from tests.support.stack import factory_for

LABELS = PoolLabels()
ALL = ("vllm", "llamacpp", "sglang")
NAMING = {"class_label": "traffic_class", "mode_label": "spec_mode", "default_class": "default",
          "default_mode": "on"}


def test_vllm_queries_are_unchanged_and_each_engine_adds_its_own():
    vllm = cycle_queries(LABELS, 60)
    assert cycle_queries(LABELS, 60, ("vllm",)) == vllm
    assert {q.engine for q in vllm} == {"vllm"}
    every = cycle_queries(LABELS, 60, ALL)
    assert [q for q in every if q.engine == "vllm" and q.field != "dips"] == [q for q in vllm if q.field != "dips"]
    llama = {(q.field, q.part) for q in every if q.engine == "llamacpp"}
    assert llama == {("drafts", "value"), ("draft_tokens", "value"), ("accepted_tokens", "value"),
                     ("accepted_per_pos", "value"), ("generation_tokens", "value"), ("prompt_tokens", "value"),
                     ("running_mean", "value")}
    draft = next(q for q in every if q.engine == "llamacpp" and q.field == "draft_tokens")
    assert draft.promql == ("sum by (model_name, traffic_class, spec_mode) ("
                            "increase(llamacpp:spec_decode_num_draft_tokens_total[60s]) or "
                            "increase(llamacpp:n_drafted_total[60s]) or increase(llamacpp:n_draft_total[60s]))")
    sglang = {q.field for q in every if q.engine == "sglang"}
    assert "spec_accept_length" not in sglang and "drafts" not in sglang and "accepted_tokens" not in sglang
    assert [(q.field, q.selector) for q in estimate_queries(LABELS, ALL)] == [
        ("spec_accept_length", "sglang:spec_accept_length"), ("spec_accept_rate", "sglang:spec_accept_rate")]
    assert estimate_queries(LABELS) == []
    assert len(raw_queries(LABELS)) == 18


def test_raw_estimates_weigh_each_scrape_interval_by_its_counter_increase():
    gen_q = next(q for q in raw_queries(LABELS, ALL) if q.engine == "sglang" and q.field == "generation_tokens")
    tau_q, rate_q = estimate_queries(LABELS, ALL)
    target = {"model_name": "qwen", "traffic_class": "chat", "instance": "s:30000", "job": "sglang"}
    gauge_labels = {**target, "tp_rank": "0"}
    answers = [
        (gen_q, [SeriesPoints({**target, "__name__": "sglang:generation_tokens_total"},
                              [(10.0, 1000.0), (30.0, 1100.0), (50.0, 1400.0)])]),
        (tau_q, [SeriesPoints(gauge_labels, [(10.0, 9.0), (30.0, 2.0), (50.0, 3.0)])]),
        (rate_q, [SeriesPoints(gauge_labels, [(10.0, 0.9), (30.0, 0.5), (50.0, 0.8)])]),
    ]
    got = raw_estimates(answers, width=60, first_bucket=0, last_bucket=0, max_gap=45, **NAMING)
    parts = got[(PoolKey("qwen", "chat", "on"), 0)]
    assert (parts.weight_tokens, parts.verify_steps, parts.accepted_tokens, parts.draft_tokens) == (400, 150, 250, 350)
    # the gauges are no counters: the exact path leaves them out
    incs = series_increases(answers, width=60, first_bucket=0, last_bucket=0, max_gap=45)
    assert {si.query.field for si in incs} == {"generation_tokens"}


WIDTH = 5


@pytest.mark.prometheus
@pytest.mark.parametrize("mode", ["raw", "increase"])
def test_llamacpp_and_sglang_through_a_real_prometheus(prometheus_factory, fresh_db_url, mode):
    def sglang(n: int) -> str:
        return exposition("sglang-spec.prom", scale=n + 1, values={"sglang:spec_accept_length": 2.0,
                                                                   "sglang:spec_accept_rate": 0.5})

    with ExpositionServer() as srv:
        srv.route("/llama", lambda n: exposition("llamacpp-spec.prom", scale=n + 1))
        srv.route("/sglang", sglang)
        prom = prometheus_factory([
            {"target": srv.url + "/llama", "labels": {"model_name": "llama-1b", "traffic_class": "chat",
                                                      "spec_mode": "draft"}},
            {"target": srv.url + "/sglang", "labels": {"traffic_class": "chat", "spec_mode": "eagle3"}}],
            scrape_interval="1s")
        wait_for(lambda: min(srv.requests("/llama"), srv.requests("/sglang")) >= 4 * WIDTH, timeout=180)
        s = Settings(database_url=fresh_db_url, prometheus_url=prom.url, bucket_seconds=WIDTH, settle_seconds=2,
                     initial_lookback_seconds=120, prometheus_engines="vllm,llamacpp,sglang",
                     prometheus_increases=mode)
        run_prometheus(factory_for(fresh_db_url), PromClient(prom.url), s, now=datetime.now(UTC))

    with factory_for(fresh_db_url)() as session:
        engines = dict(session.execute(text("select model_name, engine from pools")).all())
        rows = session.execute(text(
            "select p.model_name, drafts, draft_tokens, accepted_tokens, accepted_per_pos, generation_tokens, "
            "est_weight_tokens, est_verify_steps, est_accepted_tokens, est_draft_tokens from pool_buckets b "
            "join pools p on p.id = b.pool_id")).all()
    assert engines == {"llama-1b": "llamacpp", "qwen-7b": "sglang"}
    llama = [r for r in rows if r[0] == "llama-1b" and r[2]]
    assert len(llama) >= 2
    for _m, drafts, draft_tokens, accepted, per_pos, gen, *est in llama:
        # every counter grows in the fixture's ratios: 400 drafts, 1600 draft and 1000 accepted tokens
        assert drafts == pytest.approx(draft_tokens / 4) and accepted == pytest.approx(draft_tokens * 10 / 16)
        assert per_pos == pytest.approx([accepted * 0.35, accepted * 0.3, accepted * 0.2, accepted * 0.15])
        assert gen == pytest.approx(draft_tokens * 20 / 16)
        assert est == [None, None, None, None]
    assert all(r[1] is r[2] is r[3] is r[4] is None for r in rows if r[0] == "qwen-7b")
    qwen = [r for r in rows if r[0] == "qwen-7b" and r[6]]
    if mode == "increase":  # the estimate needs raw samples: none on the increase() path
        assert not qwen and any(r[5] for r in rows if r[0] == "qwen-7b")
        return
    assert len(qwen) >= 2
    for _m, drafts, draft_tokens, accepted, per_pos, _gen, weight, steps, est_acc, est_drafts in qwen:
        assert drafts is draft_tokens is accepted is per_pos is None  # never the estimate
        assert (steps, est_acc, est_drafts) == pytest.approx((weight / 2, weight / 2, weight))


def test_pools_found_in_prometheus_ask_each_engines_output_counter():
    from backend.services.collect import pools_in_prometheus

    class Client:
        def __init__(self) -> None:
            self.selectors: list[str] = []

        def query_raw(self, selector: str, at: float, seconds: int) -> list[SeriesPoints]:
            self.selectors.append(selector)
            return [SeriesPoints({"model_name": "llama-1b", "traffic_class": "chat"}, [(at, 1.0)]),
                    SeriesPoints({"traffic_class": "chat"}, [(at, 1.0)])]  # no model: not a pool

    now = datetime(2026, 12, 5, tzinfo=UTC)
    vllm_only, every = Client(), Client()
    pools_in_prometheus(vllm_only, Settings(), now=now)
    found = pools_in_prometheus(every, Settings(prometheus_engines="vllm,llamacpp,sglang"), now=now)
    assert vllm_only.selectors == ["vllm:generation_tokens_total"]
    assert every.selectors == [('{__name__=~"llamacpp:tokens_predicted_total|sglang:generation_tokens_total|'
                                'vllm:generation_tokens_total"}')]
    assert found == {PoolKey("llama-1b", "chat", "on")}
