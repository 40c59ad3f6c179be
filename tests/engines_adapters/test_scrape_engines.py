"""llama.cpp and SGLang expositions on the direct-scrape path (backend.scrape.parse + assemble): the series kept,
the record fields they fill with hand-computed increases, what stays NULL, and the SGLang estimate kept apart
from the exact counts."""

from __future__ import annotations

import pytest

from backend.domain.records import PoolKey
from backend.scrape.assemble import PoolNaming, Scrape, assemble, pools_in
from backend.scrape.layout import LayoutCache
from backend.scrape.parse import EngineMismatch, NoModelLabel, engines_in, parse, target_engine
from tests.support.engine_expositions import exposition

NAMING = PoolNaming("traffic_class", "spec_mode", "default", "on")
WIDTH = 60
BASE = 1_800_000_000  # a bucket boundary
LLAMA_LABELS = {"model_name": "llama-3.2-1b", "traffic_class": "chat", "spec_mode": "draft"}


def _records(target: str, texts: list[tuple[float, str]], labels: dict) -> dict:
    layouts = LayoutCache()
    scrapes = [Scrape.of(target, t, parse(text), layouts) for t, text in texts]
    return assemble(scrapes, target_labels={target: labels}, width=WIDTH, first_bucket=BASE,
                    last_bucket=BASE, max_gap=45.0, naming=NAMING)


def test_llamacpp_current_names_parse_without_a_model_label():
    parsed = parse(exposition("llamacpp-spec.prom"))
    names = {n for n, _lb, _v in parsed.samples}
    assert names == {"llamacpp:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_draft_tokens_total",
                     "llamacpp:spec_decode_num_accepted_tokens_total",
                     "llamacpp:spec_decode_num_accepted_tokens_per_pos_total", "llamacpp:tokens_predicted_total",
                     "llamacpp:prompt_tokens_total", "llamacpp:requests_processing"}
    assert engines_in(parsed) == {"llamacpp"}
    assert target_engine(parsed, LLAMA_LABELS) == "llamacpp"
    with pytest.raises(NoModelLabel, match="model_name label"):
        target_engine(parsed, {"traffic_class": "chat"})
    with pytest.raises(EngineMismatch, match="declared as engine 'vllm'"):
        target_engine(parsed, LLAMA_LABELS, "vllm")


def test_llamacpp_exact_counters_fill_the_exact_fields():
    texts = [(BASE + 10, exposition("llamacpp-spec.prom", scale=1)),
             (BASE + 40, exposition("llamacpp-spec.prom", scale=3))]
    records = _records("http://l:8080/metrics", texts, LLAMA_LABELS)
    pool = PoolKey("llama-3.2-1b", "chat", "draft")
    assert list(records) == [(pool, BASE)]
    rec = records[(pool, BASE)]
    assert rec.engine == "llamacpp"
    # increases over (BASE+10, BASE+40]: twice each fixture value
    assert (rec.drafts, rec.draft_tokens, rec.accepted_tokens) == (800, 3200, 2000)
    assert rec.accepted_per_pos == [700, 600, 400, 300]
    assert (rec.generation_tokens, rec.prompt_tokens) == (4000, 10000)
    assert rec.running_mean == 4  # requests_processing 2 and 6
    assert rec.itl is rec.tpot is rec.ttft is None
    assert rec.finished_requests is None and rec.preemptions is None
    assert rec.est_weight_tokens is None and rec.est_verify_steps is None


def test_llamacpp_older_names_leave_drafts_and_positions_null():
    texts = [(BASE + 10, exposition("llamacpp-n_drafted.prom", scale=1)),
             (BASE + 40, exposition("llamacpp-n_drafted.prom", scale=2))]
    rec = _records("http://l:8080/metrics", texts, LLAMA_LABELS)[(PoolKey("llama-3.2-1b", "chat", "draft"), BASE)]
    assert (rec.draft_tokens, rec.accepted_tokens) == (1600, 1000)
    assert rec.drafts is None and rec.accepted_per_pos is None  # not exposed: NULL, never 0
    assert rec.engine == "llamacpp"
    scrapes = [Scrape.of("t", BASE + 10, parse(texts[0][1]), LayoutCache())]
    assert pools_in(scrapes, target_labels={"t": LLAMA_LABELS}, naming=NAMING) == {
        PoolKey("llama-3.2-1b", "chat", "draft")}


