"""Summary per model x traffic class (and the pooled `mixed` row): acceptance, operating point, latency.

Flow: fetch (three set-based queries over the window for a set of pools) -> per class, sum counters
across the class's pools -> domain functions for every ratio. The same fetched data serves the fleet
overview and the /metrics gauges, so they always agree with the summary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TypeVar

from pydantic_core import to_jsonable_python
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries, routing
from backend.db.models import Pool
from backend.domain import acceptance as acc
from backend.domain import pool_rows, request_stats
from backend.domain.bands import BAND_EDGES
from backend.domain.mix import pooled
from backend.domain.resolution import Unresolved, advise
from backend.domain.step_overhead import ITL_NOT_PER_STEP, LatencySums, SpeedupCheck, itl_not_per_step
from backend.schemas.common import PoolRefRead, WindowRead
from backend.schemas.latency import BaselineRefRead
from backend.schemas.summary import (
    MIXED,
    ClassSummaryRead,
    DriftRead,
    FreshnessRead,
    ResolutionAdviceRead,
    SpeedupCheckRead,
    SummaryRead,
    VolumeRead,
)
from backend.services import latency
from backend.services.errors import UnknownModel
from backend.services.operating_point import band_label, operating_point, relabel
from backend.services.totals import PoolTotals, Totals, group_rows, total
from backend.services.windows import Range, verdict_bin_seconds

CHECK_BINS = 12  # time bins of a window for the jackknife of the speedup check
P = TypeVar("P")  # a pool: backend.db.models.Pool or backend.db.pool_list.PoolRow


@dataclass
class WindowData:
    totals: dict[int, PoolTotals]
    hist: dict[str, dict[int, list[queries.HistogramBlock]]]  # family -> pool id -> a block per layout
    layouts: dict[int, tuple[float, ...]]
    # pool id -> band index -> time bin -> ITL / TPOT sums: the spread behind the speedup check
    latency_bins: dict[int, dict[int | None, dict[int, LatencySums]]] = field(default_factory=dict)


def fetch(session: Session, *, pools: list[Pool], rng: Range, settings: Settings,
          families: tuple[str, ...] = ("itl", "tpot")) -> WindowData:
    ids = [p.id for p in pools]
    width = settings.bucket_seconds
    n_pos = max([p.num_spec_tokens or 0 for p in pools] + [1])
    rows = queries.window_totals(session, pool_ids=ids, start=rng.start, end=rng.end, bucket_seconds=width,
                                 n_pos=n_pos, band_edges=BAND_EDGES)
    longest = max([r.per_pos_len or 0 for r in rows] + [0])
    if longest > n_pos:  # a K larger than configured: sum every position the data holds
        rows = queries.window_totals(session, pool_ids=ids, start=rng.start, end=rng.end,
                                     bucket_seconds=width, n_pos=longest, band_edges=BAND_EDGES)
    layouts = queries.layout_bounds(session)
    n_counts = queries.count_width(layouts)
    bin_seconds = verdict_bin_seconds(data_seconds(pools, rng), bucket_seconds=width,
                                      max_samples=settings.verdict_max_samples)
    hist = queries.histogram_blocks(session, pool_ids=ids, families=families, start=rng.start, end=rng.end,
                                    bucket_seconds=width, bin_seconds=bin_seconds, n_counts=n_counts)
    bins: dict[int, dict[int | None, dict[int, LatencySums]]] = {}
    for b in queries.latency_bins(session, pool_ids=ids, start=rng.start, end=rng.end, bucket_seconds=width,
                                  target_bins=CHECK_BINS):
        bins.setdefault(b.pool_id, {}).setdefault(b.band_index, {})[b.bin] = LatencySums(
            b.itl_sum, b.itl_count, b.tpot_sum, b.tpot_count)
    return WindowData(totals=group_rows(rows), hist=hist, layouts=layouts, latency_bins=bins)


def _band_bins(data: WindowData, pools: list[Pool]) -> dict[str | None, dict[int, LatencySums]]:
    """The pools' latency sums per band label and time bin (pools summed)."""
    out: dict[str | None, dict[int, LatencySums]] = {}
    for p in pools:
        for idx, by_bin in data.latency_bins.get(p.id, {}).items():
            into = out.setdefault(band_label(idx), {})
            for b, sums in by_bin.items():
                into[b] = into[b] + sums if b in into else sums
    return out


