"""Render the simulated fleet as vLLM V1, llama.cpp's llama-server and SGLang do: Prometheus text format 0.0.4.

Families, HELP texts, label names, bucket bounds and the ``_created`` gauge families follow vLLM 0.33
with one API server (prometheus_client's default registry), see shared/reference/vllm-metrics.md and
shared/fixtures/vllm_metrics_sample.prom. The text itself is written by prometheus_client's own
``generate_latest`` (sorted labels, ``22.0`` / ``1.25e+06`` floats, ``_created`` split into gauge families).

The fleet view adds ``traffic_class``, ``spec_mode`` and any extra pool labels to every series, as
Prometheus target relabeling would; the single-pool view (``/pools/<id>/metrics``) does not.

A pool's `engine` picks its exposition (render_llamacpp, render_sglang below, after the engines' sources):

- llamacpp: llama-server's ``--metrics`` text, written by hand as llama-server does (``llamacpp:`` prefix, no
  labels, no ``_created``), as a current build writes it (LLAMACPP_METRICS): the token and time counters,
  n_decode_total, the spec_decode_num_draft_tokens / _accepted_tokens / _drafts counters and the per-position
  spec_decode_num_accepted_tokens_per_pos{position}, the throughput, requests and busy-slot gauges. A pool
  with ``llamacpp_names: old`` shows an older build: n_drafted_total and n_drafted_accepted_total only (no
  verify steps, no per-position counter). The fleet view adds model_name and the target labels.
- sglang: SGLang's prometheus_client metrics (multiprocess mode: no ``_created``), label model_name
  (scheduler gauges also engine_type, tp_rank, pp_rank): counters sglang:prompt_tokens_total,
  sglang:generation_tokens_total, sglang:num_requests_total, histogram sglang:inter_token_latency_seconds
  (SGLang's buckets, one observation per token of interval / tokens), gauges sglang:num_running_reqs,
  sglang:num_queue_reqs, sglang:token_usage, and for spec pools sglang:spec_accept_length and
  sglang:spec_accept_rate, set once per logging interval (fleet_state.SGLANG_LOG_STEPS decode steps). No draft or
  accepted token counters: SGLang exposes only those two gauges.
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

from backend.sim.fleet_state import FINISH_REASONS, HISTOGRAMS, SGLANG_ITL_BOUNDS, Pool, PoolState

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
    configs[i] (fleet view only) pool i's drafter / vllm_version labels in force (vLLM pools). Each pool is
    shown as its engine shows it (vLLM, llama.cpp, SGLang); the fleet view puts them one after another."""
    parts = []
    for engine, fn in (("vllm", render_vllm), ("sglang", render_sglang), ("llamacpp", render_llamacpp)):
        idx = [i for i, p in enumerate(pools) if p.spec.engine == engine]
        if idx:
            extra = {"configs": [configs[i] for i in idx] if configs is not None else None} if engine == "vllm" else {}
            parts.append(fn([pools[i] for i in idx], [states[i] for i in idx], created_wall=[created_wall[i] for i in idx],
                            with_target_labels=with_target_labels, **extra))
    return b"".join(parts)


def render_vllm(pools: Sequence[Pool], states: Sequence[PoolState], *, created_wall: Sequence[float],
                with_target_labels: bool = True, configs: Sequence[dict[str, str | None]] | None = None) -> bytes:
    """vLLM pools, as vLLM V1's /metrics."""
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


# ---------------------------------------------------------------------------------------------- SGLang

SGLANG_HELP = {
    "sglang:prompt_tokens": "Number of prefill tokens processed.",
    "sglang:generation_tokens": "Number of generation tokens processed.",
    "sglang:num_requests": "Number of requests processed.",
    "sglang:inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "sglang:num_running_reqs": "The number of running requests.",
    "sglang:num_queue_reqs": "The number of requests in the waiting queue.",
    "sglang:token_usage": "The token usage.",
    "sglang:spec_accept_length": "The average acceptance length of speculative decoding.",
    "sglang:spec_accept_rate": "The average acceptance rate of speculative decoding (`accepted tokens / total draft "
                               "tokens` in batch).",
}
_SG_LE = [floatToGoString(b) for b in SGLANG_ITL_BOUNDS] + ["+Inf"]


