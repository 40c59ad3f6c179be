"""The column-wise batch validation keeps and refuses exactly what parse_record does, record by record,
with the same values and the same rule (random records, each broken in one of many ways)."""

from __future__ import annotations

import copy
import math
import random

import pytest

from backend.domain import per_request as pr
from backend.domain.per_request_batch import finish_us, validate_batch

NOW = 1_796_040_000.0
LIMITS = pr.RecordLimits(allowed_labels=frozenset({"traffic_class", "tenant", "route"}), max_id_length=200,
                         max_model_length=300, max_label_value_length=100, oldest=NOW - 7 * 86400,
                         newest=NOW + 300)


def good(rng: random.Random, i: int) -> dict:
    k = rng.choice((1, 3, 5))
    hist = [rng.randrange(0, 9) for _ in range(k + 1)]
    steps = sum(hist)
    accepted = sum(j * h for j, h in enumerate(hist))
    spec = {"num_spec_tokens": k, "num_spec_steps": steps, "num_draft_tokens": k * steps,
            "num_accepted_draft_tokens": accepted, "acceptance_histogram": hist}
    if rng.random() < 0.7 and steps:
        spec["mean_acceptance_length"] = 1 + accepted / steps
        spec["draft_acceptance_rate"] = accepted / (k * steps)
    if rng.random() < 0.4:
        spec["acceptance_histogram_by_draft_length"] = {str(k): list(hist)}
    rec = {"request_id": f"r-{i}", "model": rng.choice(("m1", "m2")), "finish_time": NOW - rng.uniform(1, 3600),
           "output_tokens": steps + accepted, "speculative_decoding": spec}
    if rng.random() < 0.8:
        rec["labels"] = {"traffic_class": rng.choice(("chat", "code")), "tenant": rng.choice(("a", "b"))}
    return rec


def _spec(r: dict) -> dict:
    return r["speculative_decoding"]


BREAKS = [
    lambda r: r.update(request_id="   "),
    lambda r: r.update(request_id="x" * 201),
    lambda r: r.update(request_id="a\x00b"),
    lambda r: r.update(request_id=7),
    lambda r: r.pop("model"),
    lambda r: r.update(model=""),
    lambda r: r.update(finish_time=NOW - 8 * 86400),
    lambda r: r.update(finish_time=NOW + 3600),
    lambda r: r.update(finish_time=math.nan),
    lambda r: r.update(finish_time="2026-11-30T11:00:00"),
    lambda r: r.update(finish_time="2026-12-01T11:00:00+00:00"),  # valid, via the record-by-record pass
    lambda r: r.update(finish_time=True),
    lambda r: r.update(finish_time=10**400),
    lambda r: r.update(output_tokens=-1),
    lambda r: r.update(output_tokens=2**31),
    lambda r: r.update(output_tokens=3.0),  # a whole float is a count
    lambda r: r.update(labels={"tenant": ""}),
    lambda r: r.update(labels={"tenant": ["x"]}),
    lambda r: r.update(labels={"tenant": "x" * 101}),
    lambda r: r.update(labels="chat"),
    lambda r: r.update(speculative_decoding=None),
    lambda r: _spec(r).pop("num_spec_steps"),
    lambda r: _spec(r).update(num_spec_tokens=0),
    lambda r: _spec(r).update(num_spec_tokens=65),
    lambda r: _spec(r).update(num_spec_steps=_spec(r)["num_spec_steps"] + 1),
    lambda r: _spec(r).update(num_accepted_draft_tokens=_spec(r)["num_accepted_draft_tokens"] + 1),
    lambda r: _spec(r).update(num_draft_tokens=_spec(r)["num_draft_tokens"] + 1),
    lambda r: _spec(r).update(num_draft_tokens=max(0, _spec(r)["num_accepted_draft_tokens"] - 1)),
    lambda r: _spec(r).update(num_draft_tokens=True),
    lambda r: _spec(r).update(num_spec_steps=2**40),
    lambda r: _spec(r).update(num_spec_steps=10**30),
    lambda r: _spec(r)["acceptance_histogram"].append(0),
    lambda r: _spec(r)["acceptance_histogram"].__setitem__(0, -1),
    lambda r: _spec(r)["acceptance_histogram"].__setitem__(0, True),
    lambda r: _spec(r)["acceptance_histogram"].__setitem__(0, 1.5),
    lambda r: _spec(r).update(acceptance_histogram="1,2"),
    lambda r: _spec(r).update(mean_acceptance_length=9.0),
    lambda r: _spec(r).update(draft_acceptance_rate=math.inf),
    lambda r: _spec(r).update(draft_acceptance_rate=1),  # an int rate: compared as such
    lambda r: _spec(r).update(acceptance_histogram_by_draft_length={"1": [0, 0]}),
    lambda r: _spec(r).update(acceptance_histogram_by_draft_length={
        str(_spec(r)["num_spec_tokens"]): [True] * (_spec(r)["num_spec_tokens"] + 1)}),
    lambda r: _spec(r).update(per_step_accepted=[1], per_step_drafted=[1]),
    lambda r: _spec(r).update(something_new=1),
]


