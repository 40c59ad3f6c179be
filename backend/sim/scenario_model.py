"""The fleet simulator's scenario as data: the pools (their acceptance, load and step-time physics), the
events and phases over simulated time. Built by backend.sim.scenario from a YAML mapping."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any

MAX_K = 16


class ScenarioError(ValueError):
    """A scenario file or mapping is invalid. The message names the field and the problem."""


@dataclass(frozen=True)
class Profile:
    """A value over simulated time: constant, or piecewise over points (optionally periodic)."""

    points: tuple[tuple[float, float], ...]
    interp: str = "linear"
    period: float | None = None

    @classmethod
    def constant(cls, value: float) -> Profile:
        return cls(points=((0.0, float(value)),), interp="step")

    def value(self, t: float) -> float:
        pts = self.points
        if self.period:
            t = t % self.period
        if t <= pts[0][0] or len(pts) == 1:
            return pts[0][1]
        if t >= pts[-1][0]:
            return pts[-1][1]
        for (t0, v0), (t1, v1) in itertools.pairwise(pts):
            if t0 <= t < t1:
                if self.interp == "step":
                    return v0
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0)
        return pts[-1][1]  # pragma: no cover

    def maximum(self) -> float:
        return max(v for _, v in self.points)


@dataclass(frozen=True)
class Acceptance:
    """Conditional acceptance p_i per draft position, plus load and context effects."""

    p: tuple[float, ...]
    conc_above: int | None = None
    conc_slope: float = 0.0
    conc_min_scale: float = 0.0
    conc_swing: float = 0.0
    conc_swing_seconds: float = 60.0
    drafter_max_len: int | None = None
    beyond_max_len_a: float = 0.0
    no_draft_prob: float = 0.0

    def conditional(self, running: float, t: float = 0.0) -> tuple[float, ...]:
        """p_i at `running` requests per engine at simulated time `t` (after the concurrency effect)."""
        if self.conc_above is None or running <= self.conc_above:
            return self.p
        scale = max(self.conc_min_scale, 1.0 - self.conc_slope * (running - self.conc_above))
        if self.conc_swing:  # the same draw for every pool and class within one swing period
            scale *= 1.0 - self.conc_swing * random.Random(int(t // self.conc_swing_seconds)).random()
        return tuple(min(1.0, max(0.0, x * scale)) for x in self.p)


@dataclass(frozen=True)
class RequestClass:
    name: str
    share: float
    acceptance: Acceptance
    prompt_len: tuple[float, float, int] | None = None  # (mean, sigma, max) of a lognormal; None: the pool's
    drift_from: int | None = None  # context_drift: prompts longer than this draft worse...
    drift_per_doubling: float = 0.0  # ...p_i scaled by 1 - this per doubling of the prompt beyond drift_from


@dataclass(frozen=True)
class PerRequest:
    classes: tuple[RequestClass, ...]
    report_share: float = 1.0
    report_running: bool = False


class Params(dict):
    """One group of a pool's numbers, its keys checked against the scenario schema, read as attributes
    (``spec.jitter.sigma``)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> float:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True)
class PoolSpec:
    id: str
    model: str
    traffic_class: str
    spec_mode: str
    k: int  # 0 for a baseline ("off") pool
    engines: int
    labels: dict[str, str]
    acceptance: Acceptance | None
    concurrency: Profile
    waiting: Profile
    # the scenario's groups of numbers as it names them: step_time (base, per_seq), overhead (eps0, slope),
    # jitter (sigma, stall_prob, stall_factor), output_len and prompt_len (mean, sigma, max), ttft (base,
    # per_prompt_token, sigma, queue_mean), finish (abort, error, repetition)
    step_time: Params
    overhead: Params
    jitter: Params
    output_len: Params
    prompt_len: Params
    ttft: Params
    finish: Params
    kv_capacity_tokens: int
    preemptions_per_s: float
    engine: str = "vllm"  # whose /metrics the pool speaks (vllm, llamacpp, sglang), and in which names
    llamacpp_names: str = "current"
    per_request: PerRequest | None = None
    drafter: str | None = None
    vllm_version: str | None = None

    @property
    def spec(self) -> bool:
        return self.spec_mode != "off"

    @property
    def instance(self) -> str:
        """The pool's server as a replica: its `instance` label, else its id. The fleet /metrics carries it
        and the demo's per-pool scrape targets name it, so seeded history and live collection agree."""
        return self.labels.get("instance", self.id)


@dataclass(frozen=True)
class Event:
    """What happens to `pool_ids` when: at fixed times, or `every` seconds from `start` until `until`. What
    it changes in how they run (acceptance, concurrency, a restart), then what it names (a phase, a drafter
    or vLLM version from then on)."""

    pool_ids: tuple[str, ...]
    at: tuple[float, ...] = ()
    every: float | None = None
    start: float = 0.0
    until: float | None = None
    acceptance: Acceptance | None = None
    concurrency: Profile | None = None
    restart: bool = False
    phase: str | None = None
    drafter: str | None = None
    vllm_version: str | None = None


@dataclass(frozen=True)
class Phase:
    name: str
    start: float


@dataclass
class Scenario:
    name: str
    description: str
    tick: float
    history_seconds: float
    pools: list[PoolSpec]
    events: list[Event]
    phases: list[Phase]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    config_labels: bool = False  # the fleet /metrics carries drafter / vllm_version labels

    def pool(self, pool_id: str) -> PoolSpec:
        for p in self.pools:
            if p.id == pool_id:
                return p
        raise KeyError(pool_id)

    def drafter_at(self, pool_id: str, t: float) -> str | None:
        """The drafter a pool runs at simulated time t: its own, or the last drafter change at or before t."""
        return self._config_at(pool_id, t, "drafter")

    def vllm_version_at(self, pool_id: str, t: float) -> str | None:
        """The vLLM version a pool runs at simulated time t: its own, or the last upgrade at or before t."""
        return self._config_at(pool_id, t, "vllm_version")

    def _config_at(self, pool_id: str, t: float, name: str) -> str | None:
        value, last = getattr(self.pool(pool_id), name), -1.0
        for ev in self.events:
            if getattr(ev, name) is not None and pool_id in ev.pool_ids:
                for at in ev.at:
                    if last <= at <= t:
                        value, last = getattr(ev, name), at
        return value

    def phase_at(self, t: float) -> str | None:
        name = None
        for ph in sorted(self.phases, key=lambda p: p.start):
            if ph.start <= t:
                name = ph.name
        return name
