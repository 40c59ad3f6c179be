"""The inference engines specwatch reads, one adapter (a table) per engine, behind the one collection path.

An engine is a table: the metric names it exposes for each record field (a counter, a per-position counter,
a histogram, a gauge), the label naming the model (None: the engine has none, the scrape target's configured
`model_name` label names it), and its gauges that only an estimate can be made from. The direct-scrape parser
and assembler (backend.scrape) and the Prometheus queries and assembler (backend.prom) read every engine
through backend.domain.families, built from these tables; nothing else names an engine's metrics.

- vLLM (backend.domain.engines.vllm): every spec-decode figure is an exact counter.
- llama.cpp llama-server (backend.domain.engines.llamacpp): exact counters for draft and accepted tokens;
  drafts (verify steps) and the per-position counter only in the builds that expose them, else NULL.
- SGLang (backend.domain.engines.sglang): no spec-decode counter at all; its accept-length and accept-rate
  gauges give an *estimate*, weighted as backend.domain.engines.estimate states, stored apart from the exact
  counts (the `est_*` fields) and never added to them.

Exact or estimated: `FIGURES` says, per figure the API shows, whether it is exact and on what basis an
estimate rests; `figure_basis` answers it for a pool's engine. Pure data: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.engines.estimate import ESTIMATE_BASIS
from backend.domain.engines.llamacpp import LLAMACPP
from backend.domain.engines.sglang import SGLANG
from backend.domain.engines.table import Engine
from backend.domain.engines.vllm import VLLM

ENGINE_NAMES = ("vllm", "llamacpp", "sglang")
DEFAULT_ENGINE = "vllm"


def engines() -> dict[str, Engine]:
    """Every engine by name."""
    return {e.name: e for e in (VLLM, LLAMACPP, SGLANG)}


def engine(name: str) -> Engine:
    """The engine of that name; ValueError naming the known ones otherwise."""
    found = engines().get(name)
    if found is None:
        raise ValueError(f"unknown engine {name!r}: one of {', '.join(ENGINE_NAMES)}")
    return found


def engine_of_metric(metric: str) -> str | None:
    """The engine a metric name belongs to, by its prefix (`vllm:`, `llamacpp:`, `sglang:`); None: none."""
    for e in engines().values():
        if metric.startswith(e.prefix):
            return e.name
    return None


def detect(metric_names) -> set[str]:
    """The engines whose metrics appear among `metric_names` (an exposition's kept series names)."""
    return {e for e in (engine_of_metric(n) for n in metric_names) if e is not None}


# --- exact or estimated ----------------------------------------------------------------------------------

FIGURES = ("acceptance_rate", "accept_length", "drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos")
EXACT_BASIS = "engine counters: exact increases between consecutive samples"
NOT_EXPOSED = "not exposed by the engine"


@dataclass(frozen=True)
class Basis:
    """Whether a figure is exact, and what it rests on (`estimate_basis`: None for an exact figure)."""

    exact: bool
    estimate_basis: str | None = None
    source: str = EXACT_BASIS
    note: str | None = None  # e.g. a build of the engine that lacks the counter (then the figure is empty)


def figure_basis(engine_name: str, figure: str) -> Basis | None:
    """How a pool of `engine_name` gets `figure` (acceptance_rate, accept_length, drafts, draft_tokens,
    accepted_tokens, accepted_per_pos): exact from counters, estimated from gauges (with the weighting), or
    None where the engine does not expose it at all."""
    e = engine(engine_name)
    if e.name == "sglang":
        if figure in ("acceptance_rate", "accept_length", "draft_tokens", "accepted_tokens"):
            return Basis(False, ESTIMATE_BASIS, "engine gauges sglang:spec_accept_length / sglang:spec_accept_rate")
        return None
    needs = {"acceptance_rate": ("draft_tokens", "accepted_tokens"),
             "accept_length": ("drafts", "accepted_tokens")}.get(figure, (figure,))
    if all(e.reading(f) is not None for f in needs):
        gaps = dict(e.not_exposed)
        notes = [gaps[f] for f in needs if f in gaps]
        return Basis(True, note="; ".join(notes) or None)
    return None
