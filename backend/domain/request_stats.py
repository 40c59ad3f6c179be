"""What only per-request data shows: coverage of the engine's counters (and its flags), and 95 % intervals
of pooled and request-weighted α. Pure: no I/O."""

from __future__ import annotations

import math

from backend.domain import thresholds as thr


def coverage(part: float | None, whole: float | None) -> float | None:
    """Share of the engine's counter seen per request; None when the engine reports none."""
    if part is None or not whole:
        return None
    return part / whole


# The three coverages reconciliation reports, each flagged on its own. A record counts whole in the bucket it
# finished in, the engine counts each draft when it happens: requests running across the window's start or
# end move coverage a little off 1 (about mean request duration / window); the flags leave that much alone.
COVERAGES = ("drafts", "draft_tokens", "accepted_tokens")
COVERAGE_LOW = "0.98"  # below: partial_coverage (some requests are not reported)
COVERAGE_HIGH = "1.02"  # above: per_request_exceeds_engine (duplicates or a wrong model name)


def coverage_flag(part: float | None, whole: float | None) -> str | None:
    """The flag one coverage (part / whole) raises, compared exactly (thresholds.py): "partial_coverage" below
    0.98, "per_request_exceeds_engine" above 1.02, None inside the band or when undefined (no engine count)."""
    if part is None or not whole:
        return None
    if thr.ratio_below(part, whole, COVERAGE_LOW):
        return "partial_coverage"
    if thr.compare_ratio(part, whole, COVERAGE_HIGH) == 1:
        return "per_request_exceeds_engine"
    return None


Z95 = 1.959963984540054  # the normal quantile of a two-sided 95 % interval


def pooled_alpha_interval(n: int, a: float, d: float, saa: float, sdd: float, sad: float,
                          z: float = Z95) -> tuple[float | None, float | None, float | None]:
    """(α, low, high) of the pooled α = Σa / Σd over `n` requests, the request being the unit: the ratio
    estimator's variance n/(n-1) · Σ(a_i − α d_i)² / (Σd)² (Σ(a − αd)² = Σa² − 2α Σad + α² Σd²), clipped to
    [0, 1]. Tokens of one request are not independent draws, so a binomial interval over tokens would be too
    narrow. Fewer than two requests or no drafts: no interval."""
    if not d:
        return None, None, None
    r = a / d
    se = pooled_alpha_se(n, a, d, saa, sdd, sad)
    if se is None:
        return r, None, None
    return r, max(0.0, r - z * se), min(1.0, r + z * se)


def pooled_alpha_se(n: int, a: float, d: float, saa: float, sdd: float, sad: float) -> float | None:
    """The standard error of the pooled α = Σa / Σd over `n` requests (the ratio estimator, the request being
    the unit; see pooled_alpha_interval); None with fewer than two requests or no drafts."""
    if not d or n < 2:
        return None
    r = a / d
    resid = max(saa - 2 * r * sad + r * r * sdd, 0.0)
    return math.sqrt(n / (n - 1) * resid) / d


def mean_alpha_interval(n: int, mean: float | None, sd: float | None,
                        z: float = Z95) -> tuple[float | None, float | None, float | None]:
    """(request-weighted α, low, high): the mean of per-request α ± z · sd / √n, clipped to [0, 1]."""
    if mean is None or n < 2 or sd is None:
        return mean, None, None
    half = z * sd / math.sqrt(n)
    return mean, max(0.0, mean - half), min(1.0, mean + half)
