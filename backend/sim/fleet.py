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

import numpy as np

from backend.sim.fleet_draws import assign_classes, class_draws, sglang_log
from backend.sim.fleet_state import (
    FINISH_REASONS,
    R_ABORT,
    R_ERROR,
    R_LENGTH,
    R_REPETITION,
    R_STOP,
    EngineState,
    Pool,
    PoolState,
    accepted_length_probs,
    hist_add,
)
from backend.sim.scenario_model import Acceptance, PoolSpec, Scenario


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
        olen = np.clip(np.rint(spec.output_len.mean * np.exp(spec.output_len.sigma * u[0] - spec.output_len.sigma ** 2 / 2)),
                       1, spec.output_len.max).astype(np.int64)
        prompt = np.clip(np.rint(spec.prompt_len.mean * np.exp(spec.prompt_len.sigma * u[1] - spec.prompt_len.sigma ** 2 / 2)),
                         1, spec.prompt_len.max).astype(np.int64)
        ttft = (spec.ttft.base + spec.ttft.per_prompt_token * prompt) * np.exp(
            spec.ttft.sigma * u[2] - spec.ttft.sigma ** 2 / 2)
        if spec.ttft.queue_mean > 0:
            ttft = ttft + rng.exponential(spec.ttft.queue_mean, m)
        reason = np.where(olen >= spec.output_len.max, R_LENGTH, R_STOP)
        if spec.finish.abort or spec.finish.error or spec.finish.repetition:
            v = rng.random(m)
            c1 = spec.finish.abort
            c2 = c1 + spec.finish.error
            c3 = c2 + spec.finish.repetition
            reason = np.where(v < c1, R_ABORT, np.where(v < c2, R_ERROR, np.where(v < c3, R_REPETITION, reason)))
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
        base = spec.step_time.base + spec.step_time.per_seq * running
        mean = base * (1.0 + spec.overhead.eps0 + spec.overhead.slope * running) if spec.spec else base
        sig = spec.jitter.sigma

        def draw(m: int) -> np.ndarray:
            d = mean * np.exp(sig * rng.standard_normal(m) - sig * sig / 2)
            if spec.jitter.stall_prob > 0:
                d = np.where(rng.random(m) < spec.jitter.stall_prob, d * spec.jitter.stall_factor, d)
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
                assign_classes(per_req, st, eng, free)
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
                class_draws(per_req, eng, np.arange(S), u, running, j_norm, t)
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
                hist_add(delta, lay, "ttft", eng.ttft[pre])
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
                assign_classes(per_req, st, eng, refill)
                if spec.spec:
                    class_draws(per_req, eng, refill, u, running, j_norm, t)
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
            hist_add(delta, lay, "itl", d, per_step)
        delta[lay.decode_steps] += float(n)
        if sg_itl:
            hist_add(delta, lay, "itl_sglang", np.concatenate([v for v, _ in sg_itl]),
                      np.concatenate([w for _, w in sg_itl]))
        if eng.sg_log is not None and spec.spec:
            sglang_log(eng, n, delta[lay.drafts], delta[lay.draft_tokens], delta[lay.accepted])
        if fin_vals["reason"]:
            reasons = np.concatenate(fin_vals["reason"])
            delta[lay.success] += np.bincount(reasons, minlength=len(FINISH_REASONS))
            hist_add(delta, lay, "tpot", np.concatenate(fin_vals["tpot"]))
            hist_add(delta, lay, "e2e", np.concatenate(fin_vals["e2e"]))
        self._commit(eng, delta)

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
