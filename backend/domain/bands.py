"""Concurrency bands: compare spec and baseline only at comparable load (spec-math §4, §7.2).

ε, and therefore the speedup and the break-even alpha, depend on the batch size: verifying K+1 tokens is
nearly free at small memory-bound batches and costly at large compute-bound ones. specwatch therefore
buckets windows by the mean number of running requests (``vllm:num_requests_running``) and compares
like with like. Default edges give "1-8", "9-32", "33-128", ">128".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

BAND_EDGES: tuple[int, ...] = (8, 32, 128)


def _check_edges(edges: Sequence[int]) -> tuple[int, ...]:
    es = tuple(edges)
    if not es:
        raise ValueError("band edges must not be empty")
    if any(isinstance(e, bool) or int(e) != e or e < 1 for e in es):
        raise ValueError(f"band edges must be integers >= 1, got {es!r}")
    if any(b <= a for a, b in itertools.pairwise(es)):
        raise ValueError(f"band edges must be strictly increasing, got {es!r}")
    return tuple(int(e) for e in es)


def band_labels(edges: Sequence[int] = BAND_EDGES) -> list[str]:
    """All band labels in order, e.g. ``["1-8", "9-32", "33-128", ">128"]``.

    Edge cases: empty, non-integer, < 1 or non-increasing edges -> ``ValueError``.
    """
    es = _check_edges(edges)
    labels = [f"1-{es[0]}"]
    labels += [f"{lo + 1}-{hi}" for lo, hi in itertools.pairwise(es)]
    labels.append(f">{es[-1]}")
    return labels


def concurrency_band(running_mean: float | None, edges: Sequence[int] = BAND_EDGES) -> str | None:
    """Band label for a mean number of running requests.

    A band "lo-hi" holds means m with previous_edge < m <= hi, so fractional means go to the band of the
    next integer above (8.2 -> "9-32"); a mean in (0, 1) (mostly idle, some load) falls in the first band.
    Edge cases: ``None``/NaN/Inf -> ``None``; a mean <= 0 (idle engine, nothing to compare) -> ``None``;
    invalid edges -> ``ValueError``.
    """
    es = _check_edges(edges)
    if running_mean is None:
        return None
    m = float(running_mean)
    if not math.isfinite(m) or m <= 0:
        return None
    labels = band_labels(es)
    for edge, label in zip(es, labels):
        if m <= edge:
            return label
    return labels[-1]
