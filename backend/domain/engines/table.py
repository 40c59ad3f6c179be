"""What an engine is, as a table (the types every engine's module fills in)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "per_pos", "histogram", "gauge", "estimate"]


@dataclass(frozen=True)
class Reading:
    """One figure an engine exposes: the record field it fills, its kind, and its names (current first, then
    older names read where a series has no current one)."""

    field: str
    kind: Kind
    names: tuple[str, ...]
    what: str = ""


@dataclass(frozen=True)
class Engine:
    name: str  # as stored in pools.engine: vllm | llamacpp | sglang
    label: str  # as shown
    prefix: str  # every metric name of the engine starts with it
    readings: tuple[Reading, ...]
    model_label: str | None = "model_name"  # the series label naming the model; None: the target's labels
    not_exposed: tuple[tuple[str, str], ...] = ()  # (record field, why it stays NULL where a build lacks it)
    # what one ITL observation is: "step" (one per engine step of a request, a speculative step's tokens as
    # one chunk: a step time), "token" (one per token: a step time divided by its tokens), None (no ITL)
    itl_per: Literal["step", "token"] | None = "step"

    def reading(self, field: str) -> Reading | None:
        return next((r for r in self.readings if r.field == field), None)

    @property
    def restart_series(self) -> str | None:
        """The counter whose resets are the pool's restarts (its output-token counter)."""
        r = self.reading("generation_tokens")
        return r.names[0] if r else None
