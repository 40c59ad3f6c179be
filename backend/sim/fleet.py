"""The simulation core: a fleet of vLLM pools advanced in fixed ticks of simulated time.

Determinism. Tick n covers simulated time [n*tick, (n+1)*tick). The state at simulated time t is the
state after ticks 0..floor(t/tick)-1, so every value depends only on (seed, scenario, t - start), never
on when or how often anyone looks. Each pool draws from its own ``numpy`` Generator seeded with
``[seed, pool_index]``, so adding a pool does not change the others.

One tick of one engine:

1. Free slots are filled up to the target concurrency R(t) (new requests prefill at the tick's first step).
2. Engine steps: step durations are lognormal around t_base(R) = base + per_seq*R (times 1 + eps(R),
   eps = eps0 + slope*R, for a spec pool), with rare stalls. Steps that *complete* inside the tick belong
   to it; the in-progress step carries over.
3. Each (step, running request) cell of a spec pool verifies one draft of K tokens. Its accepted length
   j in 0..K is drawn from P(j) = prod_{i<j} p_i * (1 - p_j), P(K) = prod p_i (prefix acceptance); summed
   over the tick's cells this is exactly a Multinomial(n_drafts, P) draw, but drawing per cell lets each
   request finish at the right step. A cell emits 1 + j tokens (1 on a baseline pool). No drafts are
   trimmed: draft_tokens = K * drafts always (an optional no_draft_prob makes some outputs carry no
   draft; they count for ITL and generation tokens but not for the spec counters).
4. A request finishes when it has produced its sampled output length; tokens past that are cut (not
   counted), its slot is refilled at the next step (prefill step: the first token and a TTFT sample),
   and TPOT = decode_time / (n - 1) (0 if n <= 1) and e2e = TTFT + decode_time are observed.
5. ITL is observed once per decode cell with the value of that engine step's duration (per step, not
   per token), aggregated per step into the histogram.
6. Events at the boundary at the tick's end (restart, acceptance or concurrency change) are applied,
   so an event at offset T is visible in the state at T (T is rounded up to a tick boundary).

Counters live in one float64 vector per engine (layout in :class:`Layout`); ``cum`` holds the same
increments but is never reset (``cumulative_since_start``). History for ``/truth?at=`` is kept as
periodic checkpoints of the whole state (RNG included) and replayed forward, so memory stays bounded.
"""

from __future__ import annotations

import bisect
import collections
import copy
import math
import pickle
from dataclasses import dataclass

import numpy as np

from backend.sim.scenario import Acceptance, PerRequest, PoolSpec, Profile, RequestClass, Scenario

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
_R_STOP, _R_LENGTH, _R_ABORT, _R_ERROR, _R_REPETITION = range(5)

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


def _hist_add(delta: np.ndarray, lay: Layout, name: str, values: np.ndarray,
              weights: np.ndarray | None = None) -> None:
    sl, sum_idx = lay.hist[name]
    bounds = _BOUNDS_NP[name]
    idx = np.searchsorted(bounds, values, side="left")  # value <= le goes into that bucket
    delta[sl] += np.bincount(idx, weights=weights, minlength=len(bounds) + 1)
    delta[sum_idx] += float(values @ weights) if weights is not None else float(values.sum())


