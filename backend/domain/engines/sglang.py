"""SGLang (`--enable-metrics`): the names its /metrics exposes, from its source.

Read from `python/sglang/srt/metrics/collector.py` (prometheus_client, so counters carry `_total` and a
`_created` series, histograms `_bucket`/`_sum`/`_count`). Every series carries the collector's labels, among
them `model_name` (the served model name).

Exact (TokenizerMetricsCollector, counted when a request finishes):
- `sglang:generation_tokens_total` "Number of generation tokens processed." -> generation_tokens
- `sglang:prompt_tokens_total` "Number of prefill tokens processed." -> prompt_tokens
- `sglang:num_requests_total` "Number of requests processed." -> finished_requests
- `sglang:time_to_first_token_seconds` (histogram) -> ttft
- `sglang:inter_token_latency_seconds` (histogram) -> itl. Unlike vLLM's (one sample per engine step),
  SGLang observes each decode interval once per token it produced (interval / tokens, weighted by tokens)
- `sglang:num_running_reqs` (gauge, SchedulerMetricsCollector) -> running_mean

Estimated (SchedulerMetricsCollector gauges, `multiprocess_mode="mostrecent"`, set at each decode log interval
from that interval's sums and then reset):
- `sglang:spec_accept_length` "The average acceptance length of speculative decoding." = tokens emitted per
  request per verify step (accepted drafts plus the bonus token) over the last log interval
- `sglang:spec_accept_rate` "The average acceptance rate of speculative decoding (`accepted tokens / total
  draft tokens` in batch)."

SGLang exposes no spec-decode counter: drafts, draft tokens, accepted tokens and the per-position counts are
NULL for its pools; the estimate (backend.domain.engines.estimate) goes to the separate `est_*` fields."""

from __future__ import annotations

from backend.domain.engines.table import Engine, Reading

ACCEPT_LENGTH = "sglang:spec_accept_length"
ACCEPT_RATE = "sglang:spec_accept_rate"

SGLANG = Engine(
    "sglang", "SGLang", "sglang:",
    readings=(
        Reading("generation_tokens", "counter", ("sglang:generation_tokens_total",),
                "Generated tokens (counted when a request finishes)"),
        Reading("prompt_tokens", "counter", ("sglang:prompt_tokens_total",), "Prompt tokens"),
        Reading("finished_requests", "counter", ("sglang:num_requests_total",), "Finished requests"),
        Reading("itl", "histogram", ("sglang:inter_token_latency_seconds",),
                "Inter-token latency, one sample per token"),
        Reading("ttft", "histogram", ("sglang:time_to_first_token_seconds",), "Time to first token"),
        Reading("running_mean", "gauge", ("sglang:num_running_reqs",), "Running requests"),
        Reading("spec_accept_length", "estimate", (ACCEPT_LENGTH,),
                "Mean accepted length per verify step over the last log interval (gauge)"),
        Reading("spec_accept_rate", "estimate", (ACCEPT_RATE,),
                "Accepted / draft tokens over the last log interval (gauge)"),
    ),
    model_label="model_name",
    itl_per="token",
    not_exposed=tuple((f, "not exposed by SGLang (its spec-decode figures are gauges: see the estimate)")
                      for f in ("drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos", "tpot")),
)
