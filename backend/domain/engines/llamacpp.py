"""llama.cpp's llama-server (`--metrics`): the names its /metrics exposes, from its source.

Read from `tools/server/server-task.cpp`, `server_task_result_metrics::to_metrics()` (the current builds):
every name carries the `llamacpp:` prefix, counters are written with `_total` and `# TYPE ... counter`, and
no series has a label (one server, one model): the model, class and spec mode come from the scrape target's
configured labels (`model_name`, and the class and mode labels), or, through Prometheus, from target labels
the scrape config adds.

- `llamacpp:spec_decode_num_draft_tokens_total` "Speculative: Total draft tokens generated" -> draft_tokens
- `llamacpp:spec_decode_num_accepted_tokens_total` "Speculative: Total draft tokens accepted by the target
  model" -> accepted_tokens
- `llamacpp:spec_decode_num_drafts_total` "Speculative: Total speculative decoding verification steps"
  -> drafts
- `llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="i"}` "Accepted tokens per draft
  position" (written only once a draft was accepted) -> accepted_per_pos
- `llamacpp:tokens_predicted_total` "Number of generation tokens processed" -> generation_tokens (also the
  restart marker: llama-server writes no `_created` series, so a restart is a drop)
- `llamacpp:prompt_tokens_total` "Number of prompt tokens processed, excluding cached tokens" -> prompt_tokens
- `llamacpp:requests_processing` (gauge) "Number of requests processing" -> running_mean

Older names, read where a build has no current one: `llamacpp:n_drafted_total` /
`llamacpp:n_drafted_accepted_total` and `llamacpp:n_draft_total` / `llamacpp:n_draft_accepted_total` (draft and
accepted tokens, in builds and forks before the `spec_decode_*` names). Those builds expose no verify-step
and no per-position counter: drafts and accepted_per_pos stay NULL for them ("not exposed by llama.cpp"),
never 0, and the mean accepted length (which needs drafts) is not shown. llama-server has no latency
histogram: itl, tpot and ttft stay NULL."""

from __future__ import annotations

from backend.domain.engines.table import Engine, Reading

LLAMACPP = Engine(
    "llamacpp", "llama.cpp", "llamacpp:",
    readings=(
        Reading("drafts", "counter", ("llamacpp:spec_decode_num_drafts_total",),
                "Verify steps (one per slot per speculative step)"),
        Reading("draft_tokens", "counter", ("llamacpp:spec_decode_num_draft_tokens_total",
                                            "llamacpp:n_drafted_total", "llamacpp:n_draft_total"),
                "Draft tokens generated"),
        Reading("accepted_tokens", "counter", ("llamacpp:spec_decode_num_accepted_tokens_total",
                                               "llamacpp:n_drafted_accepted_total",
                                               "llamacpp:n_draft_accepted_total"),
                "Draft tokens accepted"),
        Reading("accepted_per_pos", "per_pos", ("llamacpp:spec_decode_num_accepted_tokens_per_pos_total",),
                "Accepted tokens per draft position (`position` label)"),
        Reading("generation_tokens", "counter", ("llamacpp:tokens_predicted_total",), "Generated tokens"),
        Reading("prompt_tokens", "counter", ("llamacpp:prompt_tokens_total",),
                "Prompt tokens processed (cached ones excluded)"),
        Reading("running_mean", "gauge", ("llamacpp:requests_processing",), "Requests processing"),
    ),
    model_label=None,
    itl_per=None,
    not_exposed=(("drafts", "not exposed by llama.cpp builds before spec_decode_num_drafts_total"),
                 ("accepted_per_pos", "not exposed by llama.cpp builds before the per-position counter"),
                 ("itl", "not exposed by llama.cpp"), ("tpot", "not exposed by llama.cpp"),
                 ("ttft", "not exposed by llama.cpp")),
)
