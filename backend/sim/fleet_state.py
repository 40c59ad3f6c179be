"""The simulation's state: the counter layout of one engine (one float64 vector: spec counters, token and
request counters, histograms), each engine's running requests, each pool's state and its scheduled changes,
the histogram bounds vLLM (and SGLang) use, and the views the server reads the counters through."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from backend.sim.scenario_model import Acceptance, PoolSpec, Profile, RequestClass, Scenario

TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
              40.0, 80.0)
TPOT_BOUNDS = ITL_BOUNDS
E2E_BOUNDS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
              480.0, 960.0, 1920.0, 7680.0)
HISTOGRAMS = {"ttft": TTFT_BOUNDS, "itl": ITL_BOUNDS, "tpot": TPOT_BOUNDS, "e2e": E2E_BOUNDS}
# SGLang's default sglang:inter_token_latency_seconds buckets (python/sglang/srt/metrics/collector.py); SGLang
# observes each output chunk's interval / tokens once per token (a step that emits 1 + j tokens: 1 + j values)
SGLANG_ITL_BOUNDS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
                     0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
SGLANG_LOG_STEPS = 40  # SGLang's --decode-log-interval: its spec gauges are set once per this many decode steps
FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
R_STOP, R_LENGTH, R_ABORT, R_ERROR, R_REPETITION = range(5)

_ITL_B = np.asarray(ITL_BOUNDS)
_BOUNDS_NP = {name: np.asarray(b) for name, b in {**HISTOGRAMS, "itl_sglang": SGLANG_ITL_BOUNDS}.items()}


class Layout:
    """Offsets of the counters inside an engine's float64 vector. Histogram buckets are stored
    per bucket (not cumulative); the last bucket is +Inf."""

    def __init__(self, k: int, engine: str = "vllm"):
        self.k = k
        off = 0

        def take(n: int) -> slice:
            nonlocal off
            s = slice(off, off + n)
            off += n
            return s

        self.drafts = take(1).start
        self.draft_tokens = take(1).start
        self.accepted = take(1).start
        self.per_pos = take(k)
        self.generation = take(1).start
        self.prompt = take(1).start
        self.preemptions = take(1).start
        self.success = take(len(FINISH_REASONS))
        self.hist: dict[str, tuple[slice, int]] = {}
        for name, bounds in HISTOGRAMS.items():
            b = take(len(bounds) + 1)
            self.hist[name] = (b, take(1).start)
        self.decode_steps = take(1).start  # engine steps (llama.cpp's n_decode_total)
        if engine == "sglang":
            b = take(len(SGLANG_ITL_BOUNDS) + 1)
            self.hist["itl_sglang"] = (b, take(1).start)
        self.size = off


@dataclass
class EngineState:
    """One engine of one pool: request slots, step phase, gauges and counters."""

    occ: np.ndarray       # bool: slot holds a request
    p: np.ndarray         # int: prefill step of the occupant in this tick (-1 = decoding already)
    rem: np.ndarray       # int: decode tokens still to produce
    olen: np.ndarray      # int: sampled output length
    reason: np.ndarray    # int: finish reason code
    prompt: np.ndarray    # int: prompt length
    gen: np.ndarray       # int: tokens produced so far (incl. first)
    ttft: np.ndarray      # float: sampled TTFT
    dec: np.ndarray       # float: decode time so far
    c: np.ndarray         # counters since the last (re)start
    cum: np.ndarray       # counters since the simulator started (never reset)
    next_end: float | None = None   # end of the in-progress step, relative to the tick start
    cur_dur: float = 0.0            # its duration
    waiting: float = 0.0
    # per-request records (pools with `per_request`): class index, request serial and accepted-length
    # histogram of each slot's occupant, and the next serial
    cls: np.ndarray | None = None
    rid: np.ndarray | None = None
    rhist: np.ndarray | None = None
    next_rid: int = 0
    # SGLang pools: the spec counts of the current logging interval (steps, drafts, draft tokens, accepted) and
    # the gauges as last logged (accept length, accept rate)
    sg_log: np.ndarray | None = None
    sg_gauges: tuple[float, float] = (0.0, 0.0)

    @classmethod
    def empty(cls, slots: int, size: int) -> EngineState:
        z = np.zeros
        return cls(occ=z(slots, bool), p=z(slots, np.int64), rem=z(slots, np.int64), olen=z(slots, np.int64),
                   reason=z(slots, np.int64), prompt=z(slots, np.int64), gen=z(slots, np.int64),
                   ttft=z(slots), dec=z(slots), c=z(size), cum=z(size))

    def reset(self) -> None:
        self.occ[:] = False
        self.c[:] = 0.0
        if self.sg_log is not None:
            self.sg_log[:] = 0.0
            self.sg_gauges = (0.0, 0.0)
        self.next_end = None
        self.cur_dur = 0.0
        self.waiting = 0.0


@dataclass
class PoolState:
    engines: list[EngineState]
    rng: np.random.Generator
    created: float                  # simulated offset of the last (re)start
    restarts: list[float]           # simulated offsets of restarts
    acc: Acceptance | None
    conc: Profile
    req_rng: np.random.Generator | None = None  # per-request class and reporting draws (own stream)


class Pool:
    """Static per-pool data: the spec, the layout, the event timeline (in tick indices)."""

    def __init__(self, index: int, spec: PoolSpec, scenario: Scenario, tick: float):
        self.index = index
        self.spec = spec
        self.layout = Layout(spec.k, spec.engine)
        self.changes: list[tuple[int, int, Acceptance | None, Profile | None]] = []  # (tick, order, acc, conc)
        self.restart_ticks: set[int] = set()
        self.periodic: list[tuple[int, int, int | None]] = []  # (first tick, every ticks, last tick)
        peak = spec.concurrency.maximum()
        for order, ev in enumerate(scenario.events):
            if spec.id not in ev.pool_ids:
                continue
            if ev.every is not None:
                if ev.restart:
                    last = None if ev.until is None else _to_tick(ev.until, tick)
                    self.periodic.append((_to_tick(ev.start, tick), max(1, _to_tick(ev.every, tick)), last))
                continue
            for t in ev.at:
                b = _to_tick(t, tick)
                if ev.restart:
                    self.restart_ticks.add(b)
                if ev.acceptance is not None or ev.concurrency is not None:
                    self.changes.append((b, order, ev.acceptance, ev.concurrency))
            if ev.concurrency is not None:
                peak = max(peak, ev.concurrency.maximum())
        self.changes.sort(key=lambda c: (c[0], c[1]))
        self.slots = max(1, (math.ceil(peak)))

    def restarts_at(self, n: int) -> bool:
        if n in self.restart_ticks:
            return True
        for first, every, last in self.periodic:
            if n >= first and (n - first) % every == 0 and (last is None or n <= last):
                return True
        return False

    def new_state(self, seed: int) -> PoolState:
        engines = [EngineState.empty(self.slots, self.layout.size) for _ in range(self.spec.engines)]
        if self.spec.engine == "sglang":
            for eng in engines:
                eng.sg_log = np.zeros(4)
        req_rng = None
        if self.spec.per_request is not None:
            req_rng = np.random.default_rng([seed, self.index, 29])
            for eng in engines:
                eng.cls = np.zeros(self.slots, np.int64)
                eng.rid = np.zeros(self.slots, np.int64)
                eng.rhist = np.zeros((self.slots, self.spec.k + 1), np.int64)
        return PoolState(engines=engines, rng=np.random.default_rng([seed, self.index]), created=0.0, restarts=[],
                         acc=self.spec.acceptance, conc=self.spec.concurrency, req_rng=req_rng)


def _to_tick(t: float, tick: float) -> int:
    """The first tick boundary at or after simulated time t."""
    return (math.ceil(t / tick - 1e-9))


def accepted_length_probs(p: tuple[float, ...]) -> np.ndarray:
    """P(j) for j = 0..K accepted draft tokens under prefix acceptance with conditional p_i."""
    k = len(p)
    out = np.empty(k + 1)
    surv = 1.0
    for j in range(k):
        out[j] = surv * (1.0 - p[j])
        surv *= p[j]
    out[k] = surv
    return out


def drift_factor(c: RequestClass, prompt: np.ndarray) -> np.ndarray:
    """A class's factor on each conditional p_i for prompts of `prompt` tokens: 1 up to `context_drift.from`,
    then 1 - per_doubling per doubling beyond it, floored at 0 (1 everywhere without context_drift)."""
    prompt = np.asarray(prompt, dtype=float)
    if c.drift_from is None:
        return np.ones_like(prompt)
    doublings = np.log2(np.maximum(prompt, 1.0) / c.drift_from).clip(min=0.0)
    return np.clip(1.0 - c.drift_per_doubling * doublings, 0.0, 1.0)


def hist_add(delta: np.ndarray, lay: Layout, name: str, values: np.ndarray,
              weights: np.ndarray | None = None) -> None:
    sl, sum_idx = lay.hist[name]
    bounds = _BOUNDS_NP[name]
    idx = np.searchsorted(bounds, values, side="left")  # value <= le goes into that bucket
    delta[sl] += np.bincount(idx, weights=weights, minlength=len(bounds) + 1)
    delta[sum_idx] += float(values @ weights) if weights is not None else float(values.sum())


def hist_view(vec: np.ndarray, lay: Layout, name: str) -> dict:
    sl, sum_idx = lay.hist[name]
    cum = np.cumsum(vec[sl])
    return {"bounds": list(HISTOGRAMS[name]) + ["+Inf"], "buckets": [float(x) for x in cum],
            "sum": float(vec[sum_idx]), "count": float(cum[-1])}


def counters_view(vec: np.ndarray, lay: Layout, spec: bool) -> dict:
    out: dict = {}
    if spec:
        out.update(drafts=float(vec[lay.drafts]), draft_tokens=float(vec[lay.draft_tokens]),
                   accepted_tokens=float(vec[lay.accepted]),
                   accepted_per_pos=[float(x) for x in vec[lay.per_pos]])
    else:
        out.update(drafts=None, draft_tokens=None, accepted_tokens=None, accepted_per_pos=None)
    success = vec[lay.success]
    out.update(generation_tokens=float(vec[lay.generation]), prompt_tokens=float(vec[lay.prompt]),
               finished_requests=float(success.sum()),
               finished_by_reason={r: float(x) for r, x in zip(FINISH_REASONS, success)},
               preemptions=float(vec[lay.preemptions]))
    for name in HISTOGRAMS:
        out[name] = hist_view(vec, lay, name)
    return out
