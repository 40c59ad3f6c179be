"""α and τ by concurrency band from per-request records, and the `load_instability` rule. Pure: no I/O.

A record's concurrency is the engine's running requests when it finished: the record's own
`running_requests` when it sent one (basis "record"), else the engine pool's mean of
vllm:num_requests_running over the bucket the record finished in (basis "pool"). Bands are those of
backend.domain.bands ("1-8", "9-32", "33-128", ">128"); a record with neither has no band.

Input: sums over the records of one (bucket, band) group (`LoadSums`). Per band:

* pooled α = Σa / Σd with the ratio estimator's 95 % interval (the request is the unit,
  `request_stats.pooled_alpha_interval`), request-weighted α = mean of per-request α ± z·sd/√n,
  τ = 1 + Σa / Σsteps (accepted tokens per verify step, plus the bonus token) with its interval;
* dispersion φ: the Pearson statistic of the bucket-to-bucket α, Σ_b d_b (α_b − α)² / (α(1 − α)), over
  its degrees of freedom B − 1 (B buckets with drafts). Per-bucket α that differ only by sampling noise give
  φ near a constant set by how tokens cluster in requests (1 for independent tokens); a load at which
  acceptance swings from minute to minute raises it.

The rule compares the bands above `boundary` (running requests, one of the band edges) with those at or
below it (the low-load reference), per class:

* level: d = α_low − α_high with the standard error √(se_low² + se_high²) (as `context_drift`); "falls"
  when the 95 % interval of d lies wholly above `margin`;
* dispersion: ratio = φ_high / φ_low, each side's φ summed over its bands (each band against its own α,
  so a level difference between the low bands is not read as instability); the ratio is F-distributed
  with (df_high, df_low) degrees of freedom when both sides are equally stable, so its 95 % interval is
  ratio / F(0.975; df_high, df_low) .. ratio · F(0.975; df_low, df_high); "unstable" when the interval lies
  wholly above `dispersion_ratio`.

Breached when either holds; ok once d's interval starts at or below margin − recover_margin AND the ratio's
starts at or below `recover_dispersion_ratio`; hold in between (no flapping). Each side needs `min_drafts`
drafts (verify steps) and two requests, else no_data. Fewer than MIN_BUCKETS buckets on a side (or no
spread on the low side): the dispersion is not determined and the level alone decides.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scipy.stats import f as f_dist

from backend.domain import request_stats
from backend.domain.alerting import Evaluation
from backend.domain.bands import BAND_EDGES, band_labels
from backend.domain.context_drift import ContextSums

MIN_BUCKETS = 3  # per side, for the dispersion test (two degrees of freedom)
RECORD, POOL = "record", "pool"


@dataclass(frozen=True)
class LoadSums(ContextSums):
    """Sums over the requests of one (bucket, band) group, or of several: ContextSums's (drafts = Σsteps),
    and the ones below. llama.cpp records carry no verify steps, older SGLang ones no draft tokens: those
    sums are then not exposed, never 0."""

    sss: float = 0.0  # Σsteps²
    sas: float = 0.0  # Σa·steps
    alpha_sum: float = 0.0  # Σα of per-request α
    alpha_sq: float = 0.0  # Σα²
    from_record: int = 0  # requests whose band is the record's own running_requests
    from_pool: int = 0  # ... the pool's mean running requests over the bucket
    with_steps: int = 0  # requests that reported verify steps
    with_draft_tokens: int = 0  # ... and draft tokens


def band_label(index: int | None, edges: Sequence[int] = BAND_EDGES) -> str | None:
    """The label of the SQL band index (running <= edges[i] -> i; above every edge -> len(edges))."""
    return None if index is None else band_labels(edges)[index]


def tau_interval(s: LoadSums, z: float = request_stats.Z95) -> tuple[float | None, float | None, float | None]:
    """(τ, low, high): τ = 1 + Σa / Σsteps, the ratio estimator's interval (the request the unit) on Σa/Σsteps."""
    if not s.drafts:
        return None, None, None
    r = s.accepted / s.drafts
    se = request_stats.pooled_alpha_se(s.requests, s.accepted, s.drafts, s.saa, s.sss, s.sas)
    if se is None:
        return 1 + r, None, None
    return 1 + r, 1 + max(0.0, r - z * se), 1 + r + z * se


