"""Counter increases over one window (spec-math §1).

Pure functions: no I/O, no clock. ``None`` means undefined / no data and is never replaced by 0.

* :func:`reset_aware_increase` - the raw reset-aware increase of one series (spec-math §1.1).
* :func:`summed_increase` - reset handling per series, then sum (spec-math §1.3 rule 1).
* :func:`promql_increase` / :func:`promql_rate` - Prometheus 2.x ``extrapolatedRate`` (spec-math §1.2),
  to reproduce numbers that Prometheus itself returns.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence


def _valid(v: float | None) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def reset_aware_increase(values: Sequence[float | None]) -> float | None:
    """Reset-aware increase of one counter series over a window.

    ``values`` are the raw samples in time order. Prometheus' form:
    ``v_n - v_0 + sum(v_{k-1} for every drop v_k < v_{k-1})``.

    Edge cases:
      * ``None``/NaN samples (missed scrapes) are skipped, never read as 0 (reading them as 0 would fake
        a reset and over-count, fixture AR-10).
      * fewer than 2 valid samples -> ``None`` (Prometheus drops such a series; AR-04).
      * a drop is read as a restart from 0 (CI-01, CI-02); an *invisible* reset (the counter passed its
        old value before the next scrape) cannot be seen here, as in Prometheus.
      * a series that never changes gives a real ``0.0``.
    """
    pts = [float(v) for v in values if _valid(v)]
    if len(pts) < 2:
        return None
    total = pts[-1] - pts[0]
    for prev, cur in itertools.pairwise(pts):
        if cur < prev:
            total += prev
    return total


def summed_increase(series: Iterable[Sequence[float | None]]) -> float | None:
    """Sum of per-series reset-aware increases: ``sum(increase(x[w]))``, never ``increase(sum(x))``.

    Edge cases:
      * a series with fewer than 2 valid samples contributes nothing (dropped, as in PromQL).
      * every series dropped (or no series) -> ``None``.
      * summing raw counters before the reset handling is the classic mistake (AR-07: 1700 instead of 700);
        this function never does that.
    """
    parts = [d for d in (reset_aware_increase(s) for s in series) if d is not None]
    if not parts:
        return None
    return math.fsum(parts)


def promql_increase(samples: Sequence[tuple[float, float | None]], start: float, end: float) -> float | None:
    """``increase()`` as Prometheus 2.x computes it (``promql/functions.go``, ``extrapolatedRate``).

    ``samples`` are ``(timestamp_seconds, value)`` pairs; only those with ``start <= ts <= end`` are used
    (the closed range of Prometheus 2.x; 3.x uses ``(start, end]``). ``start``/``end`` are ``t - w`` and ``t``.

    Algorithm (spec-math §1.2): raw reset-aware increase; gaps to the range edges are extrapolated fully
    when below 1.1 x the average sample spacing, otherwise by half a spacing; the start gap is first
    clamped to the extrapolated zero point of the counter (``S_int * v_first / raw`` when raw > 0 and
    ``v_first >= 0``; 2.x clamps *before* the 1.1 x test, which is what this function does).

    Edge cases:
      * fewer than 2 valid samples in range -> ``None`` (Prometheus drops the series).
      * ``None``/NaN values are skipped (missed scrapes).
      * all samples at the same timestamp (zero sampled interval) -> ``None`` (0/0 in Prometheus).
      * ``end <= start`` -> ``ValueError``.
      * the result is rarely an integer (CI-04: 190 * 300/285 = 200).
    """
    if not end > start:
        raise ValueError("promql_increase: end must be after start")
    pts = sorted((float(t), float(v)) for t, v in samples if _valid(v) and start <= t <= end)
    if len(pts) < 2:
        return None
    first_t, first_v = pts[0]
    last_t, last_v = pts[-1]
    raw = last_v - first_v
    for (_, prev), (_, cur) in itertools.pairwise(pts):
        if cur < prev:
            raw += prev
    sampled = last_t - first_t
    if sampled <= 0:
        return None
    to_start = first_t - start
    to_end = end - last_t
    avg = sampled / (len(pts) - 1)
    if raw > 0 and first_v >= 0:
        to_zero = sampled * (first_v / raw)
        to_start = min(to_start, to_zero)
    threshold = avg * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else avg / 2
    interval += to_end if to_end < threshold else avg / 2
    return raw * (interval / sampled)


def promql_rate(samples: Sequence[tuple[float, float | None]], start: float, end: float) -> float | None:
    """``rate()`` as Prometheus 2.x computes it: :func:`promql_increase` divided by the range ``end - start``.

    Edge cases: as :func:`promql_increase` (``None`` with fewer than 2 valid samples in range).
    """
    inc = promql_increase(samples, start, end)
    if inc is None:
        return None
    return inc / (end - start)
