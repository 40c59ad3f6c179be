"""Capacity and money: output-token throughput, cost per million output tokens and what speculation saves.

Pure math over additive sums (no I/O). One *side* (the speculative pool or its baseline) in one concurrency
band is a list of time bins, each with summed

  * ``tokens``: increases of ``vllm:generation_tokens_total`` (output tokens, accepted drafts and the bonus
    token included),
  * ``seconds``: bucket-seconds covered (buckets x bucket width),
  * ``replica_seconds``: replicas x seconds (``None`` when the replica count is unknown),
  * ``request_seconds``: Σ running_mean x bucket width, i.e. running-request-seconds.

Every rate is a sum, then a ratio (never a mean of per-bin ratios):

  throughput (tokens/s)        = Σ tokens / Σ seconds
  per replica (tokens/s)       = Σ tokens / Σ replica_seconds
  per running request (tok/s)  = Σ tokens / Σ request_seconds
  cost per 1 M output tokens   = replica_hour_price x (Σ replica_seconds / 3600) / Σ tokens x 1e6,
  replica_hour_price           = gpu_hour_price x gpus_per_replica.

Spec vs baseline is compared **within the same concurrency band** only (domain.bands): the baseline's cost per
token in band b is what the spec pool's band-b tokens would have cost without speculation, so

  saving_b = tokens_spec,b / 1e6 x (cost_base,b - cost_spec,b)      (negative: a loss)
  saved in this window            = Σ_b saving_b over the bands both sides have,
  per week at this window's rate  = saved in this window x 604800 / window seconds (extrapolated to 7 days),
  saved this week so far          = saved in the window [week start, min(week end, now)) (the weekly report),
                                    shown with the hours of data it rests on (``money.hours_of_data``).

Three figures, three names (domain.money: every surface labels them and formats money there).

Spec tokens in bands without a baseline are not priced (``compared_fraction`` says how much was).

Uncertainty: a percentile bootstrap over time bins (the same resampling unit as domain.verdict: observations
inside one time bin are correlated). Each replicate redraws, per band and per side independently, the bins
with replacement and recomputes both costs per token from the resampled sums; the observed spec token volume
is held fixed (it is counted exactly; what is uncertain is the cost per token). The interval is the
(1 - confidence)/2 and (1 + confidence)/2 percentiles of the replicates. A band with fewer than ``min_bins``
bins on a side (typically a transition between two loads) has no interval of its own; its point saving enters
the total's replicates as a constant, and ``Money.fixed_bands`` names it (the interval then leaves that band's
sampling noise out). Deterministic for a seed.

Where speculation stops paying: per band, the per-replica throughput ratio spec / baseline (= cost_base /
cost_spec); ``stops_paying_band`` is the lowest band whose ratio is below 1 (verify cost grows with the batch,
so this is usually the top band), ``stops_paying_significant`` whether its interval lies wholly below 1.

Undefined -> ``None``: no tokens, no seconds, unknown replicas or price, no baseline in any band.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from backend.domain.bands import BAND_EDGES, band_labels
from backend.domain.resample import draw_counts

WEEK_SECONDS = 7 * 86400
MILLION = 1_000_000.0
N_BOOT_MAX = 20_000
PRICE_MAX = 100_000.0  # per GPU-hour, any currency: far above any real price, refuses typos like 2.5e9


@dataclass(frozen=True)
class Bin:
    """Sums of one side over one time bin (within one concurrency band)."""

    tokens: float
    seconds: float
    replica_seconds: float | None = None
    request_seconds: float | None = None


@dataclass(frozen=True)
class SideRates:
    tokens: float | None
    seconds: float | None
    throughput: float | None  # tokens/s of the whole pool
    per_replica: float | None  # tokens/s per replica
    per_request: float | None  # tokens/s per running request
    replicas: float | None  # mean replicas over the covered seconds
    cost_per_mtok: float | None


@dataclass(frozen=True)
class BandComparison:
    band: str
    spec: SideRates
    base: SideRates | None
    ratio_per_replica: float | None  # spec / baseline tokens/s per replica (> 1: speculation pays)
    ratio_low: float | None
    ratio_high: float | None
    ratio_per_request: float | None  # spec / baseline tokens/s per running request
    saved_in_window: float | None  # over the window, this band's spec tokens
    saved_in_window_low: float | None
    saved_in_window_high: float | None
    pays: str | None  # "yes" | "no" | "uncertain" (interval spans 1) | None (no baseline)


@dataclass(frozen=True)
class Money:
    cost_per_mtok_spec: float | None  # over the compared bands
    cost_per_mtok_base: float | None  # the baseline's, weighted by the spec tokens per band
    saved_in_window: float | None  # over the window
    saved_in_window_low: float | None
    saved_in_window_high: float | None
    per_week_at_window_rate: float | None
    per_week_at_window_rate_low: float | None
    per_week_at_window_rate_high: float | None
    compared_fraction: float | None  # spec tokens in compared bands / all spec tokens in bands
    fixed_bands: tuple[str, ...] = ()  # bands whose saving entered the interval as a constant (too few bins)
    replicates: np.ndarray | None = field(default=None, repr=False, compare=False)  # saving per replicate


@dataclass(frozen=True)
class Capacity:
    spec: SideRates
    base: SideRates | None
    bands: list[BandComparison]
    money: Money
    stops_paying_band: str | None
    stops_paying_significant: bool | None
    n_boot: int
    confidence: float
    seed: int


# --- scalar rates ----------------------------------------------------------------------------------------


def _pos(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) and x > 0 else None


def rate(tokens: float | None, seconds: float | None) -> float | None:
    """tokens / seconds. Edge cases: ``None``/NaN/negative tokens -> ``None``; seconds <= 0 -> ``None``."""
    s = _pos(seconds)
    if tokens is None or s is None:
        return None
    t = float(tokens)
    return t / s if math.isfinite(t) and t >= 0 else None


def check_price(gpu_hour_price: float) -> float:
    p = float(gpu_hour_price)
    if not math.isfinite(p) or p <= 0 or p > PRICE_MAX:
        raise ValueError(f"GPU-hour price must be in (0, {PRICE_MAX:g}], got {gpu_hour_price!r}")
    return p


def replica_hour_price(gpu_hour_price: float | None, gpus_per_replica: int) -> float | None:
    """gpu_hour_price x gpus_per_replica. ``None`` price -> ``None``; price outside (0, 1e5] or GPUs not an
    integer in 1..1024 -> ``ValueError``."""
    if isinstance(gpus_per_replica, bool) or int(gpus_per_replica) != gpus_per_replica or not 1 <= gpus_per_replica <= 1024:
        raise ValueError(f"gpus_per_replica must be an integer in 1..1024, got {gpus_per_replica!r}")
    return None if gpu_hour_price is None else check_price(gpu_hour_price) * int(gpus_per_replica)


def cost_per_mtok(price_per_replica_hour: float | None, per_replica_tokens_per_second: float | None) -> float | None:
    """Cost of one million output tokens: price / (tokens/s per replica x 3600) x 1e6.

    Edge cases: either ``None`` -> ``None``; a throughput <= 0 (nothing produced) -> ``None``.
    """
    thr = _pos(per_replica_tokens_per_second)
    if price_per_replica_hour is None or thr is None:
        return None
    return float(price_per_replica_hour) / (thr * 3600.0) * MILLION


def per_week(amount: float | None, window_seconds: float | None) -> float | None:
    """amount x 604800 / window_seconds: the window's rate over 7 days. ``None`` or window <= 0 -> ``None``."""
    w = _pos(window_seconds)
    return None if amount is None or w is None else amount * WEEK_SECONDS / w



