"""Write the per-release-line exposition fixtures, tests/fixtures/vllm-<version>-*.prom.

Each is what a vLLM server of that release writes on /metrics for the series specwatch reads, made the way
vLLM makes it: prometheus_client metrics registered with the names, HELP texts, label names and buckets of
that release's `vllm/v1/metrics/loggers.py` and `vllm/v1/spec_decode/metrics.py` (the V0 one from
`vllm/engine/metrics.py`), the same observations recorded in each. Only the `_created` values are fixed (to
FIXED_CREATED) so the files do not change from one run to the next. Families specwatch does not read are left
out; the real 0.32.0 exposition (tests/fixtures/vllm-0.32.0-cpu.prom) has them all.

    python -m tests.support.make_vllm_fixtures
"""

from __future__ import annotations

import re
from pathlib import Path

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FIXED_CREATED = 1.7e9
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
K = 3

ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
               80.0]
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0]

# One run's worth of counts, the same in every file: 10 finished requests, 100 drafts of K = 3 tokens.
DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS = 100, 300, 150, (70, 50, 30)
ITL = [0.02] * 60 + [0.06] * 40 + [0.3] * 4  # one per engine step: the drafts plus 4 steps without a draft
TPOT = [0.012] * 6 + [0.03] * 4  # one per finished request
TTFT = [0.05] * 10
GENERATION = 10 + DRAFTS + ACCEPTED + 4  # first tokens + one per step + accepted drafts
PROMPT = 1000
FINISHED = {"stop": 9, "length": 1, "abort": 0}
RUNNING = 2

# Per release line: (file, the ITL histogram names, whether TPOT exists, the HELP text of the older ITL name)
_OLD_HELP = "Histogram of time per output token in seconds."
_DEPRECATED_HELP = _OLD_HELP + "DEPRECATED: Use vllm:inter_token_latency_seconds instead."
_BOTH = ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds")
V1_LINES = {
    "0.10.1.1": ("vllm-0.10.1-spec.prom", ("vllm:time_per_output_token_seconds",), False, _OLD_HELP),
    "0.10.2": ("vllm-0.10.2-spec.prom", _BOTH, False, _DEPRECATED_HELP),
    "0.11.0": ("vllm-0.11.0-spec.prom", _BOTH, True, _DEPRECATED_HELP),
    # 0.12 with --show-hidden-metrics-for-version=0.11: the older name comes back beside the current one
    "0.12.0": ("vllm-0.12.0-hidden-spec.prom", _BOTH, True, _DEPRECATED_HELP),
}


def _v1(itl_names: tuple[str, ...], tpot: bool, old_help: str) -> str:
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    lv = [MODEL, "0"]
    drafts = Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", labels, registry=reg)
    tokens = Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", labels, registry=reg)
    accepted = Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", labels, registry=reg)
    per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos", "Accepted tokens per draft position.",
                      labels + ["position"], registry=reg)
    running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels,
                    registry=reg)
    preemptions = Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", labels,
                          registry=reg)
    prompt = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=reg)
    generation = Counter("vllm:generation_tokens", "Number of generation tokens processed.", labels, registry=reg)
    success = Counter("vllm:request_success", "Count of successfully processed requests.",
                      labels + ["finished_reason"], registry=reg)
    ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
                     buckets=TTFT_BUCKETS, registry=reg)
    helps = {"vllm:time_per_output_token_seconds": old_help,
             "vllm:inter_token_latency_seconds": "Histogram of inter-token latency in seconds."}
    itls = [Histogram(n, helps[n], labels, buckets=ITL_BUCKETS, registry=reg) for n in itl_names]
    tpot_h = (Histogram("vllm:request_time_per_output_token_seconds",
                        "Histogram of time_per_output_token_seconds per request.", labels, buckets=ITL_BUCKETS,
                        registry=reg) if tpot else None)

    drafts.labels(*lv).inc(DRAFTS)
    tokens.labels(*lv).inc(DRAFT_TOKENS)
    accepted.labels(*lv).inc(ACCEPTED)
    for pos, n in enumerate(PER_POS):
        per_pos.labels(*lv, str(pos)).inc(n)
    running.labels(*lv).set(RUNNING)
    preemptions.labels(*lv).inc(0)
    prompt.labels(*lv).inc(PROMPT)
    generation.labels(*lv).inc(GENERATION)
    for reason, n in FINISHED.items():
        success.labels(*lv, reason).inc(n)
    for v in TTFT:
        ttft.labels(*lv).observe(v)
    for v in ITL:  # vLLM observes each ITL sample in every ITL histogram it has
        for h in itls:
            h.labels(*lv).observe(v)
    if tpot_h is not None:
        for v in TPOT:
            tpot_h.labels(*lv).observe(v)
    return generate_latest(reg).decode()