def data_seconds(pools: Sequence[Pool], rng: Range) -> float:
    """The part of the window the pools reported in (first_seen .. last_seen, clipped to it): the latency
    verdict's time bins divide this span, so a week's window over an hour of data still gets about
    verdict_max_samples bins (not one or two hourly ones, which no verdict can rest on)."""
    if not pools:
        return rng.seconds
    lo = max(rng.start, min(p.first_seen for p in pools))
    hi = min(rng.end, max(p.last_seen for p in pools))
    return min(rng.seconds, max((hi - lo).total_seconds(), 0.0)) or rng.seconds


def pool_ref(p: Pool) -> PoolRefRead:
    return PoolRefRead(id=p.id, model_name=p.model_name, traffic_class=p.traffic_class, spec_mode=p.spec_mode,
                       num_spec_tokens=p.num_spec_tokens)


def freshness(pools: list[Pool], *, now: datetime, settings: Settings) -> FreshnessRead:
    """The stalest pool decides (a mix is only as fresh as its oldest class)."""
    if not pools:
        return FreshnessRead()
    return freshness_at(min(p.last_seen for p in pools), now=now, settings=settings)


def freshness_at(last: datetime, *, now: datetime, settings: Settings) -> FreshnessRead:
    age = (now - last).total_seconds()
    return FreshnessRead(last_seen=last, age_seconds=age, stale=age > settings.stale_after_seconds)


def _volume(p: Pool, data: WindowData) -> float:
    t = data.totals.get(p.id)
    return (t.all.tpot_count or 0.0) + (t.all.itl_count or 0.0) if t else 0.0


def pick_baseline(classes: set[str], base_pools: list[Pool], data: WindowData) -> tuple[list[Pool], str | None]:
    """Same-class baseline pools when every class has one; else the model's busiest baseline pool
    (for one class) or all its baseline pools (for a mix), labelled other-class."""
    same = [p for p in base_pools if p.traffic_class in classes]
    if same and {p.traffic_class for p in same} == classes:
        return same, "same-class"
    if not base_pools:
        return [], None
    if len(classes) == 1:
        return [max(base_pools, key=lambda p: (_volume(p, data), p.traffic_class))], "other-class"
    return list(base_pools), "other-class"


def _safe(fn, *args):
    try:
        return fn(*args)
    except ValueError:  # out-of-range inputs from flagged data: undefined, the flags say why
        return None


