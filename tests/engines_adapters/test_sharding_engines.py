"""Prometheus collection shards find their models on every configured engine's output-token counter (vLLM's
and SGLang's `model_name`, llama.cpp's from the scrape config's target label; llama.cpp writes no `_created`
series), one label-values request per chunk, and add the same `model_name` matcher to every engine's queries."""

from __future__ import annotations

import zlib

from backend.config import Settings
from backend.prom.queries import PoolLabels, cycle_queries
from backend.services.collect import shard_labels, shard_of

LLAMA_CPP, SGLANG_MODEL, VLLM_MODEL = "tiny-llama", "a.b+c", "meta-llama/Llama-3.1-8B-Instruct"
LABELS = PoolLabels("traffic_class", "spec_mode", 'job="engines"')


class LabelClient:
    """label_values only: the model names it holds, and the requests made."""

    def __init__(self, models: list[str]) -> None:
        self.models, self.asked = models, []

    def label_values(self, label: str, match: str, start: float, end: float) -> list[str]:
        self.asked.append((label, match, start, end))
        return sorted(self.models)


def settings(index: int, engines: str) -> Settings:
    return Settings(_env_file=None, source="prometheus", shard_count=2, shard_index=index, bucket_seconds=60,
                    prometheus_engines=engines)


def test_the_hash_is_crc32_of_the_model_name():
    # crc32 known answers: the shard of each model below
    assert [zlib.crc32(m.encode()) % 2 for m in (LLAMA_CPP, SGLANG_MODEL, VLLM_MODEL)] == [0, 0, 1]
    assert [shard_of(m, 2) for m in (LLAMA_CPP, SGLANG_MODEL, VLLM_MODEL)] == [0, 0, 1]


def test_every_engines_models_are_found_on_their_output_token_counters():
    client = LabelClient([LLAMA_CPP, SGLANG_MODEL, VLLM_MODEL])
    got = shard_labels(client, settings(0, "vllm,llamacpp,sglang"), LABELS, 1_800_000_060, 1_800_000_300)
    selector = ('{__name__=~"llamacpp:tokens_predicted_total|sglang:generation_tokens_total'
                '|vllm:generation_tokens_total",job="engines"}')
    assert client.asked == [("model_name", selector, 1_800_000_000, 1_800_000_300)]
    assert got == PoolLabels("traffic_class", "spec_mode", 'job="engines",model_name=~"^(?:a\\\\.b\\\\+c|tiny\\\\-llama)$"')
    # the other shard has the vLLM model only
    other = shard_labels(LabelClient([LLAMA_CPP, SGLANG_MODEL, VLLM_MODEL]), settings(1, "vllm,llamacpp,sglang"),
                         LABELS, 1_800_000_060, 1_800_000_300)
    assert other is not None and other.extra_matchers.endswith('model_name=~"^(?:meta\\\\-llama/Llama\\\\-3\\\\.1\\\\-8B\\\\-Instruct)$"')
    # every engine's queries carry the shard's matcher
    queries = cycle_queries(got, 60, ("vllm", "llamacpp", "sglang"))
    llama_queries = [q for q in queries if q.engine == "llamacpp"]
    assert llama_queries and all('tiny' in q.promql and 'model_name=~' in q.promql for q in llama_queries)


def test_a_llamacpp_only_collection_asks_its_own_counter_and_a_shard_without_models_asks_nothing():
    client = LabelClient([LLAMA_CPP])
    assert shard_labels(client, settings(1, "llamacpp"), PoolLabels("traffic_class", "spec_mode", ""),
                        1_800_000_060, 1_800_000_060) is None
    assert [m for _l, m, _s, _e in client.asked] == ["llamacpp:tokens_predicted_total"]


def test_vllm_alone_asks_vllms_output_counter():
    client = LabelClient([VLLM_MODEL])
    got = shard_labels(client, settings(1, "vllm"), PoolLabels("traffic_class", "spec_mode", ""), 1_800_000_060,
                       1_800_000_060)
    assert [m for _l, m, _s, _e in client.asked] == ["vllm:generation_tokens_total"]
    assert got == PoolLabels("traffic_class", "spec_mode",
                             'model_name=~"^(?:meta\\\\-llama/Llama\\\\-3\\\\.1\\\\-8B\\\\-Instruct)$"')
