"""Operating point and overhead: the concurrency band, where eps comes from, and the economics built on it.

eps is measured whenever a baseline exists: in the spec pool's concurrency band, mean TPOT (per token)
of the baseline over mean TPOT of the spec pool (same window, buckets of that band only) is the measured
speedup S, and with tau the effective overhead eps = tau / S - 1. Without a baseline (or no baseline
data in that band) eps is the configured default for the band, and the response says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from backend.config import Settings
from backend.domain import economics
from backend.domain.bands import BAND_EDGES, concurrency_band
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
    eps: float | None
    eps_source: str | None
    measured_speedup: float | None
    estimated_speedup: float | None
    break_even_alpha: float | None
    margin: float | None
    speedup_margin: float | None


def default_eps(band: str | None, settings: Settings) -> float:
    if band is None:
        return settings.eps_default
    return settings.eps_default_by_band.get(band, settings.eps_default)


def measured_speedup(spec_bands: Mapping[str | None, Totals], base_bands: Mapping[str | None, Totals] | None,
                     band: str | None) -> float | None:
    """TPOT mean baseline / spec over the buckets of `band` on both sides (None when either is missing)."""
    if not base_bands:
        return None
    spec, base = spec_bands.get(band), base_bands.get(band)
    if spec is None or base is None or spec.tpot_mean is None or base.tpot_mean is None:
        return None
    if spec.tpot_mean <= 0:
        return None
    return base.tpot_mean / spec.tpot_mean


def operating_point(
    *, tau: float | None, seed_alpha: float | None, k: int | None, running_mean: float | None,
    s_measured: float | None, settings: Settings,
) -> OperatingPoint:
    band = concurrency_band(running_mean)
    eps = economics.effective_overhead(tau, s_measured) if s_measured is not None else None
    source = "measured" if eps is not None else "default-for-band"
    if eps is None:
        eps = default_eps(band, settings)
    estimated = economics.speedup(tau, eps)
    be = economics.break_even_alpha(k, eps) if k else None
    margin = economics.margin_alpha(seed_alpha, k, eps) if k else None
    headline = s_measured if s_measured is not None else estimated
    return OperatingPoint(
        band=band, running_mean=running_mean, eps=eps, eps_source=source, measured_speedup=s_measured,
        estimated_speedup=estimated, break_even_alpha=be, margin=margin,
        speedup_margin=economics.speedup_margin(headline),
    )