def _v0() -> str:
    """The V0 engine with speculative decoding (vllm/engine/metrics.py): label model_name only, no `_created`
    (it calls disable_created_metrics), the acceptance gauges and three spec-decode counters."""
    prometheus_client.disable_created_metrics()
    try:
        reg = CollectorRegistry()
        labels = ["model_name"]
        Gauge("vllm:num_requests_running", "Number of requests currently running on GPU.", labels,
              registry=reg).labels(MODEL).set(RUNNING)
        Counter("vllm:generation_tokens_total", "Number of generation tokens processed.", labels,
                registry=reg).labels(MODEL).inc(GENERATION)
        Gauge("vllm:spec_decode_draft_acceptance_rate", "Speulative token acceptance rate.", labels,
              registry=reg).labels(MODEL).set(ACCEPTED / DRAFT_TOKENS)
        Gauge("vllm:spec_decode_efficiency", "Speculative decoding system efficiency.", labels,
              registry=reg).labels(MODEL).set(0.6)
        for name, doc, v in (("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", ACCEPTED),
                             ("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", DRAFT_TOKENS),
                             ("vllm:spec_decode_num_emitted_tokens_total", "Number of emitted tokens.", 250)):
            Counter(name, doc, labels, registry=reg).labels(MODEL).inc(v)
        return generate_latest(reg).decode()
    finally:
        prometheus_client.enable_created_metrics()


def _fixed(text: str) -> str:
    return re.sub(r"(?m)^(\S+_created\{[^}]*\}) \S+$", lambda m: f"{m.group(1)} {FIXED_CREATED:.1f}", text)


SAMPLE_LINE = re.compile(r"(?m)^(?!#)(\S+?)(\{[^}]*\})? (\S+)$")


def served(file: str, model: str, k: int) -> str:
    """A fixture as its target serves it at its k-th scrape: every sample but `_created` k times its value (a
    steady run, no restart), the model renamed. Its counters keep their ratios at every sample."""
    def one(m: re.Match) -> str:
        value = m.group(3) if m.group(1).endswith("_created") else repr(float(m.group(3)) * k)
        return f"{m.group(1)}{m.group(2) or ''} {value}"
    return SAMPLE_LINE.sub(one, (FIXTURES / file).read_text()).replace(MODEL, model)


def main() -> None:
    for version, (file, itl_names, tpot, old_help) in V1_LINES.items():
        head = (f"# vLLM {version} (V1 engine), --speculative-config K={K}, one engine: the series specwatch reads,\n"
                f"# written as that release's loggers write them (tests/support/make_vllm_fixtures.py).\n")
        (FIXTURES / file).write_text(head + _fixed(_v1(itl_names, tpot, old_help)))
    (FIXTURES / "vllm-0.10.1-v0-spec.prom").write_text(
        "# vLLM 0.10.1 V0 engine (VLLM_USE_V1=0) with a draft model: specwatch refuses it.\n"
        "# Written as vllm/engine/metrics.py writes it (tests/support/make_vllm_fixtures.py).\n" + _v0())


if __name__ == "__main__":
    main()
