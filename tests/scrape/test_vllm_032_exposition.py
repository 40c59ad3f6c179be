"""specwatch's parser and assembler on the unedited /metrics of a real vLLM 0.32.0 (CPU build, tiny Llama,
ngram speculation with K = 3, `--per-request-spec-decode-metrics detailed`), captured after traffic from a
server started with the flags backend.engines.vllm_cpu uses. The expected values come from prometheus_client's own
parser (tests/support/exposition.py) and, for the headline counters, from the file as written."""

from __future__ import annotations

from backend.domain.records import PoolKey
from backend.scrape.assemble import PoolNaming, Scrape, assemble
from backend.scrape.layout import LayoutCache
from backend.scrape.parse import ParsedScrape, parse, parse_full
from tests.support.exposition import EngineSnapshot, parsed_spec_counts
from tests.support.paths import FIXTURES

TEXT = (FIXTURES / "vllm-0.32.0-cpu.prom").read_text()
NAMING = PoolNaming("traffic_class", "spec_mode", "default", "on")
BASE = 1_800_000_000  # a bucket boundary


def values(parsed: ParsedScrape, name: str) -> list[float]:
    return [v for n, _, v in parsed.samples if n == name]


def test_fast_and_full_parser_read_the_real_exposition_alike():
    fast, full = parse(TEXT), parse_full(TEXT)
    assert fast.samples == full.samples and fast.created == full.created
    assert len(fast.samples) > 60  # spec decode, three histograms, token counters, gauges


def test_spec_decode_counters_as_the_engine_wrote_them():
    parsed = parse(TEXT)
    counts = parsed_spec_counts(parsed)
    assert counts == {"drafts": [745.0], "draft_tokens": [1490.0], "accepted_tokens": [281.0],
                      "per_pos": {"0": 275.0, "1": 3.0, "2": 3.0}}
    per_pos = counts["per_pos"]
    labels = {tuple(sorted(lbl.items())) for n, lbl, _ in parsed.samples if n.startswith("vllm:spec_decode")}
    assert (("engine", "0"), ("model_name", "tiny-llama")) in labels
    # the invariants of docs' metric reference hold on the real counters
    assert sum(per_pos.values()) == 281.0
    assert 745.0 >= per_pos["0"] >= per_pos["1"] >= per_pos["2"] >= 0
    drafts, draft_tokens, accepted = (counts[n][0] for n in ("drafts", "draft_tokens", "accepted_tokens"))
    assert accepted <= draft_tokens <= 3 * drafts


def test_the_per_request_tpot_name_of_this_version_is_read():
    parsed = parse(TEXT)
    # 0.32 exposes vllm:request_time_per_output_token_seconds and no vllm:time_per_output_token_seconds
    assert "vllm:time_per_output_token_seconds_count" not in TEXT
    assert values(parsed, "vllm:request_time_per_output_token_seconds_count") == [203.0]
    assert values(parsed, "vllm:inter_token_latency_seconds_count") == [2025.0]
    # every family specwatch reads carries its _created value (restart detection), spec decode included
    created = {base for base, _, _ in parsed.created}
    assert {"vllm:spec_decode_num_drafts", "vllm:spec_decode_num_accepted_tokens_per_pos",
            "vllm:generation_tokens", "vllm:inter_token_latency_seconds",
            "vllm:request_time_per_output_token_seconds"} <= created
    assert not any(n.endswith("_created") for n, _, _ in parsed.samples)


def test_assembled_increases_equal_the_engines_own_counts():
    """From a zero scrape of the same process (same layout and _created) to the real one: the bucket's
    record holds exactly the engine's counters and cumulative ITL/TPOT buckets."""
    real = parse(TEXT)
    zero = ParsedScrape([(n, lbl, 0.0) for n, lbl, _ in real.samples], list(real.created))
    layouts = LayoutCache()
    scrapes = [Scrape.of("http://engine/metrics", BASE + 10, zero, layouts),
               Scrape.of("http://engine/metrics", BASE + 40, real, layouts)]
    records = assemble(scrapes, target_labels={"http://engine/metrics": {}}, width=60, first_bucket=BASE,
                       last_bucket=BASE, max_gap=300.0, naming=NAMING)
    ((key, bucket), rec), = records.items()
    assert (key, bucket) == (PoolKey("tiny-llama", "default", "on"), BASE)
    truth = EngineSnapshot.of(TEXT)
    assert (rec.drafts, rec.draft_tokens, rec.accepted_tokens) == (
        truth.counters["drafts"], truth.counters["draft_tokens"], truth.counters["accepted_tokens"])
    assert rec.accepted_per_pos == truth.per_pos == [275.0, 3.0, 3.0]
    for field in ("itl", "tpot"):
        hist = getattr(rec, field)
        assert hist.as_pairs() == truth.buckets[field], field
        assert (hist.sum, hist.count) == (truth.sums[field], truth.counts[field]), field
    assert rec.restarts == 0