def one_by_one(items: list) -> tuple[list, list]:
    kept, refused = [], []
    for i, item in enumerate(items):
        try:
            rec = pr.parse_record(item, LIMITS)
        except pr.Refused as exc:
            refused.append((i, exc.rule))
            continue
        s = rec.spec
        kept.append((i, rec.request_id, rec.model, rec.labels, finish_us(rec.finish_time), rec.output_tokens, s.k,
                     s.steps, s.draft_tokens, s.accepted, list(s.histogram)))
    return kept, refused


def batched(items: list) -> tuple[list, list]:
    b = validate_batch(items, LIMITS)
    kept = list(zip(b.index, b.request_id, b.model, b.labels, b.finish_us, b.output_tokens, b.k, b.steps,
                    b.draft_tokens, b.accepted, b.histogram, strict=True))
    return [tuple(x) for x in kept], [(i, exc.rule) for i, _, exc in b.refused]


@pytest.mark.parametrize("seed", range(6))
def test_batch_validation_equals_record_by_record(seed: int) -> None:
    rng = random.Random(seed)
    items = [good(rng, i) for i in range(400)]
    for i in rng.sample(range(400), 120):
        BREAKS[i % len(BREAKS)](items[i])
    expected = one_by_one(copy.deepcopy(items))
    assert batched(items) == expected
    assert len(expected[0]) > 200 and len(expected[1]) > 60  # both paths really ran


def test_every_break_in_a_clean_batch_matches() -> None:
    """Each break alone in an otherwise plain batch (the column pass sees it, not the shape fallback)."""
    for n, brk in enumerate(BREAKS):
        rng = random.Random(n)
        items = [good(rng, i) for i in range(20)]
        brk(items[7])
        assert batched(items) == one_by_one(copy.deepcopy(items)), n


def test_a_clean_batch_is_kept_whole_in_order() -> None:
    rng = random.Random(9)
    items = [good(rng, i) for i in range(300)]
    b = validate_batch(items, LIMITS)
    assert b.index == list(range(300)) and not b.refused
    assert b.histogram[5] == items[5]["speculative_decoding"]["acceptance_histogram"]


def test_an_unknown_label_refuses_the_batch_at_its_record() -> None:
    rng = random.Random(3)
    items = [good(rng, i) for i in range(10)]
    items[4]["labels"] = {"user_id": "u1"}
    items[6]["labels"] = {"user_id": "u2"}
    with pytest.raises(pr.LabelRefused) as err:
        validate_batch(items, LIMITS)
    assert err.value.index == 4 and "'user_id' is not allowed" in str(err.value)


def test_too_large_counts_are_refused_by_rule() -> None:
    rng = random.Random(4)
    rec = good(rng, 0)
    rec["speculative_decoding"]["acceptance_histogram"][0] += 2**31
    rec["speculative_decoding"]["num_spec_steps"] += 2**31
    with pytest.raises(pr.Refused) as err:
        pr.parse_record(rec, LIMITS)
    assert err.value.rule == "too_large"
