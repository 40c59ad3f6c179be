"""Operating point and overhead: the concurrency band, the step overhead and the economics built on it.

Two overheads with two names (backend.domain.step_overhead):
  * eps_step, the cost of a speculative engine step over a plain one: mean ITL of the spec pool over mean
    ITL of the baseline in the spec pool's concurrency band, minus 1 (source "measured"). Without a
    baseline, or no baseline ITL in that band, the configured default for the band ("default-for-band").
    It gives the estimate tau / (1 + eps_step), the break-even alpha eps_step / K and the margin.
  * eps_effective = tau / S_meas - 1, from the measured speedup S_meas (mean TPOT baseline / spec in the
    same band). Shown as what it is; never turned back into an "estimate" (that would be S_meas again).
The business margin is S - 1 of the measured speedup (of the estimate when nothing is measured). The
estimate and the measurement are checked against each other over time bins of the band (speedup_check).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from backend.config import Settings
from backend.domain import economics
from backend.domain.bands import BAND_EDGES, concurrency_band
from backend.domain.step_overhead import (
    LatencySums,
    SpeedupCheck,
    itl_not_per_step,
    speedup_check,
    step_overhead,
    tpot_speedup,
)
from backend.services.totals import Totals, total


def band_label(index: int | None) -> str | None:
    """Label of the SQL band index (running_mean <= edge[i] -> i; above every edge -> len(edges)).
    The label comes from the domain function evaluated at the band's upper edge (or beyond the last)."""
    if index is None:
        return None
    value = BAND_EDGES[index] if index < len(BAND_EDGES) else BAND_EDGES[-1] + 1
    return concurrency_band(value)


def relabel(by_index: Mapping[int | None, Totals]) -> dict[str | None, Totals]:
    out: dict[str | None, list[Totals]] = {}
    for index, t in by_index.items():
        out.setdefault(band_label(index), []).append(t)
    return {label: total(ts) for label, ts in out.items()}


@dataclass(frozen=True)
class OperatingPoint:
    band: str | None
    running_mean: float | None
    eps_step: float | None
    eps_step_source: str | None
    eps_effective: float | None
    measured_speedup: float | None
    estimated_speedup: float | None
    check: SpeedupCheck | None
    break_even_alpha: float | None
    margin: float | None
    speedup_margin: float | None


def default_eps(band: str | None, settings: Settings) -> float:
    if band is None:
        return settings.eps_default
    return settings.eps_default_by_band.get(band, settings.eps_default)


def _sums(t: Totals | None) -> LatencySums:
    if t is None:
        return LatencySums()
    return LatencySums(t.itl_sum, t.itl_count, t.tpot_sum, t.tpot_count)


Bins = Mapping[int, LatencySums]  # time bin -> the band's ITL / TPOT sums in it


def operating_point(
    *, tau: float | None, seed_alpha: float | None, k: int | None, running_mean: float | None,
    spec_bands: Mapping[str | None, Totals], base_bands: Mapping[str | None, Totals] | None,
    spec_bins: Mapping[str | None, Bins] | None = None, base_bins: Mapping[str | None, Bins] | None = None,
    settings: Settings, engines: tuple[str | None, ...] = (),
) -> OperatingPoint:
    """The band of `running_mean`; eps_step and S_meas from the spec and baseline sums of that band (per
    band label; `base_bands` None: no baseline); their check over the band's time bins. `engines`: the
    engines of the spec and baseline pools; where one observes ITL per token (SGLang) eps_step is not
    measured (the band default, as without a baseline) and the check says why it is not comparable."""
    band = concurrency_band(running_mean)
    spec = _sums(spec_bands.get(band))
    base = _sums(base_bands.get(band)) if base_bands else LatencySums()
    eps_step = step_overhead(spec.itl_mean, base.itl_mean, engines=engines)
    s_measured = tpot_speedup(spec.tpot_mean, base.tpot_mean)
    source = "measured"
    if eps_step is None or eps_step <= -1.0:
        eps_step, source = default_eps(band, settings), "default-for-band"
    estimated = economics.speedup(tau, eps_step)
    check = None
    if source == "measured" and s_measured is not None:
        sb, bb = (spec_bins or {}).get(band, {}), (base_bins or {}).get(band, {})
        keys = sorted(set(sb) | set(bb))
        check = speedup_check(tau, [sb.get(i, LatencySums()) for i in keys], [bb.get(i, LatencySums()) for i in keys],
                              tolerance=settings.speedup_check_tolerance, engines=engines)
    elif s_measured is not None and itl_not_per_step(engines) is not None:
        check = speedup_check(tau, [], [], tolerance=settings.speedup_check_tolerance, engines=engines)
        check = replace(check, measured=s_measured)
    be = economics.break_even_alpha(k, eps_step) if k else None
    margin = economics.margin_alpha(seed_alpha, k, eps_step) if k else None
    headline = s_measured if s_measured is not None else estimated
    return OperatingPoint(
        band=band, running_mean=running_mean, eps_step=eps_step, eps_step_source=source,
        eps_effective=economics.effective_overhead(tau, s_measured), measured_speedup=s_measured,
        estimated_speedup=estimated, check=check, break_even_alpha=be, margin=margin,
        speedup_margin=economics.speedup_margin(headline),
    )
