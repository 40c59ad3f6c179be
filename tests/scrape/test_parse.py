
import pytest

from backend.scrape.parse import ExpositionError, parse
from tests.support.exposition import parsed_spec_counts
from tests.support.paths import FIXTURES

SAMPLE = FIXTURES / "vllm_metrics_sample.prom"


def values(parsed, name, **labels):
    return [v for n, lbl, v in parsed.samples if n == name and all(lbl.get(k) == x for k, x in labels.items())]


def test_shared_sample_parses_with_exact_names():
    parsed = parse(SAMPLE.read_text())
    assert parsed_spec_counts(parsed) == {"drafts": [1250000.0], "draft_tokens": [3750000.0],
                                          "accepted_tokens": [2241250.0],
                                          "per_pos": {"0": 952500.0, "1": 730000.0, "2": 558750.0}}
    assert values(parsed, "vllm:inter_token_latency_seconds_count") == [1253100.0]
    assert values(parsed, "vllm:num_requests_running") == [24.0]
    # _created values are kept apart, never summed into counters (vLLM PR #41916)
    assert not any(n.endswith("_created") for n, _, _ in parsed.samples)
    created = {base for base, _, _ in parsed.created}
    assert "vllm:spec_decode_num_drafts" in created
    assert all(v > 1.7e9 for _, _, v in parsed.created)


@pytest.mark.parametrize(
    "text, message",
    [
        ('vllm:generation_tokens_total{model_name="m"} abc\n', "malformed"),
        ('# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total{model_name="m"} NaN\n', "finite"),
        ('# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total{model_name="m"} -3\n', "negative"),
        ('# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total 3\n', "model_name"),
        ('vllm:generation_tokens_total{model_name="m" 3\n', "malformed"),
    ],
)
def test_bad_exposition_is_refused_with_a_clear_error(text, message):
    with pytest.raises(ExpositionError, match=message):
        parse(text)