def request_weighted(s: LoadSums) -> tuple[float | None, float | None]:
    """(mean, sample sd) of per-request α from Σα and Σα²."""
    n = s.requests
    if n == 0:
        return None, None
    mean = s.alpha_sum / n
    if n < 2:
        return mean, None
    return mean, math.sqrt(max(s.alpha_sq - n * mean * mean, 0.0) / (n - 1))


def pearson(buckets: Iterable[LoadSums]) -> tuple[float, int] | None:
    """(X², B − 1) of per-bucket α against their pooled α: Σ_b d_b (α_b − α)² / (α(1 − α)); None with fewer
    than two buckets with drafts or a pooled α of 0 or 1 (no spread possible)."""
    bs = [b for b in buckets if b.draft_tokens > 0]
    d = sum(b.draft_tokens for b in bs)
    if len(bs) < 2 or not d:
        return None
    alpha = sum(b.accepted for b in bs) / d
    if alpha <= 0 or alpha >= 1:
        return None
    x2 = sum(b.draft_tokens * (b.accepted / b.draft_tokens - alpha) ** 2 for b in bs) / (alpha * (1 - alpha))
    return x2, len(bs) - 1


def dispersion(buckets: Iterable[LoadSums]) -> float | None:
    """φ = X² / (B − 1) of one band's buckets (see pearson); None when not defined."""
    p = pearson(buckets)
    return p[0] / p[1] if p else None


Groups = Iterable[tuple[object, int | None, LoadSums]]  # (bucket start, band index or None, sums)


def by_band(groups: Groups) -> dict[int | None, dict[object, LoadSums]]:
    """band index -> bucket -> sums (groups of one bucket and band, e.g. of the two bases, added)."""
    out: dict[int | None, dict[object, LoadSums]] = defaultdict(dict)
    for bucket, band, s in groups:
        cur = out[band].get(bucket)
        out[band][bucket] = s if cur is None else cur + s
    return out


def total(sums: Iterable[LoadSums]) -> LoadSums:
    out = LoadSums()
    for s in sums:
        out = out + s
    return out


def basis(s: LoadSums) -> str | None:
    """Where a band's requests got their concurrency: "record", "pool", or "record and pool"."""
    if s.from_record and s.from_pool:
        return "record and pool"
    return RECORD if s.from_record else POOL if s.from_pool else None


@dataclass(frozen=True)
class Side:
    """One side of the comparison: its bands' sums, and its Pearson statistic summed over its bands."""

    sums: LoadSums
    x2: float
    df: int
    buckets: int

    @property
    def phi(self) -> float | None:
        return self.x2 / self.df if self.df else None


def side(bands: dict[int | None, dict[object, LoadSums]], indices: Iterable[int]) -> Side:
    sums, x2, df, buckets = LoadSums(), 0.0, 0, 0
    for i in indices:
        per_bucket = bands.get(i, {})
        sums = sums + total(per_bucket.values())
        buckets += sum(1 for b in per_bucket.values() if b.draft_tokens > 0)
        p = pearson(per_bucket.values())
        if p:
            x2, df = x2 + p[0], df + p[1]
    return Side(sums, x2, df, buckets)


def split(bands: dict[int | None, dict[object, LoadSums]], boundary: int,
          edges: Sequence[int] = BAND_EDGES) -> tuple[Side, Side]:
    """(low, high): the bands whose upper edge is at or below `boundary` (running requests), and the others."""
    if boundary not in edges:
        raise ValueError(f"boundary must be a band edge ({', '.join(map(str, edges))}), got {boundary}")
    cut = list(edges).index(boundary) + 1
    return side(bands, range(cut)), side(bands, range(cut, len(edges) + 1))


