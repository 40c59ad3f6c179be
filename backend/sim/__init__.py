"""A simulated vLLM fleet: /metrics exactly as vLLM V1 exposes it, for pools of spec-decode and baseline
servers, driven by YAML scenarios, deterministic for a seed, with a /truth endpoint for tests.

Self-contained on purpose: it imports only the stdlib, numpy, yaml, typer and prometheus_client.
"""

from backend.sim.scenario import builtin_names, load_scenario
from backend.sim.scenario_model import Scenario, ScenarioError

__all__ = ["Scenario", "ScenarioError", "builtin_names", "load_scenario"]
