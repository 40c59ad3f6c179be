"""The rules of llama.cpp and SGLang records: what each engine must send, what it cannot send, the
inconsistent values refused by name, counts it does not report left None (never 0), and the batch path
agreeing with parse_record on them."""

from __future__ import annotations

import pytest

from backend.domain import per_request as pr
from backend.domain import per_request_batch as prb

LIMITS = pr.RecordLimits(allowed_labels=frozenset({"traffic_class"}), max_id_length=200, max_model_length=300,
                         max_label_value_length=120, oldest=0.0, newest=2e9)


def rec(engine: str | None, spec: dict, *, output: int = 100, rid: str = "r1") -> dict:
    out = {"request_id": rid, "model": "m", "finish_time": 1_700_000_000.0, "output_tokens": output,
           "labels": {"traffic_class": "chat"}, "speculative_decoding": spec}
    return out if engine is None else {**out, "engine": engine}


VLLM = {"num_spec_tokens": 2, "num_spec_steps": 3, "num_draft_tokens": 6, "num_accepted_draft_tokens": 3,
        "acceptance_histogram": [1, 1, 1]}


def test_llamacpp_counts() -> None:
    r = pr.parse_record(rec("llamacpp", {"num_draft_tokens": 40, "num_accepted_draft_tokens": 30}), LIMITS)
    assert (r.engine, r.spec.draft_tokens, r.spec.accepted) == ("llamacpp", 40, 30)
    assert (r.spec.k, r.spec.steps, r.spec.histogram, r.spec.accepted_per_pos()) == (None, None, None, None)
    assert (r.spec.alpha, r.spec.tau) == (0.75, None)
    with_k = pr.parse_record(rec("llamacpp", {"num_draft_tokens": 40, "num_accepted_draft_tokens": 30,
                                              "num_spec_tokens": 16}), LIMITS)
    assert with_k.spec.k == 16


def test_sglang_counts() -> None:
    r = pr.parse_record(rec("sglang", {"num_spec_steps": 40, "num_accepted_draft_tokens": 60}), LIMITS)
    assert (r.spec.steps, r.spec.accepted, r.spec.draft_tokens, r.spec.k) == (40, 60, None, None)
    assert (r.spec.tau, r.spec.alpha) == (2.5, None)
    full = pr.parse_record(rec("sglang", {"num_spec_steps": 40, "num_accepted_draft_tokens": 59,
                                          "num_draft_tokens": 120, "num_spec_tokens": 3}), LIMITS)
    assert (full.spec.alpha, full.spec.k) == (59 / 120, 3)
    # a vLLM record without an engine is still vLLM's
    assert pr.parse_record(rec(None, VLLM), LIMITS).engine == "vllm"


@pytest.mark.parametrize(("engine", "spec", "output", "rule", "words"), [
    ("llamacpp", {"num_draft_tokens": 10, "num_accepted_draft_tokens": 11}, 100, "accepted_gt_drafted", "11 > "),
    ("llamacpp", {"num_accepted_draft_tokens": 3}, 100, "missing_field", "num_draft_tokens is missing"),
    ("llamacpp", {"num_draft_tokens": 10, "num_accepted_draft_tokens": 3, "num_spec_steps": 4}, 100,
     "field_not_for_engine", "num_spec_steps"),
    ("llamacpp", {"num_draft_tokens": 10, "num_accepted_draft_tokens": 3, "acceptance_histogram": [1, 2]}, 100,
     "field_not_for_engine", "acceptance_histogram"),
    ("llamacpp", {"num_draft_tokens": -1, "num_accepted_draft_tokens": 0}, 100, "negative", "negative"),
    ("llamacpp", {"num_draft_tokens": 10, "num_accepted_draft_tokens": 2, "num_spec_tokens": 0}, 100,
     "k_invalid", "1 .. 64"),
    ("llamacpp", {"num_draft_tokens": 10, "num_accepted_draft_tokens": 2, "draft_acceptance_rate": 0.3}, 100,
     "rate_mismatch", "0.2"),
    ("sglang", {"num_accepted_draft_tokens": 3}, 100, "missing_field", "num_spec_steps is missing"),
    ("sglang", {"num_spec_steps": 40, "num_accepted_draft_tokens": -10}, 100, "negative", "negative"),
    ("sglang", {"num_spec_steps": 40, "num_accepted_draft_tokens": 50, "num_draft_tokens": 45}, 100,
     "accepted_gt_drafted", "50 > num_draft_tokens 45"),
    ("sglang", {"num_spec_steps": 10, "num_accepted_draft_tokens": 5, "num_draft_tokens": 40,
                "num_spec_tokens": 3}, 100, "drafted_gt_k_steps", "3 x 10"),
    ("sglang", {"num_spec_steps": 10, "num_accepted_draft_tokens": 31, "num_spec_tokens": 3}, 100,
     "accepted_gt_k_steps", "3 x 10"),
    ("sglang", {"num_spec_steps": 101, "num_accepted_draft_tokens": 0}, 100, "steps_gt_output", "101 > output"),
    ("sglang", {"num_spec_steps": 0, "num_accepted_draft_tokens": 5}, 100, "accepted_without_drafts",
     "5 without a verify step"),
    ("sglang", {"num_spec_steps": 10, "num_accepted_draft_tokens": 5, "mean_acceptance_length": 2.0}, 100,
     "rate_mismatch", "1.5"),
    ("tgi", VLLM, 100, "unknown_engine", "'tgi' is not one of vllm, llamacpp, sglang"),
    (["vllm"], VLLM, 100, "unknown_engine", "list is not one of"),
])
def test_inconsistent_records_are_refused_by_rule(engine, spec, output, rule, words) -> None:
    with pytest.raises(pr.Refused, match=words) as err:
        pr.parse_record(rec(engine, spec, output=output), LIMITS)
    assert err.value.rule == rule


def test_batch_path_keeps_engine_and_nulls_and_refuses_what_parse_record_refuses() -> None:
    items = [rec(None, VLLM, rid="v"), rec("vllm", VLLM, rid="v2"),
             rec("llamacpp", {"num_draft_tokens": 40, "num_accepted_draft_tokens": 30}, rid="l"),
             rec("sglang", {"num_spec_steps": 40, "num_accepted_draft_tokens": 60}, rid="s"),
             rec("llamacpp", {"num_draft_tokens": 4, "num_accepted_draft_tokens": 5}, rid="bad"),
             rec("bogus", VLLM, rid="bad2"),  # a vLLM-shaped record of an unknown engine: never the fast path
             rec({"x": 1}, VLLM, rid="bad3")]
    b = prb.validate_batch(items, LIMITS)
    assert b.request_id == ["v", "v2", "l", "s"]
    assert b.engine == ["vllm", "vllm", "llamacpp", "sglang"]
    assert b.steps == [3, 3, None, 40] and b.draft_tokens == [6, 6, 40, None] and b.k == [2, 2, None, None]
    assert b.histogram == [[1, 1, 1], [1, 1, 1], None, None] and b.accepted == [3, 3, 30, 60]
    assert [(i, e.rule) for i, _, e in b.refused] == [(4, "accepted_gt_drafted"), (5, "unknown_engine"),
                                                       (6, "unknown_engine")]
    # an all-vLLM batch with one unknown engine: the column pass does not take it
    only = prb.validate_batch([rec(None, VLLM, rid="a"), rec("bogus", VLLM, rid="b")], LIMITS)
    assert only.request_id == ["a"] and only.refused[0][2].rule == "unknown_engine"