class FleetSim:
    """The simulated fleet. Not thread-safe: the server holds a lock around it.

    ``advance_to(n)`` runs ticks until n ticks are done; ``state_at(n)`` returns a (copied) state after
    n ticks from the bounded checkpoint history.
    """

    def __init__(self, scenario: Scenario, *, seed: int = 0, tick: float | None = None,
                 history_seconds: float | None = None, checkpoints: int = 240,
                 checkpoint_budget_bytes: int = 256 * 2**20, max_requests: int = 200_000):
        self.scenario = scenario
        self.seed = int(seed)
        self.tick = float(tick if tick is not None else scenario.tick)
        if self.tick <= 0:
            raise ValueError("tick must be > 0")
        self.history_seconds = float(history_seconds if history_seconds is not None else scenario.history_seconds)
        self.history_ticks = max(1, (math.ceil(self.history_seconds / self.tick)))
        self.pools = [Pool(i, spec, scenario, self.tick) for i, spec in enumerate(scenario.pools)]
        self.n = 0
        # finished requests of pools with `per_request`, in finishing order (only ticks run forward by
        # advance_to emit; replays for state_at do not); a consumer drains it with take_requests()
        self.requests: collections.deque[dict] = collections.deque(maxlen=max_requests)
        self._emitting = False
        self.states = [pool.new_state(self.seed) for pool in self.pools]
        # bounded memory: at most `checkpoints` copies of the state, and at most the byte budget
        size = len(pickle.dumps(self.states, protocol=pickle.HIGHEST_PROTOCOL))
        checkpoints = max(8, min(checkpoints, checkpoint_budget_bytes // max(1, size)))
        self.checkpoint_every = max(1, (math.ceil(self.history_ticks / checkpoints)))
        for pool, st in zip(self.pools, self.states):
            self._boundary(pool, st, 0)
        self._checkpoints: list[tuple[int, list[PoolState]]] = [(0, copy.deepcopy(self.states))]

    # ------------------------------------------------------------------ time travel

    def advance_to(self, n: int) -> None:
        while self.n < n:
            self._emitting = True
            try:
                self._tick_all(self.states, self.n)
            finally:
                self._emitting = False
            self.n += 1
            if self.n % self.checkpoint_every == 0:
                self._checkpoints.append((self.n, copy.deepcopy(self.states)))
                while self._checkpoints and self._checkpoints[0][0] < self.n - self.history_ticks - self.checkpoint_every:
                    self._checkpoints.pop(0)

    def schedule(self, pool_id: str, at_tick: int, acceptance: Acceptance) -> None:
        """A change of a pool's acceptance from tick `at_tick` on, decided while the simulation runs (the
        demo's incident). Only the future: the history already simulated stays as it was."""
        if at_tick <= self.n:
            raise ValueError(f"tick {at_tick} is not in the future (now {self.n})")
        pool = next((p for p in self.pools if p.spec.id == pool_id), None)
        if pool is None:
            raise KeyError(f"unknown pool {pool_id!r}")
        pool.changes.append((at_tick, len(self.scenario.events) + len(pool.changes), acceptance, None))
        pool.changes.sort(key=lambda c: (c[0], c[1]))

    def oldest_tick(self) -> int:
        return max(self._checkpoints[0][0], self.n - self.history_ticks)

    def state_at(self, n: int, only: list[int] | None = None) -> list[PoolState | None]:
        """A copy of the fleet state after n ticks (n <= self.n and within the history). Pools are
        independent, so with `only` (pool indices) just those are replayed; the others are None."""
        if n > self.n:
            raise ValueError(f"tick {n} is in the future (now {self.n})")
        if n < self.oldest_tick():
            raise LookupError(f"tick {n} is older than the kept history (oldest {self.oldest_tick()})")
        wanted = set(range(len(self.pools)) if only is None else only)
        if n == self.n:
            return [copy.deepcopy(st) if i in wanted else None for i, st in enumerate(self.states)]
        ticks = [c[0] for c in self._checkpoints]
        base_n, base = self._checkpoints[bisect.bisect_right(ticks, n) - 1]
        out: list[PoolState | None] = []
        for i, (pool, st) in enumerate(zip(self.pools, base)):
            if i not in wanted:
                out.append(None)
                continue
            st = copy.deepcopy(st)
            for m in range(base_n, n):
                self._tick_pool(pool, st, m)
            out.append(st)
        return out

    # ------------------------------------------------------------------ one tick

    def _tick_all(self, states: list[PoolState], n: int) -> None:
        for pool, st in zip(self.pools, states):
            self._tick_pool(pool, st, n)

    def _tick_pool(self, pool: Pool, st: PoolState, n: int) -> None:
        t = n * self.tick
        target = min(round(st.conc.value(t)), pool.slots)
        for e, eng in enumerate(st.engines):
            self._tick_engine(pool, st, eng, target, t, e)
        self._boundary(pool, st, n + 1)

    def _boundary(self, pool: Pool, st: PoolState, b: int) -> None:
        """Events at tick boundary b (simulated time b*tick) shape the state *after* b ticks, so a restart
        at T is visible at T: counters back to 0, created = T, requests in flight lost."""
        if b > 0 and pool.restarts_at(b):
            for eng in st.engines:
                eng.reset()
            st.created = b * self.tick
            st.restarts.append(b * self.tick)
        for cb, _, acc, conc in pool.changes:
            if cb == b:
                if acc is not None:
                    st.acc = acc
                if conc is not None:
                    st.conc = conc

    def _admit(self, spec: PoolSpec, rng: np.random.Generator, eng: EngineState, idx: np.ndarray,
               pstep: np.ndarray | int) -> None:
        m = idx.size
        if m == 0:
            return
        u = rng.standard_normal((3, m))
        olen = np.clip(np.rint(spec.output_mean * np.exp(spec.output_sigma * u[0] - spec.output_sigma ** 2 / 2)),
                       1, spec.output_max).astype(np.int64)
        prompt = np.clip(np.rint(spec.prompt_mean * np.exp(spec.prompt_sigma * u[1] - spec.prompt_sigma ** 2 / 2)),
                         1, spec.prompt_max).astype(np.int64)
        ttft = (spec.ttft_base + spec.ttft_per_prompt_token * prompt) * np.exp(
            spec.ttft_sigma * u[2] - spec.ttft_sigma ** 2 / 2)
        if spec.ttft_queue_mean > 0:
            ttft = ttft + rng.exponential(spec.ttft_queue_mean, m)
        reason = np.where(olen >= spec.output_max, _R_LENGTH, _R_STOP)
        if spec.p_abort or spec.p_error or spec.p_repetition:
            v = rng.random(m)
            c1 = spec.p_abort
            c2 = c1 + spec.p_error
            c3 = c2 + spec.p_repetition
            reason = np.where(v < c1, _R_ABORT, np.where(v < c2, _R_ERROR, np.where(v < c3, _R_REPETITION, reason)))
        eng.occ[idx] = True
        eng.p[idx] = pstep
        eng.olen[idx] = olen
        eng.rem[idx] = olen - 1
        eng.reason[idx] = reason
        eng.prompt[idx] = prompt
        eng.gen[idx] = 0
        eng.ttft[idx] = ttft
        eng.dec[idx] = 0.0

    def _step_durations(self, spec: PoolSpec, rng: np.random.Generator, eng: EngineState, running: int
                        ) -> np.ndarray:
        """Durations of the engine steps that complete in this tick; updates the carried step."""
        tick = self.tick
        base = spec.step_base + spec.step_per_seq * running
        mean = base * (1.0 + spec.eps0 + spec.eps_slope * running) if spec.spec else base
        sig = spec.jitter_sigma

        def draw(m: int) -> np.ndarray:
            d = mean * np.exp(sig * rng.standard_normal(m) - sig * sig / 2)
            if spec.stall_prob > 0:
                d = np.where(rng.random(m) < spec.stall_prob, d * spec.stall_factor, d)
            return d

        m = int(tick / mean * 1.2) + 4
        if eng.next_end is None:
            d = draw(m)
            ends = np.cumsum(d)
        else:
            d = np.concatenate(([eng.cur_dur], draw(m)))
            ends = eng.next_end + np.concatenate(([0.0], np.cumsum(d[1:])))
        while ends[-1] <= tick:
            more = draw(m)
            d = np.concatenate((d, more))
            ends = np.concatenate((ends, ends[-1] + np.cumsum(more)))
        n = int(np.searchsorted(ends, tick, side="right"))
        eng.cur_dur = float(d[n])
        eng.next_end = float(ends[n] - tick)
        return d[:n]

    def _tick_engine(self, pool: Pool, st: PoolState, eng: EngineState, target: int, t: float, e: int = 0) -> None:
        spec, lay, rng = pool.spec, pool.layout, st.rng
        per_req = spec.per_request
        delta = np.zeros(lay.size)
        # waiting gauge and preemptions
        w = spec.waiting.value(t)
        eng.waiting = float(rng.poisson(w)) if w > 0 else 0.0
        if spec.preemptions_per_s > 0:
            delta[lay.preemptions] += rng.poisson(spec.preemptions_per_s * self.tick)
        # fill free slots up to the target concurrency
        occ_n = int(eng.occ.sum())
        if occ_n < target:
            free = np.flatnonzero(~eng.occ)[: target - occ_n]
            self._admit(spec, rng, eng, free, 0)
            if per_req is not None:
                self._assign(per_req, st, eng, free)
        if not eng.occ.any():
            eng.next_end = None
            self._commit(eng, delta)
            return
        running = int(eng.occ.sum())
        d = self._step_durations(spec, rng, eng, running)
        n = d.size
        if n == 0:
            self._commit(eng, delta)
            return
        S = eng.occ.size
        k = spec.k
        if spec.spec:
            acc = st.acc
            probs = accepted_length_probs(acc.conditional(running, t))
            cdf = np.cumsum(probs)[:-1]
            u = rng.random((n, S))
            j_norm = np.searchsorted(cdf, u, side="right")
            if per_req is not None:  # each request draws with its class's acceptance (same uniforms)
                self._class_draws(per_req, eng, np.arange(S), u, running, j_norm, t)
            if acc.drafter_max_len is not None:
                cdf_l = np.cumsum(accepted_length_probs((acc.beyond_max_len_a,) * k))[:-1]
                j_long = np.searchsorted(cdf_l, u, side="right")
            else:
                j_long = None
            nodraft = rng.random((n, S)) < acc.no_draft_prob if acc.no_draft_prob > 0 else None
            if nodraft is not None:
                j_norm = np.where(nodraft, 0, j_norm)
                if j_long is not None:
                    j_long = np.where(nodraft, 0, j_long)
        decode = np.zeros((n, S), bool)
        jcount = np.zeros(k + 1)
        sg_itl: list[tuple[np.ndarray, np.ndarray]] = []  # SGLang: (interval / tokens, tokens) per decode cell
        dcum = np.concatenate(([0.0], np.cumsum(d)))
        steps = np.arange(n)[:, None]
        fin_vals: dict[str, list[np.ndarray]] = {"tpot": [], "e2e": [], "reason": []}
        gen_tokens = 0.0
        active = np.flatnonzero(eng.occ & (eng.p < n))
        while active.size:
            p = eng.p[active]
            a = active.size
            # prefill (first token) of the occupants that start in this tick
            pre = active[p >= 0]
            if pre.size:
                _hist_add(delta, lay, "ttft", eng.ttft[pre])
                delta[lay.prompt] += float(eng.prompt[pre].sum())
                gen_tokens += pre.size
                eng.gen[pre] = 1
            if spec.spec:
                jj = j_norm[:, active]
                if j_long is not None:
                    long_ = (eng.prompt[active] + eng.gen[active]) > acc.drafter_max_len
                    if long_.any():
                        jj = np.where(long_[None, :], j_long[:, active], jj)
                ctok = np.vstack((np.zeros((1, a)), np.cumsum(1 + jj, axis=0)))
            else:
                jj = None
                ctok = np.arange(n + 1, dtype=float)[:, None].repeat(a, axis=1)
            cols = np.arange(a)
            base = ctok[p + 1, cols]
            thresh = base + eng.rem[active]
            f = (ctok[1:] < thresh[None, :]).sum(axis=0)  # step at which the request finishes (n = not yet)
            finished = f < n
            last = np.minimum(f, n - 1)
            cells = (steps > p[None, :]) & (steps <= last[None, :])
            decode[:, active] |= cells
            if "itl_sglang" in lay.hist:  # the tokens each cell kept (the last one's are cut at the request's end)
                kept = np.minimum(ctok[1:], thresh[None, :]) - ctok[:-1]  # >= 1 on every decode cell
                sg_itl.append(((d[:, None] / np.maximum(kept, 1.0))[cells], kept[cells].astype(float)))
            if jj is not None:
                if nodraft is not None:
                    dc = cells & ~nodraft[:, active]
                else:
                    dc = cells
                jcount += np.bincount(jj[dc], minlength=k + 1)
                if per_req is not None:
                    r_, c_ = np.nonzero(dc)
                    np.add.at(eng.rhist, (active[c_], jj[r_, c_]), 1)
            produced = ctok[last + 1, cols] - base
            out = np.where(finished, eng.rem[active], produced).astype(np.int64)
            gen_tokens += float(out.sum())
            eng.rem[active] -= out
            eng.gen[active] += out
            eng.dec[active] += dcum[last + 1] - dcum[p + 1]
            done = active[finished]
            eng.p[active[~finished]] = -1
            if done.size == 0:
                break
            olen = eng.olen[done]
            dec = eng.dec[done]
            fin_vals["tpot"].append(np.where(olen > 1, dec / np.maximum(olen - 1, 1), 0.0))
            fin_vals["e2e"].append(eng.ttft[done] + dec)
            fin_vals["reason"].append(eng.reason[done])
            if per_req is not None:
                self._finish_requests(pool, st, eng, e, done, t + self.tick)
            eng.occ[done] = False
            room = max(0, target - int(eng.occ.sum()))
            refill = done[:room]
            if refill.size == 0:
                break
            self._admit(spec, rng, eng, refill, f[finished][:room] + 1)
            if per_req is not None:
                self._assign(per_req, st, eng, refill)
                if spec.spec:
                    self._class_draws(per_req, eng, refill, u, running, j_norm, t)
            active = refill[eng.p[refill] < n]
        # occupants admitted for the step after the tick's last: prefill at step 0 of the next tick
        eng.p[eng.occ & (eng.p >= n)] = 0
        # counters
        delta[lay.generation] += gen_tokens
        if spec.spec:
            n_drafts = float(jcount.sum())
            delta[lay.drafts] += n_drafts
            delta[lay.draft_tokens] += n_drafts * k
            delta[lay.accepted] += float(jcount @ np.arange(k + 1))
            delta[lay.per_pos] += np.cumsum(jcount[::-1])[::-1][1:]  # per_pos[i] = sum_{j>i} n_j
        per_step = decode.sum(axis=1).astype(float)
        if per_step.any():
            _hist_add(delta, lay, "itl", d, per_step)
        delta[lay.decode_steps] += float(n)
        if sg_itl:
            _hist_add(delta, lay, "itl_sglang", np.concatenate([v for v, _ in sg_itl]),
                      np.concatenate([w for _, w in sg_itl]))
        if eng.sg_log is not None and spec.spec:
            self._sglang_log(eng, n, delta[lay.drafts], delta[lay.draft_tokens], delta[lay.accepted])
        if fin_vals["reason"]:
            reasons = np.concatenate(fin_vals["reason"])
            delta[lay.success] += np.bincount(reasons, minlength=len(FINISH_REASONS))
            _hist_add(delta, lay, "tpot", np.concatenate(fin_vals["tpot"]))
            _hist_add(delta, lay, "e2e", np.concatenate(fin_vals["e2e"]))
        self._commit(eng, delta)

    @staticmethod
    def _sglang_log(eng: EngineState, steps: int, drafts: float, draft_tokens: float, accepted: float) -> None:
        """SGLang sets sglang:spec_accept_length (accepted tokens incl. the bonus one per draft / drafts = 1 +
        accepted / drafts) and sglang:spec_accept_rate (accepted / draft tokens) from the counts of its last
        logging interval (every SGLANG_LOG_STEPS decode steps, here at the first tick end past it); an
        interval without drafts leaves them as they were."""
        eng.sg_log += (steps, drafts, draft_tokens, accepted)
        if eng.sg_log[0] < SGLANG_LOG_STEPS:
            return
        _, n_drafts, n_tokens, n_acc = eng.sg_log
        if n_drafts > 0:
            eng.sg_gauges = (1.0 + n_acc / n_drafts, n_acc / n_tokens if n_tokens else 0.0)
        eng.sg_log[:] = 0.0

    @staticmethod
    def _class_draws(per_req: PerRequest, eng: EngineState, cols: np.ndarray, u: np.ndarray, running: int,
                     j_norm: np.ndarray, t: float = 0.0) -> None:
        """The accepted lengths of the requests in slots `cols` from the shared uniforms `u`, each with its
        class's acceptance; a class with context_drift scales each request's p_i by its prompt's factor."""
        for ci, c in enumerate(per_req.classes):
            cols_c = cols[eng.cls[cols] == ci]
            if cols_c.size == 0:
                continue
            p = np.asarray(c.acceptance.conditional(running, t), dtype=float)
            if c.drift_from is None:
                cdf = np.cumsum(accepted_length_probs(tuple(p)))[:-1]
                j_norm[:, cols_c] = np.searchsorted(cdf, u[:, cols_c], side="right")
                continue
            f = drift_factor(c, eng.prompt[cols_c])
            cdfs = np.array([np.cumsum(accepted_length_probs(tuple(p * x)))[:-1] for x in f])  # (slots, K)
            j_norm[:, cols_c] = (cdfs[None, :, :] <= u[:, cols_c, None]).sum(axis=2)

    @staticmethod
    def _assign(per_req: PerRequest, st: PoolState, eng: EngineState, idx: np.ndarray) -> None:
        """Newly admitted requests: a class drawn by share, a serial, an empty histogram, and for classes
        with their own prompt_len a prompt length drawn from it."""
        if idx.size == 0:
            return
        shares = np.array([c.share for c in per_req.classes])
        eng.cls[idx] = np.searchsorted(np.cumsum(shares / shares.sum())[:-1], st.req_rng.random(idx.size),
                                       side="right")
        for ci, c in enumerate(per_req.classes):
            if c.prompt_len is None:
                continue
            mine = idx[eng.cls[idx] == ci]
            mean, sigma, cap = c.prompt_len
            z = st.req_rng.standard_normal(mine.size)
            eng.prompt[mine] = np.clip(np.rint(mean * np.exp(sigma * z - sigma ** 2 / 2)), 1, cap).astype(np.int64)
        eng.rid[idx] = np.arange(eng.next_rid, eng.next_rid + idx.size)
        eng.next_rid += int(idx.size)
        eng.rhist[idx] = 0

    def _finish_requests(self, pool: Pool, st: PoolState, eng: EngineState, e: int, done: np.ndarray,
                         at: float) -> None:
        """Finished requests become records, stamped with the instant this tick's counters show them."""
        per_req = pool.spec.per_request
        reported = st.req_rng.random(done.size) < per_req.report_share
        if not self._emitting:
            return
        running = {"running": int(eng.occ.sum())} if per_req.report_running else {}  # the finishing ones included
        for slot, rep in zip(done.tolist(), reported.tolist()):
            self.requests.append({
                "pool": pool.spec.id, "model": pool.spec.model, "spec_mode": pool.spec.spec_mode, "engine": e,
                "request_id": f"{pool.spec.id}-e{e}-{int(eng.rid[slot])}",
                "traffic_class": per_req.classes[int(eng.cls[slot])].name, "finish_offset": at,
                "output_tokens": int(eng.olen[slot]), "prompt_tokens": int(eng.prompt[slot]), "k": pool.spec.k,
                "server": pool.spec.engine,
                "histogram": eng.rhist[slot].tolist(), "reported": rep, **running})

    def take_requests(self) -> list[dict]:
        """The finished requests emitted since the last call (oldest first)."""
        out = list(self.requests)
        self.requests.clear()
        return out

    @staticmethod
    def _commit(eng: EngineState, delta: np.ndarray) -> None:
        eng.c += delta
        eng.cum += delta


# ---------------------------------------------------------------------------------------------- views


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
