"""The vLLM V1 metric families specwatch collects, and the record field each one fills.

Names as exposed (prometheus_client appends `_total` to counters). Histograms are read as their
`_bucket` (cumulative per `le`), `_sum` and `_count` series. See ../shared/reference/vllm-metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "per_pos", "histogram", "gauge"]


@dataclass(frozen=True)
class Family:
    field: str
    metric: str
    kind: Kind


FAMILIES: tuple[Family, ...] = (
    Family("drafts", "vllm:spec_decode_num_drafts_total", "counter"),
    Family("draft_tokens", "vllm:spec_decode_num_draft_tokens_total", "counter"),
    Family("accepted_tokens", "vllm:spec_decode_num_accepted_tokens_total", "counter"),
    Family("accepted_per_pos", "vllm:spec_decode_num_accepted_tokens_per_pos_total", "per_pos"),
    Family("itl", "vllm:inter_token_latency_seconds", "histogram"),
    Family("tpot", "vllm:request_time_per_output_token_seconds", "histogram"),
    Family("ttft", "vllm:time_to_first_token_seconds", "histogram"),
    Family("generation_tokens", "vllm:generation_tokens_total", "counter"),
    Family("prompt_tokens", "vllm:prompt_tokens_total", "counter"),
    Family("finished_requests", "vllm:request_success_total", "counter"),
    Family("preemptions", "vllm:num_preemptions_total", "counter"),
    Family("running_mean", "vllm:num_requests_running", "gauge"),
)

# Every pool exports this counter, spec mode or not; a change of its `_created` value marks a restart.
RESTART_MARKER = "vllm:generation_tokens_created"

BY_METRIC = {f.metric: f for f in FAMILIES}
