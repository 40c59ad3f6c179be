"""Render the simulated fleet as vLLM V1 does: Prometheus text format 0.0.4.

Families, HELP texts, label names, bucket bounds and the ``_created`` gauge families follow vLLM 0.33
with one API server (prometheus_client's default registry), see shared/reference/vllm-metrics.md and
shared/fixtures/vllm_metrics_sample.prom. The text itself is written by prometheus_client's own
``generate_latest`` (sorted labels, ``22.0`` / ``1.25e+06`` floats, ``_created`` split into gauge families).

The fleet view adds ``traffic_class``, ``spec_mode`` and any extra pool labels to every series, as
Prometheus target relabeling would; the single-pool view (``/pools/<id>/metrics``) does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from backend.sim.fleet import FINISH_REASONS, HISTOGRAMS, Pool, PoolState

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # "text/plain; version=0.0.4; charset=utf-8"

HELP = {
    "vllm:num_requests_running": "Number of requests in model execution batches.",
    "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
    "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
    "vllm:prompt_tokens": "Number of prefill tokens processed.",
    "vllm:generation_tokens": "Number of generation tokens processed.",
    "vllm:request_success": "Count of successfully processed requests.",
    "vllm:num_preemptions": "Cumulative number of preemption from the engine.",
    "vllm:time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "vllm:inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "vllm:request_time_per_output_token_seconds": "Histogram of time_per_output_token_seconds per request.",
    "vllm:e2e_request_latency_seconds": "Histogram of e2e request latency in seconds.",
    "vllm:spec_decode_num_drafts": "Number of spec decoding drafts.",
    "vllm:spec_decode_num_draft_tokens": "Number of draft tokens.",
    "vllm:spec_decode_num_accepted_tokens": "Number of accepted tokens.",
    "vllm:spec_decode_num_accepted_tokens_per_pos": "Accepted tokens per draft position.",
}

HIST_FAMILIES = (("vllm:time_to_first_token_seconds", "ttft"), ("vllm:inter_token_latency_seconds", "itl"),
                 ("vllm:request_time_per_output_token_seconds", "tpot"),
                 ("vllm:e2e_request_latency_seconds", "e2e"))
_LE = {name: [floatToGoString(b) for b in bounds] + ["+Inf"] for name, bounds in HISTOGRAMS.items()}


class _Families:
    """Something with collect(), as generate_latest expects of a registry."""

    def __init__(self, families: list[Metric]):
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def _series_labels(pool: Pool, engine: int, with_target_labels: bool,
                   config: dict[str, str | None] | None = None) -> dict[str, str]:
    labels = {"engine": str(engine), "model_name": pool.spec.model}
    if with_target_labels:
        labels["traffic_class"] = pool.spec.traffic_class
        labels["spec_mode"] = pool.spec.spec_mode
        labels.update(pool.spec.labels)
        labels.setdefault("instance", pool.spec.instance)  # each pool is one server (a replica of its pool)
        labels.update({k: v for k, v in (config or {}).items() if v})
    return labels


def render(pools: Sequence[Pool], states: Sequence[PoolState], *, created_wall: Sequence[float],
           with_target_labels: bool = True, configs: Sequence[dict[str, str | None]] | None = None) -> bytes:
    """The exposition for `pools` in `states`; created_wall[i] is the unix time of pool i's last (re)start;
    configs[i] (fleet view only) pool i's drafter / vllm_version labels in force."""
    fams: dict[str, Metric] = {}

    def family(cls, name: str) -> Metric:
        if name not in fams:
            fams[name] = cls(name, HELP[name], labels=())
        return fams[name]

    def add(fam: Metric, suffix: str, labels: dict[str, str], value: float) -> None:
        fam.samples.append(Sample(fam.name + suffix, labels, float(value)))

    order = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
             "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success", "vllm:num_preemptions",
             *(h for h, _ in HIST_FAMILIES), "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
             "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_per_pos"]
    for name in order[:3]:
        family(GaugeMetricFamily, name)
    for name in order[3:7]:
        family(CounterMetricFamily, name)
    for name, _ in HIST_FAMILIES:
        family(HistogramMetricFamily, name)
    if any(p.spec.spec for p in pools):
        for name in order[-4:]:
            family(CounterMetricFamily, name)

    for i, (pool, st, created) in enumerate(zip(pools, states, created_wall)):
        lay = pool.layout
        for e, eng in enumerate(st.engines):
            lab = _series_labels(pool, e, with_target_labels, configs[i] if configs else None)
            c = eng.c
            running = int(eng.occ.sum())
            kv = float((eng.prompt[eng.occ] + eng.gen[eng.occ]).sum()) / pool.spec.kv_capacity_tokens
            add(fams["vllm:num_requests_running"], "", lab, running)
            add(fams["vllm:num_requests_waiting"], "", lab, eng.waiting)
            add(fams["vllm:kv_cache_usage_perc"], "", lab, min(1.0, kv))
            for name, idx in (("vllm:prompt_tokens", lay.prompt), ("vllm:generation_tokens", lay.generation)):
                add(fams[name], "_total", lab, c[idx])
                add(fams[name], "_created", lab, created)
            fam = fams["vllm:request_success"]
            for reason, value in zip(FINISH_REASONS, c[lay.success]):
                lr = {**lab, "finished_reason": reason}
                add(fam, "_total", lr, value)
                add(fam, "_created", lr, created)
            add(fams["vllm:num_preemptions"], "_total", lab, c[lay.preemptions])
            add(fams["vllm:num_preemptions"], "_created", lab, created)
            for name, key in HIST_FAMILIES:
                fam = fams[name]
                sl, sum_idx = lay.hist[key]
                cum = np.cumsum(c[sl])
                for le, value in zip(_LE[key], cum):
                    add(fam, "_bucket", {**lab, "le": le}, value)
                add(fam, "_count", lab, cum[-1])
                add(fam, "_sum", lab, c[sum_idx])
                add(fam, "_created", lab, created)
            if not pool.spec.spec:
                continue
            for name, idx in (("vllm:spec_decode_num_drafts", lay.drafts),
                              ("vllm:spec_decode_num_draft_tokens", lay.draft_tokens),
                              ("vllm:spec_decode_num_accepted_tokens", lay.accepted)):
                add(fams[name], "_total", lab, c[idx])
                add(fams[name], "_created", lab, created)
            fam = fams["vllm:spec_decode_num_accepted_tokens_per_pos"]
            for pos, value in enumerate(c[lay.per_pos]):
                lp = {**lab, "position": str(pos)}
                add(fam, "_total", lp, value)
                add(fam, "_created", lp, created)
    return generate_latest(_Families([fams[n] for n in order if n in fams]))
