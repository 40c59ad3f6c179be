"""Capacity and money per model x class x spec mode: throughput, cost per 1 M output tokens both ways, the
money "saved in this window" and "per week at this window's rate" with their bootstrap intervals, in the
configured currency, and the band where speculation stops paying (math in backend/domain/capacity.py).

Replicas: `replica_counts` is the single place that says how many replicas a pool ran in a window: observed
from the per-replica rows (mean replicas reporting per replica bucket), else the `pool_replicas` setting
("configured"), else "unknown" (per-replica figures and costs null). Along a pool's history the configured
count holds until its first per-replica row and the observed one from then on, time bin by time bin
(domain.capacity.ReplicaHistory), so the first replica row never re-prices the hours before it; a window
that spans that change (source "mixed"), or that lacks replica rows the pool had before, says so in a note.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import capacity_queries, queries, replica_repo
from backend.db.models import Pool
from backend.domain import capacity as cap
from backend.domain.bands import BAND_EDGES
from backend.domain.load_stability import operating_band
from backend.schemas.capacity import (
    BandRead,
    CapacityRead,
    ClassCapacityRead,
    FleetCapacityRead,
    FleetCapacityRowRead,
    MoneyRead,
    SideRead,
)
from backend.schemas.common import WindowRead
from backend.services.analytics import model_pools, pool_ref, window_key
from backend.services.operating_point import band_label
from backend.services.windows import Range, verdict_bin_seconds


@dataclass(frozen=True)
class ReplicaCount:
    replicas: float | None
    source: str  # "observed" | "configured" | "mixed" (configured, then observed) | "unknown"
    history: cap.ReplicaHistory | None = None  # the count per time bin (None: `replicas` throughout)
    note: str | None = None  # why the count is not one number over the window

    def at(self, start: float, end: float) -> float | None:
        return self.history.at(start, end) if self.history is not None else self.replicas


def _utc(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def replica_counts(session: Session, pools: Sequence[Pool], rng: Range, settings: Settings) -> dict[int, ReplicaCount]:
    """Replicas each pool ran in the window: observed where per-replica rows exist (the mean number of
    replicas reporting per coarse replica bucket overlapping the window, docs/replicas.md), configured before
    the pool's first replica row. A window holding that first row costs each time bin with the count in force
    then (source "mixed", with a note); a window without replica rows after the pool had some uses the
    configured count, with a note."""
    ids = [p.id for p in pools]
    observed = replica_repo.mean_replicas(session, ids, since=rng.start, until=rng.end)
    span = replica_repo.replica_span(session, ids)
    configured = configured_counts(pools, settings)
    out = {}
    for p in pools:
        conf = configured[p.id]
        first, last = span.get(p.id, (None, None))
        if p.id not in observed:
            note = None
            if last is not None and last <= rng.start:
                note = (f"no per-replica rows in this window (the pool's last ended {_utc(last)}): "
                        + (f"the configured {conf.replicas:g} replicas are used" if conf.replicas is not None
                           else "replicas unknown"))
            out[p.id] = ReplicaCount(conf.replicas, conf.source, note=note)
            continue
        obs = observed[p.id]
        hist = cap.ReplicaHistory(obs, conf.replicas,
                                  first.timestamp() if first is not None and first > rng.start else None)
        if hist.changes_in(rng.start.timestamp(), rng.end.timestamp()):
            note = (f"replicas: {conf.replicas:g} configured until {_utc(first)} (the pool's first per-replica "  # type: ignore[arg-type]
                    f"row), {obs:.2f} observed from then on; each time bin is costed with the count in force")
            out[p.id] = ReplicaCount(obs, "mixed", hist, note)
        else:
            out[p.id] = ReplicaCount(obs, "observed", hist)
    return out


def configured_counts(pools: Sequence[Pool], settings: Settings) -> dict[int, ReplicaCount]:
    """The configured `pool_replicas` (the model's entry, else `*`; inside it the most specific key wins:
    `class:mode`, then `class`, then `*`), else unknown."""
    out = {}
    for p in pools:
        by_pool = settings.pool_replicas.get(p.model_name, settings.pool_replicas.get("*", {}))
        n = next((by_pool[k] for k in (f"{p.traffic_class}:{p.spec_mode}", p.traffic_class, "*") if k in by_pool),
                 None)
        out[p.id] = ReplicaCount(float(n) if n is not None else None, "configured" if n is not None else "unknown")
    return out


def _source(spec: ReplicaCount, base: ReplicaCount | None) -> str:
    """"observed" when every side's count is observed, "mixed" when a side changed from configured to observed
    inside the window, else "configured" (both known here)."""
    sides = [spec] + ([base] if base is not None else [])
    if any(r.source == "mixed" for r in sides):
        return "mixed"
    return "observed" if all(r.source == "observed" for r in sides) else "configured"


def price_of(model: str, settings: Settings) -> tuple[float | None, int]:
    """(GPU-hour price, GPUs per replica) of a model: its own key, else `*`."""
    price = settings.gpu_hour_price.get(model, settings.gpu_hour_price.get("*"))
    gpus = settings.gpus_per_replica.get(model, settings.gpus_per_replica.get("*", 1))
    return price, gpus


def method_text(settings: Settings, bin_seconds: int) -> str:
    return (f"percentile bootstrap over {bin_seconds} s time bins (95 %, {settings.capacity_boot_samples} "
            "replicates, seeded by the spec pool's id), each side resampled per concurrency band; spec token volume held fixed")


def _bins(rows: Sequence[capacity_queries.ThroughputBin], replicas: ReplicaCount, width: int, bin_seconds: int,
          rng: Range) -> tuple[dict[str, list[cap.Bin]], list[cap.Bin]]:
    """Domain bins per band label, and every bin (band or not) for the pool-wide rates; each bin's replica
    count is the one in force over its time (ReplicaCount.at)."""
    by_band: dict[str, list[cap.Bin]] = defaultdict(list)
    every = []
    labels = {i: band_label(i) for i in {r.band_index for r in rows} if i is not None}
    lo = rng.start.timestamp()
    for r in rows:
        seconds = r.buckets * width
        n = replicas.at(max(lo, r.bin_end - bin_seconds), r.bin_end)
        b = cap.Bin(tokens=r.generation_tokens, seconds=seconds,
                    replica_seconds=n * seconds if n is not None else None,
                    request_seconds=r.running_sum * width if r.running_sum is not None else None)
        every.append(b)
        if r.band_index is not None:
            by_band[labels[r.band_index]].append(b)
    return dict(by_band), every


def _side(s: cap.SideRates | None) -> SideRead | None:
    if s is None:
        return None
    return SideRead(tokens=s.tokens, seconds=s.seconds, throughput=s.throughput, per_replica=s.per_replica,
                    per_request=s.per_request, replicas=s.replicas, cost_per_mtok=s.cost_per_mtok)


def _money(m: cap.Money, currency: str) -> MoneyRead:
    return MoneyRead(currency=currency, cost_per_mtok_spec=m.cost_per_mtok_spec, cost_per_mtok_baseline=m.cost_per_mtok_base,
                     saved_in_window=m.saved_in_window, saved_in_window_low=m.saved_in_window_low, saved_in_window_high=m.saved_in_window_high,
                     per_week_at_window_rate=m.per_week_at_window_rate, per_week_at_window_rate_low=m.per_week_at_window_rate_low,
                     per_week_at_window_rate_high=m.per_week_at_window_rate_high, compared_fraction=m.compared_fraction,
                     fixed_bands=list(m.fixed_bands))


def _with_replicas_note(note: str, *counts: ReplicaCount) -> str:
    return "; ".join([note, *dict.fromkeys(c.note for c in counts if c.note)])


def _note(c: cap.Capacity, base: Pool | None, price: float | None, replicas_known: bool) -> str:
    if base is None:
        return "no baseline pool for this class: throughput only, no saving"
    if not replicas_known:
        return "replicas unknown (set SPECWATCH_POOL_REPLICAS): per-replica figures and costs are null"
    if price is None:
        return "no GPU-hour price for this model (SPECWATCH_GPU_HOUR_PRICE): throughput only"
    if c.money.saved_in_window is None:
        return "no concurrency band served by both pools in the window"
    if c.stops_paying_band:
        sure = "significantly" if c.stops_paying_significant else "not significantly"
        return f"speculation loses throughput from the {c.stops_paying_band} band on ({sure})"
    return "speculation pays in every compared band"


@dataclass
class ModelCapacity:
    read: CapacityRead
    parts: list[cap.Money]  # per class, with replicates (for the fleet total)


def _engine_pools(pools: Sequence[Pool]) -> list[Pool]:
    return [p for p in pools if getattr(p, "origin", "engine") == "engine"]


def _bins_by_pool(session: Session, pools: Sequence[Pool], rng: Range, settings: Settings) -> dict[int, list]:
    """One read for every pool: its throughput bins (services' time bins: those of the latency verdicts)."""
    width = settings.bucket_seconds
    bin_seconds = verdict_bin_seconds(rng.seconds, bucket_seconds=width, max_samples=settings.verdict_max_samples)
    rows = capacity_queries.throughput_bins(session, pool_ids=[p.id for p in pools], start=rng.start, end=rng.end,
                                            bucket_seconds=width, bin_seconds=bin_seconds, band_edges=BAND_EDGES)
    per_pool: dict[int, list] = defaultdict(list)
    for r in rows:
        per_pool[r.pool_id].append(r)
    return per_pool


def model_capacity(session: Session, *, model_name: str, rng: Range, now: datetime, settings: Settings,
                   pools: Sequence[Pool] | None = None, per_pool: dict[int, list] | None = None) -> ModelCapacity:
    pools = _engine_pools(pools if pools is not None else model_pools(session, model_name))
    width = settings.bucket_seconds
    bin_seconds = verdict_bin_seconds(rng.seconds, bucket_seconds=width, max_samples=settings.verdict_max_samples)
    if per_pool is None:
        per_pool = _bins_by_pool(session, pools, rng, settings)
    reps = replica_counts(session, pools, rng, settings)
    price, gpus = price_of(model_name, settings)
    classes, parts = [], []
    spec_pools = sorted((p for p in pools if p.spec_mode != settings.baseline_mode),
                        key=lambda p: (p.traffic_class, p.spec_mode))
    for sp in spec_pools:
        if sp.id not in per_pool:
            continue
        base = next((p for p in pools if p.spec_mode == settings.baseline_mode and p.traffic_class == sp.traffic_class),
                    None)
        rs, rb = reps[sp.id], reps[base.id] if base else ReplicaCount(None, "unknown")
        s_bands, s_all = _bins(per_pool[sp.id], rs, width, bin_seconds, rng)
        b_bands, b_all = _bins(per_pool.get(base.id, []), rb, width, bin_seconds, rng) if base else ({}, [])
        c = cap.compare(s_bands, b_bands if base else None, gpu_hour_price=price, gpus_per_replica=gpus,
                        window_seconds=rng.seconds, n_boot=settings.capacity_boot_samples,
                        seed=sp.id)  # a seed per pool: the classes' bootstraps are independent (total_saving)
        rph = cap.replica_hour_price(price, gpus)
        known = rs.replicas is not None and (base is None or rb.replicas is not None)
        parts.append(c.money)
        spec_side, base_side = cap.side_rates(s_all, rph), cap.side_rates(b_all, rph) if b_all else None
        if rs.source == "mixed":  # the count over the window: the time-weighted mean of the bins' counts
            rs = ReplicaCount(spec_side.replicas, rs.source, rs.history, rs.note)
        if rb.source == "mixed" and base_side is not None:
            rb = ReplicaCount(base_side.replicas, rb.source, rb.history, rb.note)
        classes.append(ClassCapacityRead(
            traffic_class=sp.traffic_class, spec_mode=sp.spec_mode, spec_pool=pool_ref(sp),
            baseline_pool=pool_ref(base) if base else None, replicas_spec=rs.replicas,
            replicas_baseline=rb.replicas if base else None,
            replicas_source=_source(rs, rb if base else None) if known else "unknown", currency=settings.currency,
            gpu_hour_price=price, gpus_per_replica=gpus, spec=_side(spec_side), baseline=_side(base_side),
            bands=[BandRead(band=b.band, spec=_side(b.spec), baseline=_side(b.base),
                            ratio_per_replica=b.ratio_per_replica, ratio_low=b.ratio_low, ratio_high=b.ratio_high,
                            ratio_per_request=b.ratio_per_request, saved_in_window=b.saved_in_window,
                            saved_in_window_low=b.saved_in_window_low, saved_in_window_high=b.saved_in_window_high,
                            pays=b.pays) for b in c.bands],
            money=_money(c.money, settings.currency), stops_paying_band=c.stops_paying_band,
            operating_band=operating_band({b.band: b.spec.seconds for b in c.bands}),
            stops_paying_significant=c.stops_paying_significant,
            note=_with_replicas_note(_note(c, base, price, known), rs, *([rb] if base else [])),
            replicas_note="; ".join(dict.fromkeys(r.note for r in (rs, rb) if r.note)) or None))
    total = cap.total_saving(parts, window_seconds=rng.seconds)
    read = CapacityRead(model_name=model_name, window=WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds),
                        generated_at=now, currency=settings.currency, method=method_text(settings, bin_seconds),
                        classes=classes, total=_money(total, settings.currency))
    return ModelCapacity(read=read, parts=[total])


