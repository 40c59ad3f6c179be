"""Latency quantiles spec vs baseline from stored histogram increments, with a verdict per quantile.

Samples for the verdict are the per-bin histogram increments (`queries.histogram_bins`: buckets summed
into at most `verdict_max_samples` time bins); the window's histogram is their element-wise sum, and
the quantile is domain.histogram_quantile over it, exactly as Prometheus over the same summed buckets.
ITL is per engine step (per streamed chunk) and normally rises under speculation; TPOT is per token.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import fields
from functools import cached_property

import numpy as np

from backend.db.queries import HistogramBin, HistogramBlock
from backend.domain.histogram import histogram_quantile, quantile_delta
from backend.domain.verdict import latency_verdicts
from backend.schemas.latency import (
    BaselineRefRead,
    LatencyMetricRead,
    QuantileCompareRead,
    QuantileValueRead,
    VerdictRead,
)

QUANTILES = (0.5, 0.9, 0.99)
LABELS = {
    "itl": ("per engine step (chunk)",
            ("vLLM inter_token_latency: one sample per request per engine step, however many tokens the step "
            "emitted. Under speculative decoding a step carries up to K+1 tokens, so this normally RISES; "
            "it is the stall between streamed chunks a user sees.")),
    "tpot": ("per token",
             ("vLLM request_time_per_output_token: one value per finished request, decode time / (n - 1). "
             "Under speculative decoding this normally FALLS; it is the speedup the user gets.")),
    "ttft": ("time to first token",
             ("vLLM time_to_first_token: one value per request at its first token; it includes queueing.")),
}


class Histograms:
    """Bins of one side (spec or baseline) on one layout: samples per bin, summed over the side's pools.

    `bins`: HistogramBlocks (a pool's bins as arrays, from analytics.fetch) or single HistogramBins (a stored
    baseline snapshot's), in the order their pools are summed. `samples` is a (bins, le) float array, rows in
    time order; a bin's pools are added in the order the bins come (numpy's unbuffered `add.at`: the same
    additions in the same order as a loop, so the same floats)."""

    def __init__(self, bins: Sequence[HistogramBin | HistogramBlock]) -> None:
        blocks = [b if isinstance(b, HistogramBlock) else HistogramBlock.of(b) for b in bins]
        per_layout: dict[int, float] = defaultdict(float)
        for blk in blocks:
            if blk.counts.shape[1]:  # one addition per bin, in order, as a loop over bins
                per_layout[blk.layout_id] = _running(per_layout[blk.layout_id], blk.counts[:, -1])
            else:
                per_layout.setdefault(blk.layout_id, 0.0)
        self.layouts = sorted(per_layout, key=lambda lid: (-per_layout[lid], lid))
        self.layout_id = self.layouts[0] if self.layouts else None
        mine = [blk for blk in blocks if blk.layout_id == self.layout_id]
        self.sum: float | None = _defined_sum([blk.sums for blk in mine])
        self.count: float | None = _defined_sum([blk.totals for blk in mine])
        self.samples = _sum_by_bin(mine)

    @cached_property
    def counts(self) -> list[float] | None:
        if not len(self.samples):
            return None
        return [math.fsum(col) for col in self.samples.T.tolist()]

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.sum is not None and self.count else None


def _running(start: float, values: np.ndarray) -> float:
    """start + values[0] + values[1] + ..., added one after the other (add.accumulate is sequential: the
    same float as a Python loop, where sum() would add pairwise)."""
    return float(np.add.accumulate(np.concatenate(([start], values)))[-1])


def _defined_sum(parts: Sequence[np.ndarray]) -> float | None:
    """The non-NaN values of `parts`, in order, added one after the other from 0.0; None when there is none."""
    values = np.concatenate(parts) if parts else np.zeros(0)
    values = values[~np.isnan(values)]
    return _running(0.0, values) if values.size else None


def _sum_by_bin(blocks: Sequence[HistogramBlock]) -> np.ndarray:
    """The blocks' counts summed per bin end, in bin-end order (all of one layout: one width)."""
    if not blocks:
        return np.zeros((0, 0))
    ends = np.concatenate([b.ends for b in blocks])
    counts = np.concatenate([b.counts for b in blocks]) if len(blocks) > 1 else blocks[0].counts
    keys, where = np.unique(ends, return_inverse=True)
    out = np.zeros((len(keys), counts.shape[1]))
    np.add.at(out, where, counts)
    return out


def _qvalue(result) -> QuantileValueRead:
    return QuantileValueRead(value=result.value, lower_bound=result.lower_bound,
                             fixed_monotonicity=result.fixed_monotonicity, bucket_low=result.bucket_low,
                             bucket_high=result.bucket_high)


def _pairs(bounds: Sequence[float], counts: Sequence[float] | None) -> list[tuple[float, float]]:
    if counts is None:
        return []
    return list(zip((*bounds, math.inf), counts))


def _verdict(v) -> VerdictRead:
    data = {f.name: getattr(v, f.name) for f in fields(v)}  # the domain's Verdict, field for field (all
    # scalars, so no deep copy as dataclasses.asdict makes)
    data["ci_low"], data["ci_high"] = data["delta_low"], data["delta_high"]
    return VerdictRead(**{k: data[k] for k in VerdictRead.model_fields if k in data})


def compare(
    metric: str, *, spec_bins: Sequence[HistogramBin | HistogramBlock],
    base_bins: Sequence[HistogramBin | HistogramBlock] | None,
    baseline: BaselineRefRead | None, layouts: Mapping[int, Sequence[float]],
    quantiles: Sequence[float] = QUANTILES,
) -> LatencyMetricRead:
    label, description = LABELS[metric]
    spec = Histograms(spec_bins)
    base = Histograms(base_bins) if base_bins is not None else None
    out = LatencyMetricRead(metric=metric, label=label, description=description, baseline=baseline,
                            spec_mean=spec.mean, spec_count=spec.count,
                            baseline_mean=base.mean if base else None, baseline_count=base.count if base else None)
    if spec.layout_id is None:
        return out
    bounds = tuple(layouts[spec.layout_id])
    out.bucket_bounds = list(bounds)
    mismatch = base is not None and base.layout_id is not None and base.layout_id != spec.layout_id
    out.layout_mismatch = mismatch or len(spec.layouts) > 1
    base_usable = base is not None and base.layout_id is not None and not mismatch
    # one bootstrap for all the quantiles (the same draws per quantile as one verdict at a time)
    verdicts = latency_verdicts(spec.samples, base.samples, bounds, quantiles) if base_usable else []
    for i, q in enumerate(quantiles):
        sq = histogram_quantile(q, _pairs(bounds, spec.counts))
        row = QuantileCompareRead(q=q, spec=_qvalue(sq))
        if base_usable:
            bq = histogram_quantile(q, _pairs(bounds, base.counts))
            d = quantile_delta(sq, bq)
            row.baseline = _qvalue(bq)
            row.delta, row.delta_rel, row.delta_kind = d.delta, d.delta_rel, d.kind
            row.verdict = _verdict(verdicts[i])
            row.resolved = row.verdict.resolved
        elif base is not None and base.layout_id is not None:
            row.verdict = VerdictRead(verdict="inconclusive", reason="spec and baseline histograms use "
                                      "different bucket layouts", n_spec=len(spec.samples),
                                      n_base=len(base.samples))
        out.quantiles.append(row)
    return out