def ratio_interval(high: Side, low: Side, z_level: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """(φ_high / φ_low, low, high) with the F interval; None parts when not determined."""
    if high.df < MIN_BUCKETS - 1 or low.df < MIN_BUCKETS - 1 or not low.phi or high.phi is None:
        return None, None, None
    ratio = high.phi / low.phi
    q = 1 - (1 - z_level) / 2
    return ratio, ratio / float(f_dist.ppf(q, high.df, low.df)), ratio * float(f_dist.ppf(q, low.df, high.df))


def load_instability(low: Side, high: Side, *, boundary: int, margin: float, recover_margin: float,
                     dispersion_ratio: float, recover_dispersion_ratio: float, min_drafts: float,
                     window: float | None = None, z: float = request_stats.Z95) -> Evaluation:
    """One evaluation of the rule (see the module docstring). value: α_high; threshold: α_low − margin."""
    a_l, a_h = low.sums.alpha, high.sums.alpha
    diff = a_l - a_h if a_l is not None and a_h is not None else None
    se_l, se_h = low.sums.se, high.sums.se
    se = math.sqrt(se_l ** 2 + se_h ** 2) if se_l is not None and se_h is not None else None
    d_lo = diff - z * se if diff is not None and se is not None else None
    d_hi = diff + z * se if diff is not None and se is not None else None
    ratio, r_lo, r_hi = ratio_interval(high, low)
    line = a_l - margin if a_l is not None else None
    values = {"window": window, "boundary_running_requests": boundary, "alpha_low_load": a_l, "alpha_high_load": a_h,
              "difference": diff, "difference_interval": [d_lo, d_hi], "margin": margin,
              "recover_margin": recover_margin, "dispersion_low_load": low.phi, "dispersion_high_load": high.phi,
              "dispersion_ratio": ratio, "dispersion_ratio_interval": [r_lo, r_hi],
              "dispersion_ratio_limit": dispersion_ratio, "recover_dispersion_ratio": recover_dispersion_ratio,
              "buckets_low_load": low.buckets, "buckets_high_load": high.buckets,
              "drafts_low_load": low.sums.drafts, "drafts_high_load": high.sums.drafts,
              "requests_low_load": low.sums.requests, "requests_high_load": high.sums.requests,
              "min_drafts": min_drafts, "falls": False, "unstable": False}
    for name, s in (("low", low), ("high", high)):
        if s.sums.requests and not s.sums.with_steps:
            return Evaluation("no_data", a_h, line, "verify steps are not exposed by these records (llama.cpp "
                              "reports none per request): the volume guard on drafts cannot be applied", values)
        if s.sums.drafts < min_drafts or s.sums.requests < 2 or s.sums.alpha is None:
            where = f"at or below {boundary}" if name == "low" else f"above {boundary}"
            return Evaluation("no_data", a_h, line, f"too little volume with {where} running requests "
                              f"({s.sums.drafts:.0f} drafts from {s.sums.requests} requests; at least "
                              f"{min_drafts:.0f} drafts and 2 requests needed)", values)
    assert diff is not None and d_lo is not None and a_l is not None and a_h is not None
    falls = d_lo > margin
    unstable = r_lo is not None and r_lo > dispersion_ratio
    values["falls"], values["unstable"] = falls, unstable
    text = (f"alpha {a_h:.3f} above {boundary} running requests vs {a_l:.3f} at or below: difference {diff:.3f}, "
            f"95 % interval {d_lo:.3f} to {d_hi:.3f}, margin {margin:g}; ")
    if ratio is None:
        text += "bucket-to-bucket dispersion not determined (too few buckets)"
    else:
        text += (f"dispersion {high.phi:.2f} vs {low.phi:.2f}, ratio {ratio:.2f} (95 % {r_lo:.2f} to {r_hi:.2f}), "
                 f"limit {dispersion_ratio:g}")
    if falls or unstable:
        what = " and ".join(w for w, on in (("falls", falls), ("becomes unstable", unstable)) if on)
        return Evaluation("breached", a_h, line, f"acceptance {what} above {boundary} running requests: {text}",
                          values)
    if d_lo <= margin - recover_margin and (r_lo is None or r_lo <= recover_dispersion_ratio):
        return Evaluation("ok", a_h, line, text, values)
    return Evaluation("hold", a_h, line, text + " (inside the recovery band)", values)


@dataclass(frozen=True)
class RuleParams:
    """The rule's parameters (the module's docstring says what each does)."""

    boundary: int = 32  # running requests: the bands above it are the high-load side
    margin: float = 0.05
    recover_margin: float = 0.02
    dispersion_ratio: float = 2.0
    recover_dispersion_ratio: float = 1.5
    min_drafts: float = 1000.0  # per side


def evaluate(groups: Groups, params: RuleParams, *, window: float | None = None) -> Evaluation:
    """The rule on one class's groups: what both the page's finding and the alert call."""
    low, high = split(by_band(groups), params.boundary)
    return load_instability(low, high, boundary=params.boundary, margin=params.margin,
                            recover_margin=params.recover_margin, dispersion_ratio=params.dispersion_ratio,
                            recover_dispersion_ratio=params.recover_dispersion_ratio, min_drafts=params.min_drafts,
                            window=window)


def band_table(groups: Groups, *, boundary: int = RuleParams.boundary,
               edges: Sequence[int] = BAND_EDGES, z: float = request_stats.Z95) -> tuple[list[dict], LoadSums]:
    """The API's `by_concurrency` rows of one class, in band order (bands with no record left out), and the
    sums of the records without a band. Each row: its band, requests and drafts, pooled and request-weighted
    α and τ with 95 % intervals, which basis its requests used, its buckets and dispersion, and its α and
    dispersion against the low-load reference (the bands at or below `boundary`)."""
    bands = by_band(groups)
    low, _high = split(bands, boundary, edges)
    labels = band_labels(edges)
    rows = []
    for i, label in enumerate(labels):
        per_bucket = bands.get(i)
        if not per_bucket:
            continue
        s = total(per_bucket.values())
        pooled, lo, hi = request_stats.pooled_alpha_interval(s.requests, s.accepted, s.draft_tokens, s.saa, s.sdd, s.sad, z)
        mean, sd = request_weighted(s)
        weighted, wlo, whi = request_stats.mean_alpha_interval(s.requests, mean, sd, z)
        tau, tlo, thi = tau_interval(s, z)
        phi = dispersion(per_bucket.values())
        rows.append({
            "band": label, "requests": s.requests, "drafts": s.drafts if s.with_steps else None,
            "draft_tokens": s.draft_tokens if s.with_draft_tokens else None,
            "accepted_tokens": s.accepted, "draft_token_weighted_alpha": pooled,
            "draft_token_weighted_alpha_interval": [lo, hi], "request_weighted_alpha": weighted,
            "request_weighted_alpha_interval": [wlo, whi], "mean_acceptance_length": tau,
            "mean_acceptance_length_interval": [tlo, thi], "basis": basis(s),
            "requests_by_basis": {RECORD: s.from_record, POOL: s.from_pool},
            "buckets": sum(1 for b in per_bucket.values() if b.draft_tokens > 0), "dispersion": phi,
            "alpha_vs_low_load": pooled - low.sums.alpha if pooled is not None and low.sums.alpha is not None
            else None,
            "dispersion_vs_low_load": phi / low.phi if phi is not None and low.phi else None})
    return rows, total(bands.get(None, {}).values())


def operating_band(weights: dict[str | None, float | None]) -> str | None:
    """The band a pool mostly runs in: the band label with the largest weight (e.g. drafts or output tokens
    per band); ties go to the lower band; None without a band of positive weight."""
    order = {b: i for i, b in enumerate(band_labels())}
    best = [(w, -order.get(b, len(order)), b) for b, w in weights.items() if b is not None and w and w > 0]
    return max(best)[2] if best else None