def capacity(session: Session, *, model_name: str, rng: Range, now: datetime, settings: Settings) -> CapacityRead:
    return model_capacity(session, model_name=model_name, rng=rng, now=now, settings=settings).read


def fleet_capacity(session: Session, *, rng: Range, now: datetime, settings: Settings) -> FleetCapacityRead:
    """One row per model x class x spec mode, each model's total and the fleet's (replicate-wise sums)."""
    pools = queries.list_pools(session)
    by_model: dict[str, list[Pool]] = defaultdict(list)
    for p in pools:
        by_model[p.model_name].append(p)
    rows, models, parts = [], {}, []
    per_pool = _bins_by_pool(session, _engine_pools(pools), rng, settings)
    for name in sorted(by_model):
        mc = model_capacity(session, model_name=name, rng=rng, now=now, settings=settings, pools=by_model[name],
                            per_pool=per_pool)
        models[name] = mc.read.total
        parts += mc.parts
        rows += [FleetCapacityRowRead(
            model_name=name, traffic_class=c.traffic_class, spec_mode=c.spec_mode, currency=settings.currency,
            saved_in_window=c.money.saved_in_window, saved_in_window_low=c.money.saved_in_window_low,
            saved_in_window_high=c.money.saved_in_window_high, cost_per_mtok_spec=c.money.cost_per_mtok_spec, cost_per_mtok_baseline=c.money.cost_per_mtok_baseline,
            per_week_at_window_rate=c.money.per_week_at_window_rate, per_week_at_window_rate_low=c.money.per_week_at_window_rate_low,
            per_week_at_window_rate_high=c.money.per_week_at_window_rate_high, stops_paying_band=c.stops_paying_band)
            for c in mc.read.classes]
    bin_seconds = verdict_bin_seconds(rng.seconds, bucket_seconds=settings.bucket_seconds,
                                      max_samples=settings.verdict_max_samples)
    return FleetCapacityRead(window=WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds), generated_at=now,
                             currency=settings.currency, method=method_text(settings, bin_seconds), rows=rows,
                             models=models,
                             total=_money(cap.total_saving(parts, window_seconds=rng.seconds), settings.currency))


def fleet_key(pools: Sequence[Pool], rng: Range, settings: Settings) -> tuple:
    """analytics.window_key of /capacity/fleet (its time bins divide the whole window; replica rows are
    coarser than buckets, on the same grid), and the window's length, by which the saving per week scales.
    The window and generated_at are filled per request (analytics.stamped)."""
    return (*window_key(pools, rng, settings, binned_seconds=rng.seconds), rng.seconds)
