"""The simulator speaks three engines: a pool's `engine` picks its /metrics (vLLM, llama-server, SGLang) and its
per-request response shape. The expositions parse as Prometheus text (prometheus_client's parser) with the
engines' names and types, their values agree with the simulated counters and the configured acceptance, the
SGLang gauges move once per logging interval, and the records read from the response shapes sum exactly to
the simulated requests."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from backend.domain import per_request as pr
from backend.domain import per_request_batch as prb
from backend.sim.fleet_state import SGLANG_ITL_BOUNDS, SGLANG_LOG_STEPS
from backend.sim.scenario import ScenarioError, load_scenario
from backend.sim.server import Simulator, request_record, response_shape
from tests.sim.conftest import START, FakeClock

POOL = {"model": "m1", "traffic_class": "chat", "concurrency": 6, "output_len": {"mean": 80, "sigma": 0.4, "max": 400}}
FLEET = {"name": "three-engines", "tick": 0.1, "pools": [
    {**POOL, "id": "v", "engine": "vllm", "spec_mode": "eagle3", "k": 3, "acceptance": {"mode": "rate", "r": 0.7},
     "per_request": {"classes": [{"name": "chat", "share": 1, "acceptance": {"mode": "rate", "r": 0.7}}]}},
    {**POOL, "id": "s", "engine": "sglang", "spec_mode": "eagle", "k": 4, "acceptance": {"mode": "rate", "r": 0.6},
     "per_request": {"classes": [{"name": "chat", "share": 1, "acceptance": {"mode": "rate", "r": 0.6}}]}},
    {**POOL, "id": "l", "engine": "llamacpp", "spec_mode": "draft_model", "k": 8,
     "acceptance": {"mode": "rate", "r": 0.4},
     "per_request": {"classes": [{"name": "chat", "share": 1, "acceptance": {"mode": "rate", "r": 0.4}}]}},
    {**POOL, "id": "s-off", "engine": "sglang", "spec_mode": "off"},
]}

LLAMACPP = {"llamacpp:prompt_tokens": "counter", "llamacpp:prompt_tokens_cached": "counter",
            "llamacpp:prompt_seconds": "counter", "llamacpp:tokens_predicted": "counter",
            "llamacpp:tokens_predicted_seconds": "counter", "llamacpp:n_decode": "counter",
            "llamacpp:spec_decode_num_draft_tokens": "counter", "llamacpp:spec_decode_num_accepted_tokens": "counter",
            "llamacpp:spec_decode_num_drafts": "counter", "llamacpp:spec_decode_num_accepted_tokens_per_pos": "counter",
            "llamacpp:prompt_tokens_seconds": "gauge", "llamacpp:predicted_tokens_seconds": "gauge",
            "llamacpp:requests_processing": "gauge", "llamacpp:requests_deferred": "gauge",
            "llamacpp:n_busy_slots_per_decode": "gauge"}
SGLANG = {"sglang:prompt_tokens": "counter", "sglang:generation_tokens": "counter", "sglang:num_requests": "counter",
          "sglang:inter_token_latency_seconds": "histogram", "sglang:num_running_reqs": "gauge",
          "sglang:num_queue_reqs": "gauge", "sglang:token_usage": "gauge", "sglang:spec_accept_length": "gauge",
          "sglang:spec_accept_rate": "gauge"}


def families(body: bytes) -> dict:
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def value(fams: dict, name: str, sample: str | None = None, **labels) -> float:
    found = [s.value for s in fams[name].samples
             if s.name == (sample or name) and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


@pytest.fixture
def sim(clock: FakeClock) -> Simulator:
    s = Simulator(FLEET, clock=clock, start=START, seed=3)
    clock.advance(60)
    return s


def test_each_pool_speaks_its_engines_exposition(sim: Simulator) -> None:
    fams = families(sim.metrics())
    got = {name: f.type for name, f in fams.items() if name.startswith(("llamacpp:", "sglang:"))}
    assert got == {**LLAMACPP, **SGLANG}
    assert fams["vllm:spec_decode_num_drafts"].type == "counter"  # the vLLM pool, as before
    # one server per pool: llama-server's own /metrics has no labels; SGLang's names the model
    one = families(sim.metrics("l"))
    assert set(one) == set(LLAMACPP)
    assert all(s.labels == {} for f in one.values() for s in f.samples if not f.name.endswith("_per_pos"))
    assert [s.labels for s in one["llamacpp:spec_decode_num_accepted_tokens_per_pos"].samples] == [
        {"position": str(i)} for i in range(8)]
    sg = families(sim.metrics("s"))
    assert set(sg) == set(SGLANG) and value(sg, "sglang:generation_tokens", "sglang:generation_tokens_total",
                                            model_name="m1") > 0
    # a baseline SGLang pool has no spec gauges
    assert set(families(sim.metrics("s-off"))) == set(SGLANG) - {"sglang:spec_accept_length", "sglang:spec_accept_rate"}
    # bucket bounds are SGLang's
    les = [s.labels["le"] for s in sg["sglang:inter_token_latency_seconds"].samples if s.name.endswith("_bucket")]
    assert [float(x) for x in les[:-1]] == list(SGLANG_ITL_BOUNDS) and les[-1] == "+Inf"


def test_values_agree_with_the_simulated_counters_and_acceptance(sim: Simulator) -> None:
    fams = families(sim.metrics())
    truth = {p["pool_id"]: p["counters"] for p in sim.truth()["pools"]}
    lab = {"instance": "l", "model_name": "m1", "traffic_class": "chat", "spec_mode": "draft_model"}
    drafted = value(fams, "llamacpp:spec_decode_num_draft_tokens", "llamacpp:spec_decode_num_draft_tokens_total", **lab)
    accepted = value(fams, "llamacpp:spec_decode_num_accepted_tokens", "llamacpp:spec_decode_num_accepted_tokens_total",
                     **lab)
    drafts = value(fams, "llamacpp:spec_decode_num_drafts", "llamacpp:spec_decode_num_drafts_total", **lab)
    assert (drafted, accepted, drafts) == (truth["l"]["draft_tokens"], truth["l"]["accepted_tokens"],
                                           truth["l"]["drafts"])
    per_pos = [s.value for s in fams["llamacpp:spec_decode_num_accepted_tokens_per_pos"].samples if s.labels["instance"] == "l"]
    assert per_pos == truth["l"]["accepted_per_pos"] and sum(per_pos) == accepted
    assert value(fams, "llamacpp:tokens_predicted", "llamacpp:tokens_predicted_total", **lab) == \
        truth["l"]["generation_tokens"]
    assert 0.35 < accepted / drafted < 0.45  # configured α 0.4
    s = {"instance": "s", "model_name": "m1"}
    assert value(fams, "sglang:generation_tokens", "sglang:generation_tokens_total", **s) == \
        truth["s"]["generation_tokens"]
    assert value(fams, "sglang:num_requests", "sglang:num_requests_total", **s) == truth["s"]["finished_requests"]
    rate = value(fams, "sglang:spec_accept_rate", **s)
    length = value(fams, "sglang:spec_accept_length", **s)
    # one logging interval's counts: accept length = 1 + accepted / drafts = 1 + K x rate (K = 4, chain drafts)
    assert length == pytest.approx(1 + 4 * rate, rel=1e-12)
    assert 0.5 < rate < 0.7  # configured 0.6
    # SGLang observes every generated token but each request's first (prefill, counted by TTFT) once, with the
    # interval / tokens of its output step
    st, lay = sim.fleet.states[1].engines[0], sim.fleet.pools[1].layout
    itl_count = value(fams, "sglang:inter_token_latency_seconds", "sglang:inter_token_latency_seconds_count", **s)
    assert itl_count == st.c[lay.generation] - st.c[lay.hist["ttft"][0]].sum() > 0


def test_an_older_llamacpp_build_shows_draft_and_accepted_tokens_only(clock: FakeClock) -> None:
    fleet = {**FLEET, "pools": [{**p, "llamacpp_names": "old"} if p["id"] == "l" else p for p in FLEET["pools"]]}
    sim = Simulator(fleet, clock=clock, start=START, seed=3)
    clock.advance(30)
    fams = families(sim.metrics("l"))
    truth = {p["pool_id"]: p["counters"] for p in sim.truth()["pools"]}["l"]
    assert {n for n in fams if "draft" in n} == {"llamacpp:n_drafted", "llamacpp:n_drafted_accepted"}
    assert value(fams, "llamacpp:n_drafted", "llamacpp:n_drafted_total") == truth["draft_tokens"]
    assert value(fams, "llamacpp:n_drafted_accepted", "llamacpp:n_drafted_accepted_total") == truth["accepted_tokens"]
    with pytest.raises(ScenarioError, match=r"pools\[0\]\.llamacpp_names: only for engine: llamacpp"):
        load_scenario({"pools": [{**POOL, "llamacpp_names": "old", "spec_mode": "off"}]})


def test_sglang_gauges_move_once_per_logging_interval(clock: FakeClock) -> None:
    sim = Simulator(FLEET, clock=clock, start=START, seed=3)
    seen = []
    for _ in range(40):
        clock.advance(0.1)
        fams = families(sim.metrics("s"))
        eng = sim.fleet.states[1].engines[0]
        seen.append((value(fams, "sglang:spec_accept_rate"), eng.sg_log[0]))
    # before the first SGLANG_LOG_STEPS decode steps nothing is logged; afterwards the gauge changes only at
    # the ticks where the step count of the interval went back to 0 (an interval was logged)
    assert seen[0][0] == 0.0 and seen[0][1] < SGLANG_LOG_STEPS
    changes = [i for i in range(1, len(seen)) if seen[i][0] != seen[i - 1][0]]
    logged = [i for i in range(1, len(seen)) if seen[i][1] < seen[i - 1][1] or seen[i][1] == 0]
    assert changes and set(changes) <= set(logged)
    assert len(changes) < len(seen) - 1  # it holds between logs


def test_response_shapes_ingest_exactly(sim: Simulator) -> None:
    sim.sync()
    raw = sim.fleet.take_requests()
    by = {"vllm": [], "sglang": [], "llamacpp": []}
    for r in raw:
        by[r["server"]].append(r)
    recs = [request_record(r, START + 30) for r in raw]
    batch = prb.validate_batch([x for x in recs if x], pr.RecordLimits(
        allowed_labels=frozenset({"traffic_class"}), max_id_length=200, max_model_length=300,
        max_label_value_length=120, oldest=0, newest=2e9))
    assert batch.refused == []
    sums = {e: {"accepted": 0, "steps": 0, "drafted": 0, "n": 0} for e in by}
    for eng, steps, drafted, acc in zip(batch.engine, batch.steps, batch.draft_tokens, batch.accepted, strict=True):
        sums[eng]["accepted"] += acc
        sums[eng]["steps"] += steps or 0
        sums[eng]["drafted"] += drafted or 0
        sums[eng]["n"] += 1
    for eng, rows in by.items():
        acc = sum(j * h for r in rows for j, h in enumerate(r["histogram"]))
        steps = sum(sum(r["histogram"]) for r in rows)
        assert sums[eng]["accepted"] == acc and acc > 0
        assert sums[eng]["drafted"] == sum(r["k"] * sum(r["histogram"]) for r in rows)
    assert sums["sglang"]["steps"] == sum(sum(r["histogram"]) for r in by["sglang"])
    assert sums["llamacpp"]["steps"] == 0
    assert {batch.steps[i] for i, e in enumerate(batch.engine) if e == "llamacpp"} == {None}
    # llama-server leaves draft counts out of a response that drafted nothing: no record for it
    assert sums["llamacpp"]["n"] == sum(1 for r in by["llamacpp"] if sum(r["histogram"]))


def test_response_shapes_hand_computed() -> None:
    r = {"request_id": "x", "model": "m1", "traffic_class": "chat", "spec_mode": "eagle", "output_tokens": 20,
         "prompt_tokens": 7, "k": 3, "histogram": [1, 2, 0, 3]}  # 6 steps, 0 + 2 + 0 + 9 = 11 accepted
    sg = response_shape({**r, "server": "sglang"})["meta_info"]
    assert (sg["spec_verify_ct"], sg["spec_accept_token_num"], sg["spec_draft_token_num"]) == (6, 11, 18)
    assert sg["spec_accept_length"] == 20 / 6 and sg["spec_accept_rate"] == 11 / 18
    lc = response_shape({**r, "server": "llamacpp"})["timings"]
    assert (lc["draft_n"], lc["draft_n_accepted"]) == (18, 11)
    assert "draft_n" not in response_shape({**r, "server": "llamacpp", "histogram": [0, 0, 0, 0]})["timings"]
    rec = request_record({**r, "server": "sglang"}, 1000.0)
    assert rec["engine"] == "sglang" and rec["speculative_decoding"] == {
        "num_spec_steps": 6, "num_accepted_draft_tokens": 11, "num_draft_tokens": 18}
    assert "engine" not in request_record({**r, "server": "vllm"}, 1000.0)


def test_engine_key_is_checked() -> None:
    with pytest.raises(ScenarioError, match=r"pools\[0\]\.engine: must be one of vllm, llamacpp, sglang, got a string 'tgi'"):
        load_scenario({"pools": [{**POOL, "engine": "tgi", "spec_mode": "off"}]})
    with pytest.raises(ScenarioError, match=r"pools\[0\]\.engines: a llamacpp server has no engine label"):
        load_scenario({"pools": [{**POOL, "engine": "llamacpp", "engines": 2, "spec_mode": "off"}]})
    mixed = load_scenario("mixed-engines")
    kinds = {(p.model, p.engine, p.spec_mode) for p in mixed.pools}
    for model in ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B"):
        assert {(e, m) for mm, e, m in kinds if mm == model} >= {
            ("vllm", "eagle3"), ("sglang", "eagle"), ("llamacpp", "draft_model"), ("vllm", "off")}
    assert {p.traffic_class for p in mixed.pools} == {"chat", "code"}


def test_demo_posts_records_of_scenarios_that_have_them() -> None:
    from backend.cli.demo_per_request import has_records

    assert has_records("mixed-engines") and has_records("per-request")
    assert not has_records("steady") and not has_records("no-such-scenario")


def test_the_collection_path_reads_a_simulated_llamacpp_pool(clock: FakeClock) -> None:
    """A simulated llama.cpp pool's own /metrics through the direct-scrape parser and assembler (the engines'
    adapters): its counters give the bucket's simulated draft tokens, accepted tokens and drafts exactly."""
    from backend.scrape.assemble import PoolNaming, Scrape, assemble
    from backend.scrape.layout import LayoutCache
    from backend.scrape.parse import parse, target_engine

    sim = Simulator(FLEET, clock=clock, start=START, seed=3)
    naming = PoolNaming("traffic_class", "spec_mode", "default", "on")
    base = (START // 60 + 1) * 60  # a bucket boundary after the start
    labels = {"model_name": "m1", "traffic_class": "chat", "spec_mode": "draft_model"}
    layouts = LayoutCache()
    scrapes, truth = [], []
    for t in (base - 15, base, base + 15, base + 30, base + 45, base + 60, base + 75):
        clock.t = float(t)
        scrapes.append(Scrape.of("l", float(t), parse(sim.metrics("l").decode()), layouts))
        truth.append({p["pool_id"]: p["counters"] for p in sim.truth()["pools"]}["l"])
    assert target_engine(parse(sim.metrics("l").decode()), labels) == "llamacpp"
    records = assemble(scrapes, target_labels={"l": labels}, width=60, first_bucket=base, last_bucket=base,
                       max_gap=45.0, naming=naming)
    (rec,) = records.values()
    start, end = truth[1], truth[5]  # the bucket (base, base + 60]
    assert rec.draft_tokens == end["draft_tokens"] - start["draft_tokens"] > 0
    assert rec.accepted_tokens == end["accepted_tokens"] - start["accepted_tokens"]
    assert rec.drafts == end["drafts"] - start["drafts"]
