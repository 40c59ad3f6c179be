"""The fast exposition reader against the full parser: on the shared fixture and the simulator's expositions
it takes the fast path and gives exactly the full parser's result; on anything unusual or malformed it
steps aside, so parse() gives the full parser's result or its very refusal (same message)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.scrape.fastparse import parse_fast
from backend.scrape.parse import CREATED, WANTED, ExpositionError, parse, parse_full
from backend.sim.exposition import render
from backend.sim.fleet import FleetSim
from tests.sim.test_big_fleet import big_fleet
from tests.support.paths import FIXTURES

SAMPLE = (FIXTURES / "vllm_metrics_sample.prom").read_text()


def outcome(fn, text):
    """('ok', samples, created) or ('refused', message), compared with == (NaN-safe via repr)."""
    try:
        r = fn(text)
    except ExpositionError as exc:
        return ("refused", str(exc))
    return ("ok", repr(r.samples), repr(r.created))


def fast(text):
    return parse_fast(text, WANTED, CREATED)


def sim_texts() -> list[str]:
    fleet = FleetSim(big_fleet(6, 1.0), seed=3)
    fleet.advance_to(30)
    created = [1.7e9 + i for i in range(len(fleet.pools))]
    whole = render(fleet.pools, fleet.states, created_wall=created).decode()
    single = [render([p], [s], created_wall=[c], with_target_labels=False).decode()
              for p, s, c in zip(fleet.pools, fleet.states, created)]
    return [whole, *single]


@pytest.mark.parametrize("text", [SAMPLE, *sim_texts()], ids=["fixture", "sim-fleet", *(f"sim-pool{i}" for i in range(6))])
def test_plain_expositions_take_the_fast_path_with_the_full_result(text):
    got = fast(text)
    assert got is not None, "the plain vLLM form must not fall back"
    full = parse_full(text)
    assert got == (full.samples, full.created)
    assert len(full.samples) > 40 and len(full.created) > 5
    # the dicts keep the label order of the text, as the full parser's do (they are stored as JSON)
    assert [list(lbl) for _, lbl, _ in got[0]] == [list(lbl) for _, lbl, _ in full.samples]


def test_sim_pool_values_are_the_simulators():
    text = sim_texts()[1]
    parsed = parse(text)
    drafts = [v for n, _, v in parsed.samples if n == "vllm:spec_decode_num_drafts_total"]
    assert drafts and all(v > 0 for v in drafts)
    assert {b for b, _, _ in parsed.created} >= {"vllm:generation_tokens", "vllm:spec_decode_num_drafts"}


LINE = 'vllm:generation_tokens_total{engine="0",model_name="m"} 5.0\n'
UNUSUAL = {
    "escape": 'vllm:generation_tokens_total{engine="0",model_name="a\\"b"} 5.0\n',
    "timestamp": 'vllm:generation_tokens_total{engine="0",model_name="m"} 5.0 1700000000000\n',
    "exemplar": 'vllm:generation_tokens_total{engine="0",model_name="m"} 5.0 # {trace_id="x"} 1.0\n',
    "spaces in labels": 'vllm:generation_tokens_total{engine="0", model_name="m"} 5.0\n',
    "tab separator": 'vllm:generation_tokens_total{engine="0",model_name="m"}\t5.0\n',
    "name in labels": '{__name__="vllm:generation_tokens_total",engine="0",model_name="m"} 5.0\n',
    "counter renamed": '# TYPE vllm:generation_tokens counter\nvllm:generation_tokens{model_name="m"} 5\n',
    "crlf": LINE.replace("\n", "\r\n"),
    "unicode label": 'vllm:generation_tokens_total{engine="0",model_name="модель"} 5.0\n',
    "quoted help": '# HELP "vllm:x" text\n' + LINE,
    "negative zero created": LINE + 'vllm:generation_tokens_created{engine="0",model_name="m"} -0.0\n',
}
MALFORMED = {
    "no value": 'vllm:generation_tokens_total{model_name="m"}\n',
    "bad value": 'vllm:generation_tokens_total{model_name="m"} abc\n',
    "underscore value": 'vllm:generation_tokens_total{model_name="m"} 1_000\n',
    "unclosed labels": 'vllm:generation_tokens_total{model_name="m" 3\n',
    "duplicate label": 'vllm:generation_tokens_total{model_name="m",model_name="n"} 3\n',
    "duplicate label, series not kept": 'vllm:e2e_request_latency_seconds_count{a="1",a="2"} 3\n' + LINE,
    "reserved label": 'vllm:generation_tokens_total{__x="1",model_name="m"} 3\n',
    "missing comma": 'vllm:generation_tokens_total{engine="0"model_name="m"} 3\n',
    "bad line not kept": "process_cpu_seconds_total one\n" + LINE,
    "type without kind": "# TYPE vllm:generation_tokens\n" + LINE,
    "unknown type": "# TYPE vllm:generation_tokens bogus\n" + LINE,
    "bad type name": "# TYPE 9x counter\n" + LINE,
    "NaN": 'vllm:generation_tokens_total{model_name="m"} NaN\n',
    "Inf": 'vllm:generation_tokens_total{model_name="m"} +Inf\n',
    "negative": 'vllm:generation_tokens_total{model_name="m"} -3\n',
    "no model_name": "vllm:generation_tokens_total 3\n",
    "huge integer": 'vllm:generation_tokens_total{model_name="m"} ' + "9" * 400 + "\n",
}


@pytest.mark.parametrize("text", UNUSUAL.values(), ids=UNUSUAL.keys())
def test_unusual_forms_fall_back_to_the_full_parser(text):
    assert fast(text) is None
    assert outcome(parse, text) == outcome(parse_full, text)


@pytest.mark.parametrize("text", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_text_gets_the_full_parsers_refusal(text):
    assert fast(text) is None
    full = outcome(parse_full, text)
    assert full[0] == "refused"
    assert outcome(parse, text) == full


@pytest.mark.parametrize("value", [",", ",x", "a,", ",,", "x=y", "=", "}", " ", ""])
def test_label_values_with_commas_and_equals_signs_read_as_the_full_parser_reads_them(value):
    text = f'vllm:generation_tokens_total{{engine="{value}",model_name="m"}} 5.0\n'
    full = outcome(parse_full, text)
    assert outcome(parse, text) == full
    got = fast(text)
    if full[0] == "ok":
        assert got is not None and got[0] == parse_full(text).samples


def test_duplicate_series_are_kept_in_order_like_the_full_parser():
    text = LINE + 'vllm:generation_tokens_total{engine="0",model_name="m"} 7\n'
    got = fast(text)
    assert got is not None and [v for _, _, v in got[0]] == [5.0, 7.0]
    assert outcome(parse, text) == outcome(parse_full, text)


# random edits of real expositions: whatever the text, the fast path either steps aside or agrees exactly
BASES = [SAMPLE, sim_texts()[1]]
CHARS = st.sampled_from(list('{}",= #\\\n\t_-+.eE0123456789abcINFfNan:') + ["\r", "é", "__", "le=", "# TYPE x counter\n"])


@st.composite
def edited(draw):
    text = draw(st.sampled_from(BASES))
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(text)))
        op = draw(st.sampled_from(["insert", "delete", "replace", "dup_line"]))
        if op == "insert":
            text = text[:pos] + draw(CHARS) + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 3)):]
        elif op == "replace":
            text = text[:pos] + draw(CHARS) + text[pos + 1:]
        else:
            start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end + 1
            text = text[:end] + text[start:end] + text[end:]
    return text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited())
def test_any_edit_gives_the_full_parsers_outcome(text):
    got = fast(text)
    full = outcome(parse_full, text)
    if got is not None:
        assert full == ("ok", repr(got[0]), repr(got[1]))
        assert all(math.isfinite(v) and v >= 0 for _, _, v in got[0])
    assert outcome(parse, text) == full