# --- replica counts over a pool's history -----------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaHistory:
    """How many replicas a pool ran, along its history: `configured` (SPECWATCH_POOL_REPLICAS) until
    `observed_from` (the start of the pool's first per-replica row), `observed` (the window's mean from those
    rows) from then on. observed_from None: one count for the whole window (`observed` if known, else
    `configured`). A count that is unknown on one side takes the other's (never a hole in the costs)."""

    observed: float | None
    configured: float | None
    observed_from: float | None = None  # unix seconds

    def at(self, start: float, end: float) -> float | None:
        """The replica count over (start, end]: time-weighted between the two counts when it straddles
        observed_from (exact when bins and replica rows share a grid)."""
        obs = self.observed if self.observed is not None else self.configured
        conf = self.configured if self.configured is not None else self.observed
        if self.observed_from is None or self.observed is None:
            return obs
        if end <= self.observed_from:
            return conf
        if start >= self.observed_from or end <= start:
            return obs
        before = (self.observed_from - start) / (end - start)
        return before * conf + (1 - before) * obs  # type: ignore[operator]

    def changes_in(self, start: float, end: float) -> bool:
        """The count's source changes inside (start, end] and the two counts differ."""
        return (self.observed_from is not None and start < self.observed_from < end and self.observed is not None
                and self.configured is not None and self.observed != self.configured)


