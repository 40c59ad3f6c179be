"""Ground truth for the peer benchmark's questions, from the generated history itself (no store involved).

The generator (benchmarks.peer_gen) knows every counter's exact value at every sample. The truth of a
window (a, b] is the counter's change over it as the history records it: the value at the last sample at
or before b minus the value at the last sample at or before a (a window before the first sample sees the
first sample's value: nothing recorded changes before it). Every increment therefore counts in the window
holding the sample that reports it, once. Acceptance over a window is the sum of accepted tokens over the
sum of draft tokens (pools summed first for a per-model answer); undefined (None) when no draft token was
recorded. The P99 ITL of a window is `histogram_quantile` (backend.domain.histogram, Prometheus 2.42's
algorithm) of the exact per-`le` bucket increases over it.

`errors` sets an answer against the truth: the largest absolute error over the points both define (for
acceptance, a value in [0, 1]) or the largest relative error (for P99), and the number of points only one
of them defines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from backend.domain.histogram import histogram_quantile
from benchmarks import peer_gen

ACC, DRAFT = "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_draft_tokens"
ITL = "vllm:inter_token_latency_seconds"


@dataclass
class PoolHistory:
    """One pool's sample times and the cumulative counters the questions need."""

    key: tuple[str, str, str]  # model_name, traffic_class, spec_mode
    ts: np.ndarray
    acc: np.ndarray | None = None  # None on a pool without speculative decoding
    draft: np.ndarray | None = None
    itl: dict[float, np.ndarray] = field(default_factory=dict)  # le -> cumulative bucket count


def window_increase(ts: np.ndarray, cum: np.ndarray, a, b) -> np.ndarray:
    """The counter's change over (a, b] (scalars or arrays of window ends): value at the last sample <= b
    minus value at the last sample <= a; before the first sample, the first sample's value."""
    ia = np.clip(np.searchsorted(ts, a, side="right") - 1, 0, None)
    ib = np.clip(np.searchsorted(ts, b, side="right") - 1, 0, None)
    return cum[ib] - cum[ia]


def history(n_pools: int, *, start: int, days: float, seed: int = 1) -> list[PoolHistory]:
    """Regenerate the benchmark's history (same seed, same offsets as peer_gen.write_openmetrics) and keep
    the counters the questions read."""
    ticks = int(days * 86400 // peer_gen.INTERVAL)
    out = []
    for p in peer_gen.pools(n_pools):
        first = start + (p.index * 7) % peer_gen.INTERVAL
        fams = peer_gen.series(p, first, ticks, seed, tpot=False)
        h = PoolHistory((p.model, p.spec.traffic_class, p.spec.spec_mode),
                        first + np.arange(ticks, dtype=np.int64) * peer_gen.INTERVAL)
        if ACC in fams:
            h.acc, h.draft = fams[ACC][0][1], fams[DRAFT][0][1]
        for name, values in fams[ITL]:
            if "_bucket{" in name:
                le = name.rsplit('le="', 1)[1].rstrip('"}')
                h.itl[math.inf if le == "+Inf" else float(le)] = values
        out.append(h)
    return out


def acceptance(pools: list[PoolHistory], *, by: str, start: int, end: int, step: int, window: int
               ) -> dict[tuple, dict[int, float | None]]:
    """{key: {t: acceptance over (t - window, t]}} for t = start, start + step, ..., end; key is the pool
    (model, class, mode) with by="pool", (model,) with by="model" (the model's spec pools summed)."""
    t = np.arange(start, end + 1, step, dtype=np.int64)
    sums: dict[tuple, list[np.ndarray]] = {}
    for p in pools:
        if p.acc is None:
            continue
        key = p.key if by == "pool" else (p.key[0],)
        a = window_increase(p.ts, p.acc, t - window, t).astype(np.float64)
        d = window_increase(p.ts, p.draft, t - window, t).astype(np.float64)
        if key in sums:
            sums[key][0] += a
            sums[key][1] += d
        else:
            sums[key] = [a, d]
    return {k: {int(x): (float(a[i] / d[i]) if d[i] > 0 else None) for i, x in enumerate(t.tolist())}
            for k, (a, d) in sums.items()}


def p99_itl(pools: list[PoolHistory], *, start: int, end: int, q: float = 0.99) -> dict[tuple, float | None]:
    """{pool: the q-quantile of its ITL bucket increases over (start, end]}."""
    out = {}
    for p in pools:
        buckets = [(le, float(window_increase(p.ts, cum, start, end))) for le, cum in p.itl.items()]
        out[p.key] = histogram_quantile(q, buckets).value if buckets else None
    return out


@dataclass(frozen=True)
class Error:
    worst: float  # max |answer - truth| (relative to |truth| when relative)
    compared: int
    one_sided: int  # points defined by only one of answer and truth
    relative: bool

    def text(self) -> str:
        what = "rel err" if self.relative else "|err|"
        return f"max {what}={self.worst:.1e}" + (f", {self.one_sided} one-sided" if self.one_sided else "")

    def as_dict(self) -> dict:
        return {"max_error": self.worst, "relative": self.relative, "compared": self.compared,
                "one_sided": self.one_sided}


def _defined(v) -> bool:
    return v is not None and math.isfinite(v)


def errors(answer: dict, truth: dict) -> Error:
    """An answer against the truth, both {key: {t: value}} (series) or {key: value} (one value per key;
    relative error). A key or point the answer lacks counts as undefined there."""
    worst, compared, one_sided, relative = 0.0, 0, 0, False
    for key, want in truth.items():
        got = answer.get(key)
        if isinstance(want, dict):
            got = got or {}
            pairs = [(w, got.get(t)) for t, w in want.items()]
        else:
            relative = True
            pairs = [(want, got)]
        for w, g in pairs:
            if _defined(w) != _defined(g):
                one_sided += 1
            elif _defined(w):
                d = abs(g - w)
                worst = max(worst, d / abs(w) if relative and w != 0 else d)
                compared += 1
    return Error(worst, compared, one_sided, relative)


def no_worse(mine: Error, theirs: Error, tol: float = 1e-9) -> bool:
    """mine is no further from the truth than theirs: its worst error within tol (float noise) of theirs,
    and no more points left undefined or invented."""
    return mine.compared > 0 and mine.worst <= theirs.worst + tol and mine.one_sided <= theirs.one_sided
