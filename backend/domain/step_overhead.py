"""Step overhead measured from ITL, and the speedup estimate it gives checked against the measured one
(spec-math §4). Pure math, no I/O.

Two overheads, two names:
  * eps_step = mean ITL_spec / mean ITL_base - 1 at matched load (the same concurrency band). vLLM observes
    `inter_token_latency_seconds` once per engine step of a request (a speculative step streams its tau
    tokens as one chunk), so the ratio of ITL means is the ratio of step times: the eps of
    S = tau / (1 + eps), measured on its own, without TPOT. Break-even alpha = eps_step / K.
  * eps_effective = tau / S_meas - 1, S_meas = mean TPOT_base / mean TPOT_spec (economics.effective_overhead).
    It is whatever makes tau / (1 + eps) equal the measured speedup, so tau / (1 + eps_effective) checks
    nothing and is never shown as an estimate.

The check: estimate S_est = tau / (1 + eps_step) against S_meas. Both are ratios of window means, so their
uncertainty comes from how the means move over time: delete-one jackknife over time bins of the band's
sums (each bin's ITL and TPOT _sum/_count increases on both sides, the same bins for both), on
d = ln(S_est / S_meas). They disagree when the interval exp(d -+ z SE(d)) lies wholly beyond a tolerance
(ratio above 1 + tol or below 1 / (1 + tol)): the gap is both real (beyond the uncertainty) and large
enough to matter. Then something other than step cost separates them (batch composition, preemption,
prefill interference, per-request spread of tau: the mean of per-request TPOTs is not the step time over
the mean tau, a gap of about a percent on steady traffic, hence the tolerance).

Only where ITL is a step time. SGLang observes `inter_token_latency_seconds` once per *token* (a decode
interval divided by the tokens it produced): its mean ITL is per-token latency, which speculation lowers by
the very speedup being measured, not the cost of a step. So eps_step is undefined (None) wherever the spec or
the baseline pools include an engine whose ITL is per token (`itl_not_per_step` says why), and the check is
"undetermined": not comparable. The measured speedup still comes from TPOT where the engine exposes it.

``None`` = undefined. Bad parameters raise ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from backend.domain.engines import DEFAULT_ENGINE, engine

AGREE = "agree"
DISAGREE = "disagree"
UNDETERMINED = "undetermined"

Z_DEFAULT = 2.0
MIN_BINS = 4
TOLERANCE_DEFAULT = 0.03


@dataclass(frozen=True)
class LatencySums:
    """_sum and _count increases of ITL (per engine step) and TPOT (per request) over some buckets."""

    itl_sum: float | None = None
    itl_count: float | None = None
    tpot_sum: float | None = None
    tpot_count: float | None = None

    def __add__(self, other: LatencySums) -> LatencySums:
        return LatencySums(*(_add(a, b) for a, b in zip(self._t(), other._t(), strict=True)))

    def __sub__(self, other: LatencySums) -> LatencySums:
        return LatencySums(*(None if a is None else a - (b or 0.0) for a, b in zip(self._t(), other._t(), strict=True)))

    def _t(self) -> tuple[float | None, ...]:
        return self.itl_sum, self.itl_count, self.tpot_sum, self.tpot_count

    @property
    def itl_mean(self) -> float | None:
        return _mean(self.itl_sum, self.itl_count)

    @property
    def tpot_mean(self) -> float | None:
        return _mean(self.tpot_sum, self.tpot_count)


def _add(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else a + b


def _mean(s: float | None, n: float | None) -> float | None:
    if s is None or n is None or n <= 0 or not math.isfinite(s) or not math.isfinite(n):
        return None
    return s / n


ITL_NOT_PER_STEP = "itl_not_per_step"  # the data-quality flag of a figure that would need ITL as a step time


def itl_not_per_step(engine_names: Iterable[str | None]) -> str | None:
    """Why the ITL of pools of these engines (None: the default engine) is not a step time, or None when it
    is one for every engine (an engine without ITL has no mean to compare: nothing to refuse). An unknown
    engine name raises ValueError."""
    per_token = sorted({e.label for e in (engine(n or DEFAULT_ENGINE) for n in engine_names) if e.itl_per == "token"})
    if not per_token:
        return None
    return (f"not comparable: {' and '.join(per_token)} observe{'s' if len(per_token) == 1 else ''} inter-token "
            f"latency once per token, not once per engine step, so its mean is no step time (eps_step needs "
            f"step times on both sides)")


def step_overhead(itl_spec_mean: float | None, itl_base_mean: float | None, *,
                  engines: Iterable[str | None] = ()) -> float | None:
    """eps_step = mean ITL_spec / mean ITL_base - 1 (both in the same concurrency band); `engines`: the
    engines of the pools on both sides.

    Edge cases: either mean ``None``, or a baseline mean <= 0 -> ``None``; an engine among `engines` whose
    ITL is per token (itl_not_per_step) -> ``None``; a spec step faster than a plain one gives a negative
    eps_step (returned as is: a measurement, the caller shows it)."""
    if itl_spec_mean is None or itl_base_mean is None or itl_base_mean <= 0 or itl_spec_mean < 0:
        return None
    if itl_not_per_step(engines) is not None:
        return None
    return itl_spec_mean / itl_base_mean - 1.0


def tpot_speedup(tpot_spec_mean: float | None, tpot_base_mean: float | None) -> float | None:
    """S_meas = mean TPOT_base / mean TPOT_spec (same band); ``None`` when either is missing or spec <= 0."""
    if tpot_spec_mean is None or tpot_base_mean is None or tpot_spec_mean <= 0 or tpot_base_mean < 0:
        return None
    return tpot_base_mean / tpot_spec_mean


def _estimate(tau: float, spec: LatencySums, base: LatencySums) -> tuple[float | None, float | None]:
    eps = step_overhead(spec.itl_mean, base.itl_mean)
    est = None if eps is None or eps <= -1.0 else tau / (1.0 + eps)
    return est, tpot_speedup(spec.tpot_mean, base.tpot_mean)


@dataclass(frozen=True)
class SpeedupCheck:
    """tau / (1 + eps_step) beside the measured TPOT speedup, with the jackknife interval of their ratio."""

    estimated: float | None  # tau / (1 + eps_step)
    measured: float | None  # TPOT_base / TPOT_spec
    ratio: float | None  # estimated / measured
    ratio_low: float | None  # exp(d - z SE), exp(d + z SE)
    ratio_high: float | None
    bins: int  # time bins with data on both sides
    verdict: str  # agree | disagree | undetermined
    reason: str


def speedup_check(tau: float | None, spec_bins: Sequence[LatencySums], base_bins: Sequence[LatencySums], *,
                  z: float = Z_DEFAULT, min_bins: int = MIN_BINS, tolerance: float = TOLERANCE_DEFAULT,
                  engines: Iterable[str | None] = ()) -> SpeedupCheck:
    """The estimate from ITL against the measurement from TPOT over the same time bins of one band.

    ``spec_bins[i]`` and ``base_bins[i]`` are the same time bin (sums over that bin's buckets of the band;
    empty sums where a side has none). The point values come from the totals over all bins.
    Edge cases: an engine among `engines` (the pools' on both sides) whose ITL is per token -> no estimate,
    "undetermined", the reason saying why it is not comparable (the measured speedup from TPOT stays);
    tau ``None`` or either figure undefined -> ratio ``None``, "undetermined"; fewer than
    ``min_bins`` bins with ITL and TPOT on both sides, or a leave-one-out value undefined -> interval
    ``None``, "undetermined"; z <= 0, tolerance < 0, min_bins < 2 or unequal bin lists -> ``ValueError``."""
    if not (math.isfinite(z) and z > 0):
        raise ValueError(f"z must be a finite number > 0, got {z!r}")
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    if isinstance(min_bins, bool) or not isinstance(min_bins, int) or min_bins < 2:
        raise ValueError(f"min_bins must be an integer >= 2, got {min_bins!r}")
    if len(spec_bins) != len(base_bins):
        raise ValueError(f"spec and baseline need the same time bins, got {len(spec_bins)} and {len(base_bins)}")
    spec_all, base_all = sum(spec_bins, LatencySums()), sum(base_bins, LatencySums())
    why = itl_not_per_step(engines)
    if why is not None:
        return SpeedupCheck(None, tpot_speedup(spec_all.tpot_mean, base_all.tpot_mean), None, None, None, 0,
                            UNDETERMINED, f"the estimate from step time is {why}")
    if tau is None or not math.isfinite(tau) or tau <= 0:
        est, meas = None, tpot_speedup(spec_all.tpot_mean, base_all.tpot_mean)
        return SpeedupCheck(est, meas, None, None, None, 0, UNDETERMINED, "no acceptance length in the window")
    est, meas = _estimate(tau, spec_all, base_all)
    if est is None or meas is None:
        missing = "ITL" if est is None else "TPOT"
        return SpeedupCheck(est, meas, None, None, None, 0, UNDETERMINED,
                            f"no {missing} on both sides in the band: nothing to compare")
    ratio = est / meas

    def both(b: LatencySums) -> bool:
        return all(x is not None and x > 0 for x in (b.itl_count, b.tpot_count))

    used = [i for i, (s, b) in enumerate(zip(spec_bins, base_bins, strict=True)) if both(s) and both(b)]
    n = len(used)
    if n < min_bins:
        return SpeedupCheck(est, meas, ratio, None, None, n, UNDETERMINED,
                            f"{n} time bin(s) with ITL and TPOT on both sides, {min_bins} needed for an interval")
    # leave one bin out (the other bins, including those with one side only, stay in the totals)
    d_loo = []
    for i in used:
        e_i, m_i = _estimate(tau, spec_all - spec_bins[i], base_all - base_bins[i])
        if e_i is None or m_i is None or e_i <= 0 or m_i <= 0:
            return SpeedupCheck(est, meas, ratio, None, None, n, UNDETERMINED,
                                "a leave-one-out value is undefined: too little data outside one time bin")
        d_loo.append(math.log(e_i / m_i))
    mean = math.fsum(d_loo) / n
    se = math.sqrt((n - 1) / n * math.fsum((x - mean) ** 2 for x in d_loo))
    d = math.log(ratio)
    lo, hi = math.exp(d - z * se), math.exp(d + z * se)
    edge = math.log1p(tolerance)
    if d - z * se <= edge and d + z * se >= -edge:
        return SpeedupCheck(est, meas, ratio, lo, hi, n, AGREE,
                            f"the estimate from step time agrees with the measured speedup within their "
                            f"uncertainty or {tolerance * 100:g} % (ratio {ratio:.3f}, {z:g} SE: {lo:.3f}-{hi:.3f}, "
                            f"{n} time bins)")
    side = "above" if d > 0 else "below"
    return SpeedupCheck(est, meas, ratio, lo, hi, n, DISAGREE,
                        f"the estimate from step time is {abs(ratio - 1) * 100:.1f} % {side} the measured "
                        f"speedup, beyond their uncertainty and {tolerance * 100:g} % ({lo:.3f}-{hi:.3f}, "
                        f"{n} time bins): something other than step cost is at work (batch composition, "
                        f"preemption, prefill interference, spread of tau across requests)")