def _sglang(gen: float, tau: float, rate: float, k: float) -> str:
    """The SGLang fixture with the generated-token counter at `gen`, the gauges at (tau, rate), other counters x k."""
    return exposition("sglang-spec.prom", scale=k, values={"sglang:generation_tokens_total": gen,
                                                           "sglang:spec_accept_length": tau,
                                                           "sglang:spec_accept_rate": rate})


def test_sglang_gauges_give_an_estimate_apart_from_the_exact_fields():
    texts = [(BASE + 5, _sglang(3000, 9.0, 0.9, 1)),
             (BASE + 20, _sglang(3100, 2.0, 0.5, 2)),   # +100 at τ 2, r 0.5: 50 steps, 50 accepted, 100 drafted
             (BASE + 35, _sglang(3400, 3.0, 0.8, 3)),   # +300 at τ 3, r 0.8: 100 steps, 200 accepted, 250 drafted
             (BASE + 50, _sglang(3400, 0.0, 0.0, 4))]   # nothing generated, no spec step logged: adds nothing
    records = _records("http://s:30000/metrics", texts, {"traffic_class": "chat", "spec_mode": "eagle3"})
    pool = PoolKey("qwen-7b", "chat", "eagle3")
    assert list(records) == [(pool, BASE)]
    rec = records[(pool, BASE)]
    assert rec.engine == "sglang"
    assert (rec.est_weight_tokens, rec.est_verify_steps) == (400, 150)  # τ̂ = 400/150, not 2.75
    assert (rec.est_accepted_tokens, rec.est_draft_tokens) == (250, 350)
    # the exact fields: what SGLang counts; no spec-decode count, never the estimate
    assert rec.drafts is None and rec.draft_tokens is None and rec.accepted_tokens is None
    assert rec.accepted_per_pos is None
    assert rec.generation_tokens == 400
    assert (rec.prompt_tokens, rec.finished_requests) == (8000 * 3, 30 * 3)
    assert rec.itl.count == 2970 * 3 and rec.itl.counts == [3000, 7500, 8910, 8910]
    assert rec.ttft.sum == pytest.approx(4.5 * 3)
    assert rec.running_mean == pytest.approx(6 * (1 + 2 + 3 + 4) / 4)


def test_a_vllm_and_an_sglang_pool_keep_their_own_engines():
    from tests.support.make_vllm_fixtures import served
    layouts = LayoutCache()
    scrapes = [Scrape.of("v", BASE + 10, parse(served("vllm-0.11.0-spec.prom", "m-v", 1)), layouts),
               Scrape.of("v", BASE + 40, parse(served("vllm-0.11.0-spec.prom", "m-v", 2)), layouts),
               Scrape.of("s", BASE + 10, parse(_sglang(3000, 2.0, 0.5, 1)), layouts),
               Scrape.of("s", BASE + 40, parse(_sglang(3100, 2.0, 0.5, 2)), layouts)]
    records = assemble(scrapes, target_labels={"v": {"traffic_class": "chat"}, "s": {"traffic_class": "chat"}},
                       width=WIDTH, first_bucket=BASE, last_bucket=BASE, max_gap=45.0, naming=NAMING)
    by_model = {key.model_name: rec for (key, _b), rec in records.items()}
    assert by_model["m-v"].engine == "vllm" and by_model["qwen-7b"].engine == "sglang"
    assert by_model["m-v"].est_weight_tokens is None
    assert by_model["qwen-7b"].est_weight_tokens == 100 and by_model["qwen-7b"].accepted_tokens is None
    exact = sum(r.accepted_tokens or 0 for r in records.values())
    assert exact == by_model["m-v"].accepted_tokens  # the estimate adds nothing to an exact sum
