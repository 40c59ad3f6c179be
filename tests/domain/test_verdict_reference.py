"""The verdict gives, field for field and float for float, what it gives with numpy's own percentiles
(tests/support/verdict_reference.py): on random histories of every shape the verdict meets, sparse ones
with a few empty resamples among them, and at several quantiles at once."""

import dataclasses

import numpy as np
import pytest

from backend.domain import resample
from backend.domain.verdict import latency_verdicts
from tests.support import verdict_reference as reference

BOUNDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
QS = (0.5, 0.9, 0.99)
CASES = 48


def _side(rng: np.random.Generator, n: int, shift: float, empty: float) -> list[list[float]]:
    """n time bins of cumulative counts on BOUNDS (+Inf): latencies around a log-normal, a share `empty` of
    the bins empty, fractional counts (Prometheus' increase()) or whole ones, now and then a non-monotone
    row."""
    rows = []
    for _ in range(n):
        size = 0 if rng.random() < empty else int(rng.integers(1, 400))
        x = rng.lognormal(np.log(0.08) + shift, 0.9, size)
        counts = [float((x <= b).sum()) for b in BOUNDS] + [float(size)]
        if rng.random() < 0.3:
            counts = [c * 0.97 for c in counts]  # extrapolated increases are not whole
        if rng.random() < 0.02 and size:
            counts[2] = counts[3] + 1.0  # a count above the next le's
        rows.append(counts)
    return rows


def case(seed: int) -> tuple[list, list, dict]:
    """Dense histories; sparse ones whose resamples are often empty (mostly refused); and short, sparse ones
    where a few resamples of a thousand are empty (dropped, the verdict still made)."""
    rng = np.random.default_rng(seed)
    kind = seed % 3
    empty = (0.0, 0.85, 0.7)[kind]
    lo, hi = ((12, 120), (12, 120), (10, 17))[kind]
    n_s, n_b = int(rng.integers(lo, hi)), int(rng.integers(lo, hi))
    spec = _side(rng, n_s, float(rng.choice([0.0, 0.4, -0.4, 1.5])), empty)
    base = _side(rng, n_b, 0.0, empty)
    kw = {"seed": seed, "n_boot": 1000 if kind == 2 else int(rng.choice([200, 1000])), "min_samples": 10,
          "min_buckets": 2}
    return spec, base, kw


@pytest.mark.parametrize("seed", range(CASES))
def test_verdicts_equal_the_reference(seed):
    spec, base, kw = case(seed)
    got, want = latency_verdicts(spec, base, BOUNDS, QS, **kw), reference.latency_verdicts(spec, base, BOUNDS, QS, **kw)
    assert [dataclasses.asdict(v) for v in got] == [dataclasses.asdict(v) for v in want]


def test_the_cases_reach_verdicts_over_some_empty_resamples_and_every_label():
    """Among the cases: verdicts made although some resamples were empty (the path that drops them), and
    each label."""
    labels, over_empties = set(), 0
    for seed in range(CASES):
        spec, base, kw = case(seed)
        verdicts = reference.latency_verdicts(spec, base, BOUNDS, QS, **kw)
        labels |= {v.verdict for v in verdicts}
        w_s, w_b = resample.resample_weights(kw["seed"], len(spec), len(base), kw["n_boot"])
        empties = ((w_s @ np.array(spec)[:, -1]) == 0).any() or ((w_b @ np.array(base)[:, -1]) == 0).any()
        made = any(v.verdict != "inconclusive" for v in verdicts)
        over_empties += int(bool(empties) and made)
    assert over_empties >= 3
    assert {"better", "worse", "unresolved", "inconclusive", "no-significant-change"} <= labels