def class_summary(
    *, name: str, spec_mode: str, spec_pools: list[Pool], base_pools: list[Pool], data: WindowData,
    settings: Settings, now: datetime, quantiles: tuple[float, ...] = latency.QUANTILES,
) -> ClassSummaryRead:
    window = {p.id: data.totals[p.id].all if p.id in data.totals else Totals() for p in spec_pools}
    present = [p for p in spec_pools if window[p.id].has_spec_data]
    mix = pooled([window[p.id].class_totals(p.traffic_class) for p in spec_pools], name=name)
    pp = pooled([window[p.id].per_pos_totals(p.traffic_class) for p in present], name=name)
    tot = total(window[p.id] for p in present)
    ks = {p.num_spec_tokens for p in spec_pools}
    k = next(iter(ks)) if len(ks) == 1 else None
    flags: list[str] = [] if len(ks) <= 1 else ["k_differs_across_pools"]
    r = acc.acceptance_rate(mix.accepted, mix.draft_tokens)
    tau = acc.mean_acceptance_length(mix.accepted, mix.drafts)
    seed = acc.seed_alpha(mix.accepted, mix.drafts, k) if k else None
    if mix.drafts:
        flags += acc.check_invariants(mix.drafts, mix.draft_tokens, mix.accepted, mix.per_pos, k)
        if tot.drafts_with_per_pos is not None and tot.drafts_with_per_pos != tot.drafts:
            flags.append("per_position_partial")
    if tot.restarts:
        flags.append("restarts_in_window")
    drift = acc.drift_indicators(pp.per_pos, pp.drafts) if pp.per_pos is not None else None

    classes = {p.traffic_class for p in spec_pools}
    baseline_pools, match = pick_baseline(classes, base_pools, data)
    spec_bands = relabel(_merge_bands(data, present))
    base_bands = relabel(_merge_bands(data, baseline_pools)) if baseline_pools else None
    op = operating_point(tau=tau, seed_alpha=seed, k=k, running_mean=tot.running_mean, spec_bands=spec_bands,
                         base_bands=base_bands, spec_bins=_band_bins(data, present),
                         base_bins=_band_bins(data, baseline_pools) if baseline_pools else None, settings=settings,
                         engines=tuple(p.engine for p in (*present, *baseline_pools)))
    if itl_not_per_step(p.engine for p in (*present, *baseline_pools)) is not None:
        flags.append(ITL_NOT_PER_STEP)

    base_ref = None
    if baseline_pools:
        refs = [pool_ref(p) for p in baseline_pools]
        base_ref = BaselineRefRead(pool=refs[0], pools=refs, match=match)
    lat = {}
    for family in data.hist:
        spec_bins = [b for p in present or spec_pools for b in data.hist[family].get(p.id, [])]
        base_bins = [b for p in baseline_pools for b in data.hist[family].get(p.id, [])] if baseline_pools else None
        lat[family] = latency.compare(family, spec_bins=spec_bins, base_bins=base_bins, baseline=base_ref,
                                      layouts=data.layouts, quantiles=quantiles)
        if lat[family].layout_mismatch:
            flags.append(f"{family}_layout_mismatch")

    return ClassSummaryRead(
        traffic_class=name, spec_mode=spec_mode, num_spec_tokens=k, pools=[pool_ref(p) for p in present],
        acceptance_rate=r, seed_alpha=seed, mean_acceptance_length=tau,
        per_position_conditional=acc.per_position_conditional(pp.per_pos, pp.drafts),
        per_position_unconditional=acc.per_position_unconditional(pp.per_pos, pp.drafts),
        per_token_acceptance=_safe(acc.per_token_from_rate, r, k) if k and r is not None else None,
        per_token_acceptance_mle=acc.mle_per_token(pp.per_pos, pp.drafts),
        drift=DriftRead(last_to_first_ratio=drift.last_to_first_ratio, slope=drift.slope,
                        min_trials=drift.min_trials) if drift else None,
        eps_step=op.eps_step, eps_step_source=op.eps_step_source, eps_effective=op.eps_effective,
        break_even_alpha=op.break_even_alpha, margin=op.margin,
        speedup_margin=op.speedup_margin, estimated_speedup=op.estimated_speedup,
        measured_speedup=op.measured_speedup, speedup_check=check_read(op.check), running_mean=op.running_mean,
        concurrency_band=op.band,
        itl=lat.get("itl"), tpot=lat.get("tpot"), ttft=lat.get("ttft"),
        volume=VolumeRead(drafts=mix.drafts, draft_tokens=mix.draft_tokens, accepted_tokens=mix.accepted,
                          generation_tokens=tot.generation_tokens, finished_requests=tot.finished_requests,
                          buckets=tot.buckets, min_drafts=settings.min_drafts,
                          sufficient=(mix.drafts or 0) >= settings.min_drafts),
        freshness=freshness(present or spec_pools, now=now, settings=settings),
        data_quality=sorted(set(flags)),
        incomplete=bool(mix.missing),
        incomplete_reasons=[f"no data in the window for class {c!r}" for c in mix.missing],
    )


