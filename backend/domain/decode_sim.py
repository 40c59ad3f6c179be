"""Decode-loop simulator behind ``specwatch simulate``: what speculation buys at given alpha, K and eps.

Model (seeded Monte Carlo, one sequence per request, load held fixed):
  * **alpha**: by default (``alpha_kind="rate"``) each grid alpha is vLLM's draft acceptance rate r
    (= alpha_s for full-length drafts) *at that K*, the number the dashboard shows; it is converted to the
    per-token acceptance a by :func:`per_token_from_rate` (Leviathan i.i.d. model). With
    ``alpha_kind="per-token"`` the grid value is a itself. The same r means a different a at another K.
  * each spec step drafts K tokens and accepts them position by position with probability a until the first
    rejection; it emits accepted + 1 tokens (the bonus/corrected token; a rejection never costs an extra
    target pass) and takes (1 + eps) * t_base, times a mean-1 log-normal jitter factor (sigma ``jitter``).
  * a baseline step emits 1 token and takes t_base (same jitter).
  * a request decodes ``tokens_per_request`` tokens; the last step's overshoot is discarded, as vLLM does
    at max_tokens. Per-token latency of a request = its decode time / tokens.
Outputs per (alpha, K, eps): a and r, analytic and simulated tokens/step, model speedup tau(a)/(1 + eps) and
simulated speedup (mean per-token latency ratio; slightly below the model because of the discarded
overshoot), break-even (rate eps/K and per-token a), and empirical P50/P99 per-token latency with and
without speculation (sample quantiles of the simulated requests, not histogram_quantile).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from backend.domain.acceptance import (
    _check_prob,
    check_k,
    per_token_from_rate,
    rate_from_per_token,
    tau_from_per_token,
)
from backend.domain.economics import break_even_alpha, leviathan_breakeven

ALPHA_KINDS = ("rate", "per-token")
MAX_CELLS = 1000


@dataclass(frozen=True)
class SimCell:
    """One grid point. Latencies in seconds; ``None`` where undefined (e.g. no break-even a)."""

    alpha: float
    alpha_kind: str
    k: int
    eps: float
    per_token_a: float
    acceptance_rate: float
    tokens_per_step_model: float
    tokens_per_step_sim: float
    speedup_model: float
    speedup_sim: float
    break_even_rate: float
    break_even_per_token: float | None
    margin_rate: float
    net_positive: bool
    base_p50: float
    base_p99: float
    spec_p50: float
    spec_p99: float
    p99_speedup: float


@dataclass(frozen=True)
class SimResult:
    """All grid cells plus the parameters that produced them (reproducible for the same seed)."""

    params: dict
    cells: list[SimCell] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"params": dict(self.params), "cells": [asdict(c) for c in self.cells]}


def _jitter(rng: np.random.Generator, sigma: float, shape: tuple[int, int]) -> np.ndarray:
    if sigma == 0:
        return np.ones(shape)
    return rng.lognormal(mean=-0.5 * sigma * sigma, sigma=sigma, size=shape)


def _accepted(rng: np.random.Generator, a: float, k: int, shape: tuple[int, int]) -> np.ndarray:
    """Accepted drafts per step: leading successes of K Bernoulli(a) trials = min(Geometric - 1, K)."""
    if a <= 0.0:
        return np.zeros(shape, dtype=np.int64)
    if a >= 1.0:
        return np.full(shape, k, dtype=np.int64)
    return np.minimum(rng.geometric(1.0 - a, size=shape) - 1, k)


def _spec_decode(rng: np.random.Generator, a: float, k: int, eps: float, t_base: float, sigma: float,
                 n: int, length: int) -> tuple[np.ndarray, float]:
    shape = (n, length)
    emitted = 1 + _accepted(rng, a, k, shape)
    cum = np.cumsum(emitted, axis=1)
    steps = np.argmax(cum >= length, axis=1) + 1  # always reached: >= 1 token per step
    rows = np.arange(n)
    times = np.cumsum(_jitter(rng, sigma, shape), axis=1)[rows, steps - 1] * (1.0 + eps) * t_base
    tokens_per_step = float(cum[rows, steps - 1].sum() / steps.sum())
    return times / length, tokens_per_step


def _validate(alphas: Sequence[float], ks: Sequence[int], eps_values: Sequence[float], alpha_kind: str, seed: int,
              t_base: float, jitter: float, n_requests: int, tokens_per_request: int) -> None:
    if alpha_kind not in ALPHA_KINDS:
        raise ValueError(f"alpha_kind must be one of {ALPHA_KINDS}, got {alpha_kind!r}")
    if not alphas or not ks or not eps_values:
        raise ValueError("alpha, K and eps grids must not be empty")
    for a in alphas:
        _check_prob(a, "alpha")
    for k in ks:
        check_k(k)
    for e in eps_values:
        if not math.isfinite(float(e)) or float(e) <= -1:
            raise ValueError(f"overhead eps must be a finite number > -1, got {e!r}")
    if len(alphas) * len(ks) * len(eps_values) > MAX_CELLS:
        raise ValueError(f"grid too large (more than {MAX_CELLS} cells)")
    if not (math.isfinite(t_base) and t_base > 0) or not (math.isfinite(jitter) and jitter >= 0):
        raise ValueError("t_base must be > 0 and jitter >= 0")
    if int(seed) < 0:
        raise ValueError("seed must be >= 0")
    if n_requests < 10 or n_requests > 200_000 or tokens_per_request < 1 or tokens_per_request > 100_000:
        raise ValueError("n_requests must be in [10, 200000] and tokens_per_request in [1, 100000]")


def simulate_grid(alphas: Sequence[float], ks: Sequence[int], eps_values: Sequence[float] = (0.1,), *,
                  alpha_kind: str = "rate", t_base: float = 0.02, jitter: float = 0.0, n_requests: int = 2000,
                  tokens_per_request: int = 256, seed: int = 0) -> SimResult:
    """Simulate every (alpha, K, eps) cell of the grid (alpha outer, then K, then eps).

    Each cell's random stream depends only on (seed, alpha, K, eps), so a cell's numbers do not change when
    the grid around it changes. Edge cases: alpha outside [0, 1], K < 1, eps <= -1, unknown alpha_kind,
    empty or oversized grids, t_base <= 0, jitter < 0, n_requests outside [10, 200000] -> ``ValueError``.
    alpha = 0 gives 1 token/step (speedup 1/(1 + eps)); alpha = 1 gives K + 1; eps > K means no per-token a
    breaks even (``break_even_per_token`` ``None``).
    """
    _validate(alphas, ks, eps_values, alpha_kind, seed, t_base, jitter, n_requests, tokens_per_request)
    base_rng = np.random.default_rng([int(seed), 0])
    base_lat = np.sum(_jitter(base_rng, jitter, (n_requests, tokens_per_request)), axis=1) * t_base
    base_lat /= tokens_per_request
    b50, b99 = (float(x) for x in np.percentile(base_lat, [50, 99]))
    cells: list[SimCell] = []
    for alpha in alphas:
        for k_raw in ks:
            k = check_k(k_raw)
            alpha = float(alpha)
            a = float(per_token_from_rate(alpha, k)) if alpha_kind == "rate" else alpha
            r = float(rate_from_per_token(a, k))
            tau = float(tau_from_per_token(a, k))
            for eps in eps_values:
                eps = float(eps)
                rng = np.random.default_rng([int(seed), 1, round(alpha * 1e9), k, round((eps + 1.0) * 1e9)])
                lat, tps = _spec_decode(rng, a, k, eps, t_base, jitter, n_requests, tokens_per_request)
                s50, s99 = (float(x) for x in np.percentile(lat, [50, 99]))
                be_rate = float(break_even_alpha(k, eps))
                cells.append(SimCell(
                    alpha=alpha, alpha_kind=alpha_kind, k=k, eps=eps, per_token_a=a, acceptance_rate=r,
                    tokens_per_step_model=tau, tokens_per_step_sim=tps,
                    speedup_model=tau / (1.0 + eps), speedup_sim=float(base_lat.mean() / lat.mean()),
                    break_even_rate=be_rate, break_even_per_token=leviathan_breakeven(k, 0.0, max(eps, 0.0)),
                    margin_rate=r - be_rate, net_positive=tau / (1.0 + eps) > 1.0,
                    base_p50=b50, base_p99=b99, spec_p50=s50, spec_p99=s99, p99_speedup=b99 / s99,
                ))
    params = {"alphas": [float(a) for a in alphas], "ks": [int(k) for k in ks],
                  "eps_values": [float(e) for e in eps_values], "alpha_kind": alpha_kind, "t_base": t_base,
                  "jitter": jitter, "n_requests": n_requests, "tokens_per_request": tokens_per_request, "seed": int(seed)}
    return SimResult(params=params, cells=cells)
