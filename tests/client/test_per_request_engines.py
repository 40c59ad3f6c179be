"""One client helper for the three engines' per-response shapes (tests/fixtures/engine_responses): the engine
detected from the shape or given, the record's counts hand-computed from each fixture, only what the engine
reports (nothing made up as 0), the streamed shapes, and exactness: the records' counts sum to the shapes'
fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.client.gateway import GatewayMapping, record_from_gateway
from backend.client.per_request import (
    StreamRecorder,
    detect_engine,
    engine_counts,
    record_from_response,
    record_from_stream,
)
from backend.domain import per_request as pr

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engine_responses"
T = 1_764_900_100  # 2025-12-05T02:01:40Z


def load(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def sse(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines(keepends=True)


LIMITS = pr.RecordLimits(allowed_labels=frozenset({"traffic_class"}), max_id_length=200, max_model_length=300,
                         max_label_value_length=120, oldest=0.0, newest=2e9)


def test_the_engine_is_detected_from_the_shape() -> None:
    assert detect_engine(load("vllm-chat.json")) == "vllm"
    assert detect_engine(load("llamacpp-chat.json")) == "llamacpp"
    assert detect_engine(load("llamacpp-completion.json")) == "llamacpp"
    assert detect_engine(load("sglang-generate.json")) == "sglang"
    assert detect_engine(load("sglang-generate-legacy.json")) == "sglang"
    # llama-server leaves draft_n out when the request drafted nothing (or runs without a drafter)
    plain = load("llamacpp-chat.json")
    plain["timings"] = {k: v for k, v in plain["timings"].items() if not k.startswith("draft_n")}
    assert detect_engine(plain) is None and record_from_response(plain) is None
    assert detect_engine({"id": "x", "choices": []}) is None


def test_vllm_record_is_unchanged() -> None:
    rec = record_from_response(load("vllm-chat.json"), labels={"traffic_class": "chat"}, finish_time=T)
    assert "engine" not in rec  # the server's default
    assert rec["speculative_decoding"]["num_accepted_draft_tokens"] == 36
    assert (rec["output_tokens"], rec["prompt_tokens"]) == (53, 40)


def test_llamacpp_chat_completion() -> None:
    rec = record_from_response(load("llamacpp-chat.json"), labels={"traffic_class": "chat"}, finish_time=T)
    assert rec == {"request_id": "chatcmpl-l1", "model": "qwen2.5-7b-instruct-q4_k_m.gguf",
                   "labels": {"traffic_class": "chat"}, "finish_time": "2025-12-05T02:01:40+00:00",
                   "output_tokens": 665, "prompt_tokens": 808, "engine": "llamacpp",
                   "speculative_decoding": {"num_draft_tokens": 604, "num_accepted_draft_tokens": 515}}
    parsed = pr.parse_record(rec, LIMITS)
    # α = 515 / 604 exact; no drafts, K or histogram in the shape: None (stored NULL), τ unknown
    assert parsed.spec.alpha == 515 / 604
    assert (parsed.spec.steps, parsed.spec.k, parsed.spec.histogram, parsed.spec.tau) == (None, None, None, None)
    assert parsed.engine == "llamacpp"


def test_llamacpp_native_completion_names_k_and_needs_an_id() -> None:
    data = load("llamacpp-completion.json")
    with pytest.raises(ValueError, match="no request id.*request_id="):  # /completion has none: the caller names one
        record_from_response(data, finish_time=T)
    rec = record_from_response(data, finish_time=T, request_id="lc-7")
    assert rec["speculative_decoding"] == {"num_draft_tokens": 48, "num_accepted_draft_tokens": 30,
                                           "num_spec_tokens": 16}  # speculative.n_max
    assert (rec["output_tokens"], rec["prompt_tokens"]) == (64, 12)  # tokens_predicted, tokens_evaluated
    assert pr.parse_record(rec, LIMITS).spec.alpha == 30 / 48


def test_sglang_with_the_accepted_and_draft_counts() -> None:
    data = load("sglang-generate.json")
    with pytest.raises(ValueError, match="no model.*model="):  # native /generate names none
        record_from_response(data, finish_time=T)
    rec = record_from_response(data, finish_time=T, model="Qwen/Qwen3-8B")
    assert rec["request_id"] == "sg-req-1" and rec["engine"] == "sglang"
    assert rec["speculative_decoding"] == {"num_spec_steps": 40, "num_accepted_draft_tokens": 59,
                                           "num_draft_tokens": 120}
    assert (rec["output_tokens"], rec["prompt_tokens"]) == (100, 25)
    spec = pr.parse_record(rec, LIMITS).spec
    # τ = 1 + 59 / 40 = 2.475 (SGLang's own spec_accept_length 100 / 40 = 2.5 also counts the prefill token);
    # α = 59 / 120, SGLang's spec_accept_rate
    assert spec.tau == 2.475 and spec.alpha == 59 / 120 == data["meta_info"]["spec_accept_rate"]


def test_sglang_with_only_the_verify_count() -> None:
    rec = record_from_response(load("sglang-generate-legacy.json"), finish_time=T, model="Qwen/Qwen3-8B")
    # accepted = completion_tokens - spec_verify_ct - 1 (the prefill token) = 90 - 30 - 1; no draft tokens: α unknown
    assert rec["speculative_decoding"] == {"num_spec_steps": 30, "num_accepted_draft_tokens": 59}
    spec = pr.parse_record(rec, LIMITS).spec
    # τ = 1 + 59 / 30 = (90 - 1) / 30; SGLang's own spec_accept_length would be 90 / 30 = 3
    assert (spec.tau, spec.alpha, spec.draft_tokens) == (1 + 59 / 30, None, None)


def test_explicit_engine_reads_only_that_shape() -> None:
    assert record_from_response(load("llamacpp-chat.json"), engine="sglang") is None
    assert record_from_response(load("llamacpp-chat.json"), engine="llamacpp")["engine"] == "llamacpp"
    with pytest.raises(ValueError, match="engine must be one of"):
        engine_counts(load("llamacpp-chat.json"), "tgi")


def test_streams_of_each_engine() -> None:
    rec = record_from_stream(sse("llamacpp-chat-stream.sse"), labels={"traffic_class": "code"})
    assert (rec["request_id"], rec["engine"], rec["output_tokens"], rec["prompt_tokens"]) == (
        "chatcmpl-l2", "llamacpp", 120, 30)
    assert rec["speculative_decoding"] == {"num_draft_tokens": 96, "num_accepted_draft_tokens": 60}
    recorder = StreamRecorder(sse("sglang-generate-stream.sse"))
    assert len(list(recorder)) == len(sse("sglang-generate-stream.sse"))  # every chunk passes through
    rec = recorder.record(model="Qwen/Qwen3-8B")
    # the last chunk's cumulative counts: 50 tokens, 20 verify steps -> 50 - 20 - 1 = 29 accepted
    assert (rec["request_id"], rec["output_tokens"], rec["prompt_tokens"]) == ("sg-req-3", 50, 12)
    assert rec["speculative_decoding"] == {"num_spec_steps": 20, "num_accepted_draft_tokens": 29}
    # before any verify step (the first chunk: 1 token, from prefill) nothing is accepted
    first = record_from_stream(sse("sglang-generate-stream.sse")[:1], model="m")
    assert first["speculative_decoding"] == {"num_spec_steps": 0, "num_accepted_draft_tokens": 0}
    with pytest.raises(ValueError, match="no model"):
        record_from_stream(sse("sglang-generate-stream.sse"))


def test_gateway_takes_the_model_from_the_request_when_the_response_has_none() -> None:
    rec = record_from_gateway(load("sglang-generate-legacy.json"), mapping=GatewayMapping(),
                              request_body={"model": "Qwen/Qwen3-8B"}, finish_time=T)
    assert rec["model"] == "Qwen/Qwen3-8B" and rec["engine"] == "sglang"
    rec = record_from_gateway(load("llamacpp-chat.json"), mapping=GatewayMapping(),
                              request_body={"model": "alias"}, finish_time=T)
    assert rec["model"] == "qwen2.5-7b-instruct-q4_k_m.gguf"  # the response's own name wins
    recorder = StreamRecorder(sse("sglang-generate-stream.sse"))
    list(recorder)
    rec = record_from_gateway(recorder, mapping=GatewayMapping(), request_body={"model": "Qwen/Qwen3-8B"})
    assert (rec["model"], rec["request_id"], rec["engine"]) == ("Qwen/Qwen3-8B", "sg-req-3", "sglang")


def test_records_sum_exactly_to_the_shapes_fields() -> None:
    shapes = [(load("vllm-chat.json"), {}), (load("llamacpp-chat.json"), {}),
              (load("llamacpp-completion.json"), {"request_id": "lc"}),
              (load("sglang-generate.json"), {"model": "m"}), (load("sglang-generate-legacy.json"), {"model": "m"})]
    recs = [pr.parse_record(record_from_response(d, finish_time=T, **kw), LIMITS) for d, kw in shapes]
    vllm = load("vllm-chat.json")["metrics"]["speculative_decoding"]
    lc = [load("llamacpp-chat.json")["timings"], load("llamacpp-completion.json")["timings"]]
    sg = [load("sglang-generate.json")["meta_info"], load("sglang-generate-legacy.json")["meta_info"]]
    accepted = (vllm["num_accepted_draft_tokens"] + sum(t["draft_n_accepted"] for t in lc)
                + sg[0]["spec_accept_token_num"] + sg[1]["completion_tokens"] - sg[1]["spec_verify_ct"] - 1)
    assert sum(r.spec.accepted for r in recs) == accepted == 36 + 515 + 30 + 59 + 59
    by = {r.engine: [] for r in recs}
    for r in recs:
        by[r.engine].append(r)
    assert sum(r.spec.draft_tokens for r in by["llamacpp"]) == sum(t["draft_n"] for t in lc) == 652
    assert sum(r.spec.steps for r in by["sglang"]) == sum(m["spec_verify_ct"] for m in sg) == 70
    assert [r.spec.draft_tokens for r in by["sglang"]] == [120, None]
    assert sum(r.output_tokens for r in recs) == 53 + 665 + 64 + 100 + 90