def _target_labels(pool: Pool, with_target_labels: bool, base: dict[str, str]) -> dict[str, str]:
    labels = dict(base)
    if with_target_labels:
        labels.update(traffic_class=pool.spec.traffic_class, spec_mode=pool.spec.spec_mode, **pool.spec.labels)
        labels.setdefault("instance", pool.spec.instance)
    return labels


def _kv(pool: Pool, eng) -> tuple[float, float]:
    tokens = float((eng.prompt[eng.occ] + eng.gen[eng.occ]).sum())
    return tokens, min(1.0, tokens / pool.spec.kv_capacity_tokens)


def render_sglang(pools: Sequence[Pool], states: Sequence[PoolState], *, created_wall: Sequence[float],
                  with_target_labels: bool = True) -> bytes:
    """SGLang pools, as SGLang's /metrics (--enable-metrics). The spec gauges only for spec pools."""
    fams: dict[str, Metric] = {}
    counters = ("sglang:prompt_tokens", "sglang:generation_tokens", "sglang:num_requests")
    gauges = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage")
    spec_gauges = ("sglang:spec_accept_length", "sglang:spec_accept_rate")
    for name in counters:
        fams[name] = CounterMetricFamily(name, SGLANG_HELP[name], labels=())
    fams["sglang:inter_token_latency_seconds"] = HistogramMetricFamily(
        "sglang:inter_token_latency_seconds", SGLANG_HELP["sglang:inter_token_latency_seconds"], labels=())
    for name in gauges + (spec_gauges if any(p.spec.spec for p in pools) else ()):
        fams[name] = GaugeMetricFamily(name, SGLANG_HELP[name], labels=())

    def add(name: str, suffix: str, labels: dict[str, str], value: float) -> None:
        fams[name].samples.append(Sample(name + suffix, labels, float(value)))

    for pool, st in zip(pools, states):
        lay, eng = pool.layout, st.engines[0]
        c = eng.c
        lab = _target_labels(pool, with_target_labels, {"model_name": pool.spec.model})
        sched = {**lab, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}
        add("sglang:prompt_tokens", "_total", lab, c[lay.prompt])
        add("sglang:generation_tokens", "_total", lab, c[lay.generation])
        add("sglang:num_requests", "_total", lab, c[lay.success].sum())
        sl, sum_idx = lay.hist["itl_sglang"]
        cum = np.cumsum(c[sl])
        for le, value in zip(_SG_LE, cum):
            add("sglang:inter_token_latency_seconds", "_bucket", {**lab, "le": le}, value)
        add("sglang:inter_token_latency_seconds", "_count", lab, cum[-1])
        add("sglang:inter_token_latency_seconds", "_sum", lab, c[sum_idx])
        add("sglang:num_running_reqs", "", sched, int(eng.occ.sum()))
        add("sglang:num_queue_reqs", "", sched, eng.waiting)
        add("sglang:token_usage", "", sched, _kv(pool, eng)[1])
        if pool.spec.spec:
            add("sglang:spec_accept_length", "", sched, eng.sg_gauges[0])
            add("sglang:spec_accept_rate", "", sched, eng.sg_gauges[1])
    order = [*counters, "sglang:inter_token_latency_seconds", *gauges, *spec_gauges]
    return generate_latest(_Families([fams[n] for n in order if n in fams]))


# ---------------------------------------------------------------------------------------------- llama.cpp

