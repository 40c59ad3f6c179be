"""Fast, vectorised vLLM history for the peer benchmark: N pools x D days at one sample per 15 s, written
as OpenMetrics text (explicit timestamps, `# EOF`) for `promtool tsdb create-blocks-from openmetrics`.

The engine-step simulator (backend.sim) is exact but advances every engine step; 30 days x 20 pools
would take hours. This generator draws the same counters per 15 s tick straight from the scenario model
of the built-in `steady` scenario (pool i uses steady's pool i % 4; model `model-<i // 4>`):

* concurrency R per tick: the pool's concurrency times a diurnal factor 0.75 .. 1.25 (rounded, >= 1);
* engine steps per tick ~ Poisson(15 s / mean step), mean step = (base + per_seq*R) * (1 + eps0 + slope*R)
  on a spec pool, base + per_seq*R on a baseline pool (the simulator's step-time model);
* prefix acceptance with the pool's K: every running request verifies one draft per step, so
  drafts = steps * R and the accepted lengths j = 0..K are Multinomial(drafts, P(j)) with
  P(j) = prod_{i<j} p_i (1 - p_j) (sim.fleet_state.accepted_length_probs); per_pos[i] = #(j > i),
  accepted = sum j, draft_tokens = K * drafts, generation tokens = drafts + accepted (R * steps off);
* per-step ITL: each step is observed once per running request with the step's duration, the step
  durations lognormal (jitter sigma) with the rare stalls (stall_prob x stall_factor) -> the ITL
  histogram (vLLM bounds) is R * Multinomial(steps, P(duration in bucket)); _sum = R * steps * mean step;
* per-request TPOT (with --tpot): finished requests ~ Poisson(tokens / mean output length), each TPOT
  = mean step / tokens per step with the jitter averaged over the request's steps;
* the running-requests gauge (R) and `vllm:generation_tokens_created` (the restart marker; no restarts).

Not generated (both stores hold exactly the same series): TTFT, e2e, prompt tokens, finished reasons,
preemptions, waiting, KV usage. Scrape timestamps are whole seconds, offset per pool (i*7 mod 15).
"""

from __future__ import annotations

import math
import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from prometheus_client.utils import floatToGoString

from backend.sim.fleet_state import ITL_BOUNDS, TPOT_BOUNDS, accepted_length_probs
from backend.sim.scenario import load_scenario
from backend.sim.scenario_model import PoolSpec

INTERVAL = 15


@dataclass(frozen=True)
class PeerPool:
    index: int
    model: str
    spec: PoolSpec

    @property
    def labels(self) -> str:
        s = self.spec
        return f'model_name="{self.model}",spec_mode="{s.spec_mode}",traffic_class="{s.traffic_class}"'


def pools(n: int) -> list[PeerPool]:
    steady = load_scenario("steady").pools
    return [PeerPool(i, f"model-{i // 4}", steady[i % 4]) for i in range(n)]


def _lognormal_buckets(bounds: tuple[float, ...], mean: float, sigma: float, stall_p: float = 0.0,
                       stall_f: float = 1.0) -> np.ndarray:
    """P(value in each bucket, +Inf last) of mean*exp(sigma Z - sigma^2/2), with stalls x stall_f."""
    def cdf(x: float, m: float) -> float:
        if sigma <= 0:
            return 1.0 if x >= m else 0.0
        return 0.5 * (1 + math.erf((math.log(x / m) + sigma * sigma / 2) / (sigma * math.sqrt(2))))
    c = np.array([(1 - stall_p) * cdf(b, mean) + stall_p * cdf(b, mean * stall_f) for b in bounds] + [1.0])
    return np.diff(np.concatenate(([0.0], c))).clip(0.0)


def _by_value(rng: np.random.Generator, n: np.ndarray, keys: np.ndarray, probs) -> np.ndarray:
    """Multinomial(n[t], probs(keys[t])) for every tick t, grouped by the (few) distinct keys."""
    out = None
    for key in np.unique(keys):
        idx = np.flatnonzero(keys == key)
        p = probs(int(key))
        draw = rng.multinomial(n[idx], p / p.sum())
        if out is None:
            out = np.zeros((n.size, p.size), dtype=np.int64)
        out[idx] = draw
    return out