def check_read(c: SpeedupCheck | None) -> SpeedupCheckRead | None:
    return None if c is None else SpeedupCheckRead(**asdict(c))


def _merge_bands(data: WindowData, pools: list[Pool]) -> dict[int | None, Totals]:
    out: dict[int | None, Totals] = {}
    for p in pools:
        for idx, t in (data.totals[p.id].by_band.items() if p.id in data.totals else ()):
            out[idx] = out[idx] + t if idx in out else t
    return out


def model_rows(
    pools: list[Pool], data: WindowData, *, settings: Settings, now: datetime, with_mixed: bool = True,
    quantiles: tuple[float, ...] = latency.QUANTILES,
) -> list[tuple[pool_rows.Row, ClassSummaryRead]]:
    """One row per spec mode x class of the model (engine counters, or per-request records for a class the
    engine does not label: pool_rows.rows), then `mixed` per spec mode (the engine's totals), each with the
    pools it sums."""
    base = [p for p in pools if p.spec_mode == settings.baseline_mode]
    out = []
    for row in pool_rows.rows(pools, baseline_mode=settings.baseline_mode, default_class=settings.default_class):
        if row.traffic_class == MIXED and not with_mixed:
            continue
        s = class_summary(name=row.traffic_class, spec_mode=row.spec_mode, spec_pools=list(row.pools),
                          base_pools=base, data=data, settings=settings, now=now, quantiles=quantiles)
        s.source = row.source
        s.records_coverage = records_coverage(row, data)
        out.append((row, s))
    return out


def model_summaries(
    pools: list[Pool], data: WindowData, *, settings: Settings, now: datetime, with_mixed: bool = True,
    quantiles: tuple[float, ...] = latency.QUANTILES,
) -> list[ClassSummaryRead]:
    """One row per spec mode x class of the model's pools, then `mixed` per spec mode (model_rows)."""
    return [s for _, s in model_rows(pools, data, settings=settings, now=now, with_mixed=with_mixed,
                                     quantiles=quantiles)]


def records_coverage(row: pool_rows.Row, data: WindowData) -> float | None:
    """Draft tokens of the row's records ÷ draft tokens of its engine pools over the window (None without
    both): how much of the engine's traffic the per-request records describe."""
    if not row.records or not row.engine:
        return None

    def tokens(ps) -> float | None:
        vals = [data.totals[p.id].all.draft_tokens for p in ps if p.id in data.totals]
        vals = [v for v in vals if v is not None]
        return math.fsum(vals) if vals else None

    return request_stats.coverage(tokens(row.records), tokens(row.engine))


def model_pools(session: Session, model_name: str) -> list[Pool]:
    pools = queries.list_pools(session, model_name=model_name)
    if not pools:
        raise UnknownModel(model_name, queries.model_names(session))
    return pools


def pick_model(pools: Sequence[P], model_name: str) -> list[P]:
    """model_pools among `pools` (the whole pool list)."""
    chosen = [p for p in pools if p.model_name == model_name]
    if not chosen:
        raise UnknownModel(model_name, sorted({p.model_name for p in pools}))
    return chosen


def models_pools(session: Session, models: Sequence[str] | None) -> list[Pool]:
    """Every pool of these models (all pools when none are named); an unknown name raises UnknownModel."""
    return pick_models(queries.list_pools(session), models)


def pick_models(pools: Sequence[P], models: Sequence[str] | None) -> list[P]:
    """The pools of these models among `pools` (all when none are named); an unknown name raises
    UnknownModel, naming the known ones."""
    pools = list(pools)
    if models:
        known = sorted({p.model_name for p in pools})
        unknown = [m for m in models if m not in known]
        if unknown:
            raise UnknownModel(unknown[0], known)
        pools = [p for p in pools if p.model_name in set(models)]
    return pools


