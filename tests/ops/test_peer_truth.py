"""The peer bench's ground truth (benchmarks.peer_truth) on histories small enough to check by hand."""

from __future__ import annotations

import math

import numpy as np

from benchmarks import peer_gen
from benchmarks.peer_truth import (
    Error,
    PoolHistory,
    acceptance,
    errors,
    history,
    no_worse,
    p99_itl,
    window_increase,
)

# Two spec pools of one model and a baseline pool, samples every 15 s from t=0.
TS = np.array([0, 15, 30, 45, 60, 75, 90, 105, 120])


def _pool(cls: str, acc: list[int] | None, draft: list[int] | None, itl: dict[float, list[int]] | None = None):
    return PoolHistory(("m", cls, "eagle3" if acc else "off"), TS, None if acc is None else np.array(acc),
                       None if draft is None else np.array(draft),
                       {le: np.array(v) for le, v in (itl or {}).items()})


CHAT = _pool("chat", [0, 1, 3, 6, 10, 10, 12, 12, 20], [0, 4, 8, 12, 16, 16, 20, 24, 28])
CODE = _pool("code", [5, 5, 5, 5, 5, 6, 6, 6, 6], [8, 8, 8, 8, 8, 10, 12, 14, 16])


def test_window_increase_counts_each_increment_in_the_window_of_its_sample() -> None:
    acc = CHAT.acc
    assert window_increase(TS, acc, 0, 60) == 10  # samples 15..60: 1 + 2 + 3 + 4
    assert window_increase(TS, acc, 60, 120) == 10  # 0 + 2 + 0 + 8
    assert window_increase(TS, acc, 50, 110) == 6  # last <= 110 is 105 (12), last <= 50 is 45 (6)
    assert window_increase(TS, acc, -60, 0) == 0  # before the first sample nothing changes
    assert window_increase(TS, acc, -1000, 1000) == 20
    assert window_increase(TS, acc, np.array([0, 60]), np.array([60, 120])).tolist() == [10, 10]


def test_acceptance_per_pool_and_per_model_are_ratios_of_sums() -> None:
    pools = [CHAT, CODE, _pool("chat", None, None)]
    per_pool = acceptance(pools, by="pool", start=0, end=120, step=60, window=60)
    assert set(per_pool) == {("m", "chat", "eagle3"), ("m", "code", "eagle3")}  # baseline: no spec counters
    assert per_pool[("m", "chat", "eagle3")] == {0: None, 60: 10 / 16, 120: 10 / 12}
    assert per_pool[("m", "code", "eagle3")] == {0: None, 60: None, 120: 1 / 8}  # no drafts: undefined
    per_model = acceptance(pools, by="model", start=0, end=120, step=60, window=60)
    assert per_model == {("m",): {0: None, 60: 10 / 16, 120: 11 / 20}}  # (10 + 1) / (12 + 8), not a mean
    rolling = acceptance(pools, by="pool", start=60, end=120, step=60, window=120)
    assert rolling[("m", "chat", "eagle3")] == {60: 10 / 16, 120: 20 / 28}


def test_p99_is_histogram_quantile_of_the_bucket_increases() -> None:
    # Over (0, 120]: 90 observations <= 0.1, 10 more <= 0.2, none above: rank 99 lies in (0.1, 0.2] at 9/10.
    p = _pool("chat", None, None, {0.1: [0, 10, 20, 30, 40, 50, 60, 70, 90],
                                   0.2: [0, 10, 20, 30, 40, 50, 60, 70, 100],
                                   math.inf: [0, 10, 20, 30, 40, 50, 60, 70, 100]})
    assert math.isclose(p99_itl([p], start=0, end=120)[p.key], 0.1 + 0.1 * 9 / 10)
    # Over (60, 120] only: 50 <= 0.1, 60 in all, rank 59.4 -> 0.1 + 0.1 * 9.4 / 10.
    assert math.isclose(p99_itl([p], start=60, end=120)[p.key], 0.1 + 0.1 * 9.4 / 10)


def test_errors_and_verdict() -> None:
    truth = {("a",): {0: None, 60: 0.5, 120: 0.25}}
    exact = errors({("a",): {0: None, 60: 0.5, 120: 0.25}}, truth)
    assert exact == Error(0.0, 2, 0, False)
    off = errors({("a",): {0: float("nan"), 60: 0.5, 120: 0.3}}, truth)
    assert math.isclose(off.worst, 0.05) and off.compared == 2 and off.one_sided == 0  # NaN is undefined
    missing = errors({}, truth)
    assert missing == Error(0.0, 0, 2, False)
    rel = errors({("p",): 0.11}, {("p",): 0.1})
    assert rel.relative and math.isclose(rel.worst, 0.1)
    assert no_worse(exact, off) and not no_worse(off, exact)
    assert no_worse(Error(0.05 + 1e-12, 2, 0, False), off)  # float noise
    assert not no_worse(missing, exact)  # nothing compared
    assert not no_worse(Error(0.0, 1, 1, False), exact)  # a point left undefined


def test_history_is_the_generators_counters() -> None:
    """peer_truth.history regenerates exactly what peer_gen writes: same pools, offsets and counters."""
    start = 1_700_000_000 // 3600 * 3600
    hist = history(2, start=start, days=0.01)
    ticks = int(0.01 * 86400 // peer_gen.INTERVAL)
    assert [h.acc is not None for h in hist] == [True, False]  # steady's pools 0 (eagle3) and 1 (off)
    for h, pool in zip(hist, peer_gen.pools(2)):
        first = start + (pool.index * 7) % peer_gen.INTERVAL
        fams = peer_gen.series(pool, first, ticks, 1, tpot=False)
        assert h.ts.tolist() == list(range(first, first + ticks * peer_gen.INTERVAL, peer_gen.INTERVAL))
        if pool.spec.spec:
            assert h.acc.tolist() == fams["vllm:spec_decode_num_accepted_tokens"][0][1].tolist()
            assert h.draft.tolist() == fams["vllm:spec_decode_num_draft_tokens"][0][1].tolist()
        else:
            assert h.acc is None and "vllm:spec_decode_num_accepted_tokens" not in fams
        assert len(h.itl) == len(peer_gen.ITL_BOUNDS) + 1 and h.itl[math.inf][-1] > 0
