"""Per-engine draws of one tick that depend on a pool's kind: the per-request classes (each admitted request's
class and prompt length, each class's accepted lengths, context drift included) and SGLang's logged spec
gauges."""

from __future__ import annotations

import numpy as np

from backend.sim.fleet_state import (
    SGLANG_LOG_STEPS,
    EngineState,
    PoolState,
    accepted_length_probs,
    drift_factor,
)
from backend.sim.scenario_model import PerRequest


def sglang_log(eng: EngineState, steps: int, drafts: float, draft_tokens: float, accepted: float) -> None:
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


def class_draws(per_req: PerRequest, eng: EngineState, cols: np.ndarray, u: np.ndarray, running: int,
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


def assign_classes(per_req: PerRequest, st: PoolState, eng: EngineState, idx: np.ndarray) -> None:
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