# --- sides and bands -------------------------------------------------------------------------------------


def _sums(bins: Sequence[Bin]) -> tuple[float, float, float | None, float | None]:
    tok = sum(b.tokens for b in bins)
    sec = sum(b.seconds for b in bins)
    rs = None if any(b.replica_seconds is None for b in bins) or not bins else sum(b.replica_seconds for b in bins)
    qs = None if any(b.request_seconds is None for b in bins) or not bins else sum(b.request_seconds for b in bins)
    return tok, sec, rs, qs


def side_rates(bins: Sequence[Bin], price_per_replica_hour: float | None) -> SideRates:
    """Throughputs and cost per 1 M tokens of one side from its bins' sums. Empty -> all ``None``."""
    if not bins:
        return SideRates(None, None, None, None, None, None, None)
    tok, sec, rs, qs = _sums(bins)
    per_replica = rate(tok, rs)
    return SideRates(tokens=tok, seconds=sec, throughput=rate(tok, sec), per_replica=per_replica,
                     per_request=rate(tok, qs), replicas=rate(rs, sec) if rs is not None else None,
                     cost_per_mtok=cost_per_mtok(price_per_replica_hour, per_replica))


def _boot_q(rng: np.random.Generator, bins: Sequence[Bin], n_boot: int) -> np.ndarray:
    """Replicates of replica-seconds per token (Σ replica_seconds / Σ tokens; the cost per token is this x the
    price per replica-second); NaN where a replicate drew no tokens."""
    w = draw_counts(rng, len(bins), n_boot)
    tok = w @ np.array([b.tokens for b in bins], dtype=float)
    rs = w @ np.array([b.replica_seconds for b in bins], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tok > 0, rs / tok, np.nan)