def summary(session: Session, *, model_name: str, rng: Range, now: datetime, settings: Settings) -> SummaryRead:
    return summary_of(session, pools=model_pools(session, model_name), model_name=model_name, rng=rng, now=now,
                      settings=settings)


def summary_of(session: Session, *, pools: Sequence[P], model_name: str, rng: Range, now: datetime,
               settings: Settings) -> SummaryRead:
    """The summary of these pools (model_pools: the model's, in the pool list's order)."""
    pools = list(pools)
    data = fetch(session, pools=pools, rng=rng, settings=settings)
    return SummaryRead(
        model_name=model_name, window=WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds),
        generated_at=now, alpha_threshold=settings.alpha_threshold,
        classes=(classes := model_summaries(pools, data, settings=settings, now=now)),
        baselines=[pool_ref(p) for p in pools if p.spec_mode == settings.baseline_mode],
        resolution_advice=resolution_advice(classes),
    )


def window_key(pools: Sequence[P], rng: Range, settings: Settings, *, binned_seconds: float) -> tuple:
    """What a window's reads depend on besides the stored data, for a cache that also keys by the data
    version (backend.api.cache): the pools; the buckets the window covers (those ending in (start, end]:
    on the bucket grid, the same for every instant within one bucket); the hours read from rollups instead;
    the time bins over `binned_seconds` (their width; they sit on multiples of it)."""
    w = settings.bucket_seconds
    a, b = rng.start.timestamp(), rng.end.timestamp()
    hours = routing.whole_hours(a, b)
    bin_seconds = verdict_bin_seconds(binned_seconds, bucket_seconds=w, max_samples=settings.verdict_max_samples)
    return (tuple(p.id for p in pools), math.floor(a / w), math.floor(b / w),
            None if hours is None else (hours.h1, hours.h2), bin_seconds)


def summary_key(pools: Sequence[P], rng: Range, settings: Settings) -> tuple:
    """window_key of a summary: its latency verdicts bin the part of the window the pools reported in."""
    return window_key(pools, rng, settings, binned_seconds=data_seconds(pools, rng))


def stamped(body: dict, *, rng: Range, now: datetime) -> dict:
    """A cached answer's JSON with the window and `generated_at` of the request at `now` for `rng`."""
    return body | {"window": WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds).model_dump(mode="json"),
                   "generated_at": to_jsonable_python(now)}


def summary_at(body: dict, lasts: Sequence[datetime | None], *, rng: Range, now: datetime,
               settings: Settings) -> dict:
    """A summary's JSON (`SummaryRead.model_dump(mode="json")`, computed at any instant with the same
    summary_key) as computed at `now` for `rng`: the window, `generated_at` and each class's freshness
    (from its stalest pool's `last_seen`, `lasts`, in class order) are the only fields that depend on them."""
    out = stamped(body, rng=rng, now=now)
    out["classes"] = [c if last is None else c | {"freshness": freshness_at(last, now=now, settings=settings)
                                                  .model_dump(mode="json")}
                      for c, last in zip(body["classes"], lasts, strict=True)]
    return out


def resolution_advice(classes: Sequence[ClassSummaryRead]) -> list[ResolutionAdviceRead]:
    """Once per model: the unresolved verdicts of every class and quantile, and the vLLM bucket setting that
    would resolve them."""
    found = [Unresolved(family, q.q, q.verdict.spec_bucket_low, q.verdict.spec_bucket_high, tuple(m.bucket_bounds),
                        k.traffic_class)
             for k in classes for family in ("itl", "tpot") if (m := getattr(k, family)) is not None
             for q in m.quantiles
             if q.verdict is not None and q.verdict.verdict == "unresolved" and q.verdict.spec_bucket_low is not None
             and q.verdict.spec_bucket_high is not None and m.bucket_bounds]
    return [ResolutionAdviceRead(**asdict(a)) for a in advise(found)]