def series(pool: PeerPool, start: int, ticks: int, seed: int, tpot: bool) -> dict[str, list[tuple[str, np.ndarray]]]:
    """{family: [(sample name + labels, cumulative values per tick)]} for one pool."""
    s = pool.spec
    rng = np.random.default_rng([seed, pool.index])
    t = start + np.arange(ticks, dtype=np.int64) * INTERVAL
    phase = 2 * math.pi * (pool.index % 7) / 7
    r0 = s.concurrency.value(0.0)
    R = np.maximum(1, np.rint(r0 * (1 + 0.25 * np.sin(2 * math.pi * (t % 86400) / 86400 + phase)))).astype(np.int64)

    def step_mean(r: int) -> float:
        base = s.step_time.base + s.step_time.per_seq * r
        return base * (1 + s.overhead.eps0 + s.overhead.slope * r) if s.spec else base

    means = np.array([step_mean(int(r)) for r in R])
    steps = rng.poisson(INTERVAL / means)
    lab = pool.labels
    out: dict[str, list[tuple[str, np.ndarray]]] = {}
    if s.spec:
        k = s.k
        drafts = steps * R
        j = _by_value(rng, drafts, R, lambda r: accepted_length_probs(s.acceptance.conditional(r)))
        per_pos = np.cumsum(j[:, ::-1], axis=1)[:, ::-1][:, 1:]
        accepted = j @ np.arange(k + 1)
        gen = drafts + accepted
        out["vllm:spec_decode_num_drafts"] = [(f"vllm:spec_decode_num_drafts_total{{{lab}}}", drafts)]
        out["vllm:spec_decode_num_draft_tokens"] = [(f"vllm:spec_decode_num_draft_tokens_total{{{lab}}}", drafts * k)]
        out["vllm:spec_decode_num_accepted_tokens"] = [
            (f"vllm:spec_decode_num_accepted_tokens_total{{{lab}}}", accepted)]
        out["vllm:spec_decode_num_accepted_tokens_per_pos"] = [
            (f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}}', per_pos[:, i])
            for i in range(k)]
        tokens_per_step = 1 + float(np.mean(accepted / np.maximum(drafts, 1)))
    else:
        gen = steps * R
        tokens_per_step = 1.0
    out["vllm:generation_tokens"] = [(f"vllm:generation_tokens_total{{{lab}}}", gen)]
    itl = _by_value(rng, steps, R, lambda r: _lognormal_buckets(ITL_BOUNDS, step_mean(r), s.jitter.sigma,
                                                                  s.jitter.stall_prob, s.jitter.stall_factor)) * R[:, None]
    out["vllm:inter_token_latency_seconds"] = _histogram("vllm:inter_token_latency_seconds", lab, ITL_BOUNDS, itl,
                                                         R * steps * means)
    if tpot:
        fin = rng.poisson(gen / s.output_len.mean)
        sig = s.jitter.sigma / math.sqrt(max(1.0, s.output_len.mean / tokens_per_step))
        h = _by_value(rng, fin, R, lambda r: _lognormal_buckets(TPOT_BOUNDS, step_mean(r) / tokens_per_step, sig))
        out["vllm:request_time_per_output_token_seconds"] = _histogram(
            "vllm:request_time_per_output_token_seconds", lab, TPOT_BOUNDS, h, fin * means / tokens_per_step)
    cum = {f: [(name, np.cumsum(v)) for name, v in items] for f, items in out.items()}
    cum["vllm:num_requests_running"] = [(f"vllm:num_requests_running{{{lab}}}", R)]
    cum["vllm:generation_tokens_created"] = [(f"vllm:generation_tokens_created{{{lab}}}",
                                              np.full(ticks, float(start - 3600)))]
    return cum


def _histogram(name: str, lab: str, bounds, counts: np.ndarray, total: np.ndarray) -> list[tuple[str, np.ndarray]]:
    cum_le = np.cumsum(counts, axis=1)
    les = [floatToGoString(b) for b in bounds] + ["+Inf"]
    out = [(f'{name}_bucket{{{lab},le="{le}"}}', cum_le[:, i]) for i, le in enumerate(les)]
    out.append((f"{name}_sum{{{lab}}}", total.astype(float)))
    out.append((f"{name}_count{{{lab}}}", cum_le[:, -1]))
    return out


TYPES = {"vllm:num_requests_running": "gauge", "vllm:generation_tokens_created": "gauge",
         "vllm:inter_token_latency_seconds": "histogram", "vllm:request_time_per_output_token_seconds": "histogram"}


def _lines(name: str, values: np.ndarray, ts: list[int]) -> str:
    vals = values.tolist()
    return "".join([f"{name} {v} {t}\n" for v, t in zip(vals, ts)])


def _write_pool(args) -> dict[str, int]:
    pool, start, ticks, seed, tpot, parts = args
    fams = series(pool, start + (pool.index * 7) % INTERVAL, ticks, seed, tpot)
    ts = (start + (pool.index * 7) % INTERVAL + np.arange(ticks, dtype=np.int64) * INTERVAL).tolist()
    counts = {}
    for family, items in fams.items():
        with open(Path(parts) / f"{family.replace(':', '_')}.{pool.index:05d}", "w") as fh:
            fh.writelines(_lines(name, values, ts) for name, values in items)
        counts[family] = len(items) * ticks
    return counts


def write_openmetrics(path: Path, peer_pools: list[PeerPool], *, start: int, days: float, seed: int = 1,
                      tpot: bool = False, workers: int | None = None) -> int:
    """Write the history to `path`; return the number of samples."""
    ticks = int(days * 86400 // INTERVAL)
    parts = path.parent / (path.name + ".parts")
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir(parents=True)
    jobs = [(p, start, ticks, seed, tpot, str(parts)) for p in peer_pools]
    samples = 0
    families: list[str] = []
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 2) as ex:
        for counts in ex.map(_write_pool, jobs):
            samples += sum(counts.values())
            families += [f for f in counts if f not in families]
    with open(path, "wb") as out:
        for family in families:
            out.write(f"# TYPE {family} {TYPES.get(family, 'counter')}\n".encode())
            for p in peer_pools:
                part = parts / f"{family.replace(':', '_')}.{p.index:05d}"
                if part.exists():
                    with open(part, "rb") as fh:
                        shutil.copyfileobj(fh, out, 16 * 2**20)
        out.write(b"# EOF\n")
    shutil.rmtree(parts, ignore_errors=True)
    return samples