def _pct(values: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return None, None
    lo, hi = np.percentile(v, [50 * (1 - confidence), 50 * (1 + confidence)])
    return float(lo), float(hi)


def _check(n_boot: int, confidence: float, min_bins: int) -> None:
    if isinstance(n_boot, bool) or int(n_boot) != n_boot or not 1 <= n_boot <= N_BOOT_MAX:
        raise ValueError(f"n_boot must be an integer in 1..{N_BOOT_MAX}, got {n_boot!r}")
    if not 0 < float(confidence) < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if isinstance(min_bins, bool) or int(min_bins) != min_bins or min_bins < 1:
        raise ValueError(f"min_bins must be an integer >= 1, got {min_bins!r}")


def _validate(bins: Sequence[Bin]) -> None:
    for b in bins:
        vals = [b.tokens, b.seconds] + [v for v in (b.replica_seconds, b.request_seconds) if v is not None]
        if any(not math.isfinite(float(v)) or float(v) < 0 for v in vals):
            raise ValueError(f"a time bin's sums must be finite and >= 0, got {b!r}")


def compare(
    spec: Mapping[str, Sequence[Bin]], base: Mapping[str, Sequence[Bin]] | None, *,
    gpu_hour_price: float | None, gpus_per_replica: int = 1, window_seconds: float | None,
    n_boot: int = 1000, confidence: float = 0.95, seed: int = 0, min_bins: int = 2,
    band_order: Sequence[str] | None = None,
) -> Capacity:
    """Spec vs baseline per concurrency band (keys: band labels), and the money over the window.

    ``spec``/``base`` map band label -> time bins. ``band_order`` (default: domain.bands' labels) orders the
    bands; a label not in it sorts last. Edge cases: no baseline, no price or unknown replicas -> the money
    fields are ``None`` (throughputs stay); invalid price, GPUs, n_boot, confidence, min_bins or a negative /
    non-finite bin sum -> ``ValueError``.
    """
    _check(n_boot, confidence, min_bins)
    for bins in [*spec.values(), *((base or {}).values())]:
        _validate(bins)
    price = replica_hour_price(gpu_hour_price, gpus_per_replica)
    order = list(band_order or band_labels(BAND_EDGES))
    bands = sorted(set(spec) | set(base or {}), key=lambda b: (order.index(b) if b in order else len(order), b))
    rng = np.random.default_rng(seed)
    all_spec = [b for band in bands for b in spec.get(band, ())]
    all_base = [b for band in bands for b in (base or {}).get(band, ())]
    rows: list[BandComparison] = []
    saving_total, reps_total, compared_tok, spec_tok, cost_spec_num, cost_base_num = 0.0, None, 0.0, 0.0, 0.0, 0.0
    any_saving, fixed, fixed_total = False, [], 0.0
    for band in bands:
        s_bins, b_bins = list(spec.get(band, ())), list((base or {}).get(band, ()))
        if not s_bins:
            continue
        s = side_rates(s_bins, price)
        spec_tok += s.tokens or 0.0
        if not b_bins:
            rows.append(BandComparison(band, s, None, None, None, None, None, None, None, None, None))
            continue
        b = side_rates(b_bins, price)
        ratio = s.per_replica / b.per_replica if s.per_replica and b.per_replica else None
        ratio_req = s.per_request / b.per_request if s.per_request and b.per_request else None
        saving = None
        if s.cost_per_mtok is not None and b.cost_per_mtok is not None:
            saving = s.tokens / MILLION * (b.cost_per_mtok - s.cost_per_mtok)
            saving_total += saving
            compared_tok += s.tokens
            cost_spec_num += s.tokens * s.cost_per_mtok
            cost_base_num += s.tokens * b.cost_per_mtok
            any_saving = True
        r_lo = r_hi = sv_lo = sv_hi = None
        if ratio is not None and len(s_bins) >= min_bins and len(b_bins) >= min_bins:
            qs, qb = _boot_q(rng, s_bins, n_boot), _boot_q(rng, b_bins, n_boot)
            with np.errstate(divide="ignore", invalid="ignore"):
                r_lo, r_hi = _pct(qb / qs, confidence)
            if saving is not None:
                reps = s.tokens * price / 3600.0 * (qb - qs)
                sv_lo, sv_hi = _pct(reps, confidence)
                reps_total = reps if reps_total is None else reps_total + reps
        if saving is not None and sv_lo is None:
            fixed.append(band)
            fixed_total += saving
        pays = None
        if ratio is not None:
            if r_lo is not None and r_lo > 1:
                pays = "yes"
            elif r_hi is not None and r_hi < 1:
                pays = "no"
            else:
                pays = "uncertain"
        rows.append(BandComparison(band, s, b, ratio, r_lo, r_hi, ratio_req, saving, sv_lo, sv_hi, pays))

    stop = next((r for r in rows if r.ratio_per_replica is not None and r.ratio_per_replica < 1), None)
    if any_saving:
        if reps_total is not None:
            reps_total = reps_total + fixed_total
        lo, hi = _pct(reps_total, confidence) if reps_total is not None else (None, None)
        money = Money(
            cost_per_mtok_spec=cost_spec_num / compared_tok if compared_tok else None,
            cost_per_mtok_base=cost_base_num / compared_tok if compared_tok else None,
            saved_in_window=saving_total, saved_in_window_low=lo, saved_in_window_high=hi,
            per_week_at_window_rate=per_week(saving_total, window_seconds),
            per_week_at_window_rate_low=per_week(lo, window_seconds), per_week_at_window_rate_high=per_week(hi, window_seconds),
            compared_fraction=compared_tok / spec_tok if spec_tok else None, fixed_bands=tuple(fixed),
            replicates=reps_total)
    else:
        money = Money(None, None, None, None, None, None, None, None,
                      compared_fraction=0.0 if spec_tok and base else None)
    return Capacity(
        spec=side_rates(all_spec, price), base=side_rates(all_base, price) if all_base else None, bands=rows,
        money=money, stops_paying_band=stop.band if stop else None,
        stops_paying_significant=(stop.pays == "no") if stop else None,
        n_boot=int(n_boot), confidence=float(confidence), seed=int(seed))


def total_saving(parts: Sequence[Money], *, window_seconds: float | None, confidence: float = 0.95) -> Money:
    """The sum of several comparisons' savings (a model's classes, the fleet's models). Their bootstraps are
    independent with equally many replicates, so the replicate-wise sum is a bootstrap of the sum; the interval
    is ``None`` when any part has none. No part with a saving -> all ``None``."""
    have = [m for m in parts if m.saved_in_window is not None]
    if not have:
        return Money(None, None, None, None, None, None, None, None, None)
    saving = sum(m.saved_in_window for m in have)
    reps = None
    if all(m.replicates is not None for m in have) and len({m.replicates.shape for m in have}) == 1:
        reps = np.sum([m.replicates for m in have], axis=0)
    lo, hi = _pct(reps, confidence) if reps is not None else (None, None)
    fixed = tuple(b for m in have for b in m.fixed_bands)
    return Money(None, None, saving, lo, hi, per_week(saving, window_seconds), per_week(lo, window_seconds),
                 per_week(hi, window_seconds), None, fixed, reps)
