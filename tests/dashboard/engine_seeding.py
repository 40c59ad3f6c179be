"""A fleet of three engines for the dashboard, alert and report tests: vLLM pools (seeding.seed_demo) and
llama.cpp and SGLang pools collected through the real direct scrape from the exposition fixtures
(tests/fixtures/llamacpp-spec.prom, sglang-spec.prom).

- `qwen-7b`: SGLang `chat` (estimate only: τ = 2, r = 0.5 over every interval, so α̂ = 0.5, τ̂ = 2.0) beside
  a vLLM `code` pool of the same spec mode: the model's `mixed` row sums the vLLM counts only.
- `llama-1b`: llama.cpp `chat` (exact counters: α = 1000 / 1600 = 0.625, τ = 1 + 1000 / 400 = 3.5; no
  latency histogram).
- `llama-3.1-8b`: vLLM `chat` only."""

from __future__ import annotations

from backend.config import Settings
from tests.collect.test_scrape_hardening import WIDTH, cycle
from tests.dashboard import seeding
from tests.dashboard.seeding import PoolSpec
from tests.support.engine_expositions import exposition
from tests.support.hostile import ExpositionServer

SGLANG_MODEL, LLAMA_MODEL, VLLM_MODEL = "qwen-7b", "llama-1b", "llama-3.1-8b"
MODE = "eagle3"
SCRAPES = 4
SGLANG_ALPHA, SGLANG_TAU = 0.5, 2.0
LLAMA_ALPHA, LLAMA_TAU = 1000 / 1600, 1 + 1000 / 400
VLLM_FLEET = (PoolSpec(SGLANG_MODEL, "code", k=4, p0=0.8, running=10),
              PoolSpec(VLLM_MODEL, "chat", k=3, p0=0.75, running=8))


def _sglang(n: int) -> str:
    return exposition("sglang-spec.prom", scale=n + 1, values={"sglang:spec_accept_length": SGLANG_TAU,
                                                               "sglang:spec_accept_rate": SGLANG_ALPHA})


def seed_engines(url: str, *, hours: float = 1.0) -> None:
    """vLLM buckets for the last `hours`, then SCRAPES scrapes of a llama.cpp and an SGLang target now."""
    seeding.seed_demo(url, hours=hours, fleet=VLLM_FLEET)
    with ExpositionServer() as srv:
        llama = srv.route("/llama", lambda n: exposition("llamacpp-spec.prom", scale=n + 1))
        sgl = srv.route("/sglang", _sglang)
        labels = {"traffic_class": "chat", "spec_mode": MODE}
        targets = [{"url": llama, "labels": {**labels, "model_name": LLAMA_MODEL}},
                   {"url": sgl, "labels": labels, "engine": "sglang"}]
        s = Settings(_env_file=None, database_url=url, source="scrape", bucket_seconds=WIDTH, settle_seconds=0,
                     scrape_interval_seconds=1, initial_lookback_seconds=600, scrape_targets=targets)
        cycle(url, s, scrapes=SCRAPES)