# (name, type, help) as a current llama-server writes them (tools/server/server-task.cpp,
# server_task_result_metrics::to_metrics); the spec_decode_* counters only when the server drafts
LLAMACPP_METRICS = (
    ("prompt_tokens_total", "counter", "Number of prompt tokens processed, excluding cached tokens"),
    ("prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache"),
    ("prompt_seconds_total", "counter", "Total time spent processing prompts"),
    ("tokens_predicted_total", "counter", "Number of generation tokens processed"),
    ("tokens_predicted_seconds_total", "counter", "Total time spent generating tokens"),
    ("n_decode_total", "counter",
     "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding"),
    ("spec_decode_num_draft_tokens_total", "counter", "Speculative: Total draft tokens generated"),
    ("spec_decode_num_accepted_tokens_total", "counter", "Speculative: Total draft tokens accepted by the target model"),
    ("spec_decode_num_drafts_total", "counter", "Speculative: Total speculative decoding verification steps"),
    ("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s"),
    ("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s"),
    ("requests_processing", "gauge", "Number of requests processing"),
    ("requests_deferred", "gauge", "Number of requests deferred"),
    ("n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call"),
    ("spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position"),
)
# the names of the builds before spec_decode_* (and of forks): draft and accepted tokens only
LLAMACPP_OLD_NAMES = {"spec_decode_num_draft_tokens_total": "n_drafted_total",
                      "spec_decode_num_accepted_tokens_total": "n_drafted_accepted_total"}


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _label_text(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    esc = {k: v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"') for k, v in sorted(labels.items())}
    return "{" + ",".join(f'{k}="{v}"' for k, v in esc.items()) + "}"


def llamacpp_values(pool: Pool, st: PoolState) -> dict[str, float | list[float]]:
    """The llama-server metrics of one pool (its one server) from the simulated counters. The pool's
    `llamacpp_names: old` shows a build before the spec_decode_* names: n_drafted_total and
    n_drafted_accepted_total only, no verify steps and no per-position counter."""
    lay, eng = pool.layout, st.engines[0]
    c = eng.c
    ttft_sum = c[lay.hist["ttft"][1]]
    decode_s = max(0.0, c[lay.hist["e2e"][1]] - ttft_sum)  # per-slot generation time of the finished requests
    steps = c[lay.decode_steps]
    busy = c[lay.hist["itl"][0]].sum()  # decode cells: busy slots summed over steps
    out: dict[str, float | list[float]] = {
        "prompt_tokens_total": c[lay.prompt], "prompt_tokens_cached_total": 0.0, "prompt_seconds_total": ttft_sum,
        "tokens_predicted_total": c[lay.generation], "tokens_predicted_seconds_total": decode_s,
        "n_decode_total": steps,
        "prompt_tokens_seconds": c[lay.prompt] / ttft_sum if ttft_sum else 0.0,
        "predicted_tokens_seconds": c[lay.generation] / decode_s if decode_s else 0.0,
        "requests_processing": float(eng.occ.sum()), "requests_deferred": eng.waiting,
        "n_busy_slots_per_decode": busy / max(steps, 1.0)}
    if pool.spec.spec:
        if pool.spec.llamacpp_names == "old":
            out["n_drafted_total"] = c[lay.draft_tokens]
            out["n_drafted_accepted_total"] = c[lay.accepted]
        else:
            out["spec_decode_num_draft_tokens_total"] = c[lay.draft_tokens]
            out["spec_decode_num_accepted_tokens_total"] = c[lay.accepted]
            out["spec_decode_num_drafts_total"] = c[lay.drafts]
            if c[lay.accepted] > 0:  # written once a draft was accepted
                out["spec_decode_num_accepted_tokens_per_pos_total"] = [float(x) for x in c[lay.per_pos]]
    return out


def render_llamacpp(pools: Sequence[Pool], states: Sequence[PoolState], *, created_wall: Sequence[float],
                    with_target_labels: bool = True) -> bytes:
    """llama.cpp pools, as llama-server's /metrics (--metrics): hand-written text, as the server writes it."""
    kinds = {name: (kind, help_) for name, kind, help_ in LLAMACPP_METRICS}
    for new, old in LLAMACPP_OLD_NAMES.items():
        kinds[old] = kinds[new]
    samples: dict[str, list[str]] = {name: [] for name in kinds}
    for pool, st in zip(pools, states):
        lab = _target_labels(pool, with_target_labels, {"model_name": pool.spec.model} if with_target_labels else {})
        for name, value in llamacpp_values(pool, st).items():
            if isinstance(value, list):
                samples[name] += [f"llamacpp:{name}{_label_text({**lab, 'position': str(i)})} {_num(v)}"
                                  for i, v in enumerate(value)]
            else:
                samples[name].append(f"llamacpp:{name}{_label_text(lab)} {_num(value)}")
    lines = []
    for name, (kind, help_) in kinds.items():
        if samples[name]:
            lines += [f"# HELP llamacpp:{name} {help_}", f"# TYPE llamacpp:{name} {kind}", *samples[name]]
    return ("\n".join(lines) + "\n").encode() if lines else b""
