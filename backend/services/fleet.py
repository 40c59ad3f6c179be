"""Fleet overview (one row per model x class, plus `mixed` for models with several classes), the pools
listing, and the /metrics gauges: all built from the same per-class summaries as /summary."""

from __future__ import annotations

import threading
from collections import OrderedDict, defaultdict
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries, snapshots
from backend.db.models import Pool
from backend.domain import pool_rows
from backend.domain import thresholds as thr
from backend.domain.engines import FIGURES, figure_basis, wording
from backend.gc_pause import gc_paused
from backend.schemas.common import WindowRead
from backend.schemas.fleet import FleetRead, FleetRowRead
from backend.schemas.latency import LatencyMetricRead
from backend.schemas.pools import FigureBasisRead, PoolRead, PoolsRead
from backend.schemas.summary import MIXED, ClassSummaryRead
from backend.services import capacity, fleet_alerts, series, spec_figures
from backend.services.analytics import fetch, model_rows
from backend.services.windows import Range

COUNTS = {"scrape": "exact", "prometheus": "exact", "requests": "exact", "prom-increase": "extrapolated"}


def figure_bases(engine: str) -> list[FigureBasisRead]:
    """Per spec-decode figure, how a pool of `engine` gets it (backend.domain.engines.figure_basis)."""
    out = []
    for figure in FIGURES:
        basis = figure_basis(engine, figure)
        out.append(FigureBasisRead(figure=figure, exposed=basis is not None,
                                   exact=None if basis is None else basis.exact,
                                   estimate_basis=None if basis is None else basis.estimate_basis,
                                   note=None if basis is None else basis.note))
    return out


def engine_fields(spec_pools: list[Pool], est: dict) -> dict:
    """A fleet row's engines, and its estimates where every pool of it gives them only as estimates (an
    estimate is never summed with exact counts: a row mixing both keeps the exact ones and names the rest)."""
    names = sorted({p.engine for p in spec_pools})
    only_est = wording.estimate_only(names, "acceptance_rate")
    alpha, tau = spec_figures.estimated_figures([est.get(p.id) for p in spec_pools]) if only_est else (None, None)
    basis = next((wording.basis_text(n, "acceptance_rate") for n in names if wording.estimated(n, "acceptance_rate")),
                 None)
    excluded = [] if only_est else [n for n in names if wording.estimated(n, "acceptance_rate")]
    return {"engines": names, "acceptance_rate_estimate": alpha, "mean_acceptance_length_estimate": tau,
            "estimate_basis": basis, "estimated_excluded": excluded}


def list_pools(session: Session, *, now: datetime, settings: Settings) -> PoolsRead:
    rejections = queries.rejection_counts(session)
    collected_by = queries.newest_sources(session)
    out = []
    for p in queries.list_pools(session):
        rules = rejections.get((p.model_name, p.traffic_class, p.spec_mode), {})
        age = (now - p.last_seen).total_seconds()
        out.append(PoolRead(
            id=p.id, model_name=p.model_name, traffic_class=p.traffic_class, spec_mode=p.spec_mode,
            num_spec_tokens=p.num_spec_tokens, drafter=p.drafter, vllm_version=p.vllm_version,
            is_baseline=p.spec_mode == settings.baseline_mode, first_seen=p.first_seen, last_seen=p.last_seen,
            age_seconds=age, stale=age > settings.stale_after_seconds, rejected=sum(rules.values()),
            rejected_by_rule=rules, origin=p.origin, collected_by=collected_by.get(p.id),
            counts=COUNTS.get(collected_by.get(p.id, "")), engine=p.engine, figures=figure_bases(p.engine),
        ))
    return PoolsRead(generated_at=now, stale_after_seconds=settings.stale_after_seconds, pools=out)


def state_of(row: ClassSummaryRead, threshold: float) -> str:
    """stale > no-data > low-volume > negative-margin > below-threshold > healthy; `threshold`: the row's
    (fleet_alerts.Thresholds, the alpha_low rule's for its class). Negative margin is the business margin:
    speedup - 1 of the measured speedup (the estimate without a baseline), the figure the margin_negative
    alert reads, not the acceptance margin seed alpha - eps_step/K."""
    if row.freshness.stale:
        return "stale"
    if not row.volume.drafts:
        return "no-data"
    if not row.volume.sufficient:
        return "low-volume"
    if row.speedup_margin is not None and row.speedup_margin < 0:
        return "negative-margin"
    if thr.rate_below(row.acceptance_rate, threshold, num=row.volume.accepted_tokens,
                      den=row.volume.draft_tokens):
        return "below-threshold"
    return "healthy"


def _p99(metric: LatencyMetricRead | None, family: str) -> dict:
    """The P99 row's point delta and its verdict, as /summary has them, under the fleet row's names."""
    q = next((x for x in (metric.quantiles if metric else []) if x.q == 0.99), None)
    v = q.verdict if q else None
    return {f"p99_{family}_delta": q.delta if q else None, f"p99_{family}_delta_rel": q.delta_rel if q else None,
            f"p99_{family}_verdict": v.verdict if v else None, f"p99_{family}_reason": v.reason if v else None,
            f"p99_{family}_delta_low": v.delta_low if v else None,
            f"p99_{family}_delta_high": v.delta_high if v else None}


def summaries(session: Session, *, rng: Range, now: datetime, settings: Settings,
              quantiles: tuple[float, ...] = (0.99,)) -> list[tuple[list[Pool], ClassSummaryRead]]:
    """Every model's class rows over one window, each with the spec pools it sums (latency at `quantiles`
    only: the overview shows P99)."""
    pools = queries.list_pools(session)
    if not pools:
        return []
    data = fetch(session, pools=pools, rng=rng, settings=settings)
    by_model: dict[str, list[Pool]] = defaultdict(list)
    for p in pools:
        by_model[p.model_name].append(p)
    out = []
    for mpools in by_model.values():
        rows = model_rows(mpools, data, settings=settings, now=now, quantiles=quantiles)
        for which, row in rows:
            if pool_rows.repeats_class_row(which, [w for w, _ in rows]):
                continue  # one class, one pool: its mixed row would repeat it
            out.append((list(which.pools), row))
    return out


def savings(session: Session, *, rng: Range, now: datetime,
            settings: Settings) -> dict[tuple[str, str, str], tuple[float, float | None]]:
    """The overview's money by (model, class, spec mode): (saved in this window, per week at this window's
    rate), /capacity/fleet's point figures for each class row, and the model's total on its `mixed` row when
    the model runs one spec mode. Only the point is read, so the bootstrap runs one replicate (the point does
    not depend on it). Without a GPU-hour price no saving is defined (every one would be null): nothing is
    read or computed."""
    if not settings.gpu_hour_price:
        return {}
    point = settings.model_copy(update={"capacity_boot_samples": 1})
    cap = capacity.fleet_capacity(session, rng=rng, now=now, settings=point)
    out = {(r.model_name, r.traffic_class, r.spec_mode): (r.saved_in_window, r.per_week_at_window_rate)
           for r in cap.rows}
    modes: dict[str, set[str]] = defaultdict(set)
    for r in cap.rows:
        modes[r.model_name].add(r.spec_mode)
    for model, total in cap.models.items():
        if len(modes.get(model, ())) == 1:
            out[(model, MIXED, next(iter(modes[model])))] = (total.saved_in_window, total.per_week_at_window_rate)
    return {k: v for k, v in out.items() if v[0] is not None}


def _saving(pair: tuple[float, float | None] | None, settings: Settings) -> dict:
    saved, week = pair or (None, None)
    return {"saved_in_window": saved, "per_week_at_window_rate": week, "currency": settings.currency}


def fleet(session: Session, *, rng: Range, now: datetime, settings: Settings, alerts: bool = True) -> FleetRead:
    """The rows of one window; with `alerts`, each with its pool's pending / firing alerts now (a stored
    snapshot is kept without them: `overlay` adds them when it is served)."""
    rows = summaries(session, rng=rng, now=now, settings=settings)
    saving = savings(session, rng=rng, now=now, settings=settings) if rows else {}
    lines = series.sparklines(session, [ps for ps, _ in rows], now=now, settings=settings)
    limits = fleet_alerts.thresholds(session, settings)
    found = fleet_alerts.active(session) if alerts and rows else {}
    est_ids = [p.id for ps, _ in rows for p in ps if wording.estimated(p.engine, "acceptance_rate")]
    est = queries.estimate_sums(session, pool_ids=sorted(set(est_ids)), start=rng.start, end=rng.end,
                                bucket_seconds=settings.bucket_seconds) if est_ids else {}
    out = []
    for (spec_pools, r), line in zip(rows, lines, strict=True):
        model = spec_pools[0].model_name
        threshold = limits.of(model, r.traffic_class, r.spec_mode)
        engine_row = engine_fields(spec_pools, est)
        data_state = state_of(r, threshold)
        if data_state == "no-data" and engine_row["acceptance_rate_estimate"] is not None:
            data_state = "estimated"  # no exact counts, but the engine's estimate (SGLang's gauges): not judged
        row_alerts = found.get((model, r.traffic_class, r.spec_mode), [])
        out.append(FleetRowRead(
            model_name=model, traffic_class=r.traffic_class, spec_mode=r.spec_mode,
            num_spec_tokens=r.num_spec_tokens, state=fleet_alerts.state_with(row_alerts, data_state),
            data_state=data_state, alerts=row_alerts, alpha_threshold=threshold, acceptance_rate=r.acceptance_rate,
            mean_acceptance_length=r.mean_acceptance_length, seed_alpha=r.seed_alpha,
            break_even_alpha=r.break_even_alpha, margin=r.margin, eps_step_source=r.eps_step_source,
            measured_speedup=r.measured_speedup, estimated_speedup=r.estimated_speedup,
            **_p99(r.itl, "itl"), **_p99(r.tpot, "tpot"),
            concurrency_band=r.concurrency_band, drafts=r.volume.drafts, freshness=r.freshness,
            data_quality=r.data_quality, sparkline=line,
            **_saving(saving.get((spec_pools[0].model_name, r.traffic_class, r.spec_mode)), settings),
            **engine_row,
        ))
    return FleetRead(window=WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds), generated_at=now,
                     alpha_threshold=settings.alpha_threshold, rows=out)


# --- snapshots ------------------------------------------------------------------------------------------


def refresh_period(window_seconds: int, settings: Settings) -> float:
    """How often a window's snapshot is recomputed: fleet_snapshot_refresh_fraction of its length (its end
    then lags "now" by at most that much), never more often than the task runs and at least every
    fleet_snapshot_max_period_seconds. Defaults: 1 h every minute, 6 h every second minute (its end then
    lags by at most 0.5 % of its length), 24 h, 7 d and 30 d every 5 min: a run computes one or two windows
    instead of five."""
    interval = settings.fleet_snapshot_interval_seconds
    wanted = settings.fleet_snapshot_refresh_fraction * window_seconds
    return max(interval, min(wanted, settings.fleet_snapshot_max_period_seconds))


def max_age(window_seconds: int, settings: Settings) -> float:
    """The oldest snapshot of a window /fleet serves: fleet_snapshot_max_age_seconds for a window refreshed
    every run, longer by the extra time between its refreshes for the others."""
    return (settings.fleet_snapshot_max_age_seconds + refresh_period(window_seconds, settings)
            - settings.fleet_snapshot_interval_seconds)


def due_windows(taken: dict[int, datetime], *, now: datetime, settings: Settings) -> list[int]:
    """The standard windows whose snapshot is missing or due: older than its refresh period less half an
    interval (beat's runs drift by a little either way). One a little newer than `now` (an overlapping run)
    is not due; one from further ahead than fleet_snapshot_max_age_seconds (a clock that ran ahead) is, and
    `refresh_snapshots` replaces it."""
    slack = settings.fleet_snapshot_interval_seconds / 2
    due = []
    for seconds in settings.fleet_snapshot_windows:
        last = taken.get(seconds)
        age = None if last is None else (now - last).total_seconds()
        far_ahead = age is not None and age < -settings.fleet_snapshot_max_age_seconds
        if age is None or far_ahead or age >= refresh_period(seconds, settings) - slack:
            due.append(seconds)
    return due


def refresh_snapshots(session: Session, *, now: datetime, settings: Settings, force: bool = False) -> list[int]:
    """Compute /fleet for the standard windows that are due (every one with `force`), each ending now, and
    store the JSON bodies (the snapshot task), without alerts: `overlay` adds those of the moment it is
    served. Returns the windows computed."""
    windows = list(settings.fleet_snapshot_windows) if force else due_windows(
        snapshots.generated(session), now=now, settings=settings)
    for seconds in windows:
        rng = Range(datetime.fromtimestamp(now.timestamp() - seconds, tz=now.tzinfo), now)
        with gc_paused():  # tens of thousands of acyclic bins and rows: no collector passes over them
            body = fleet(session, rng=rng, now=now, settings=settings, alerts=False).model_dump_json(
                exclude={"reads"}).encode()
        snapshots.put(session, seconds, now, body,
                      future_after=now + timedelta(seconds=settings.fleet_snapshot_max_age_seconds))
    return windows


def snapshot_body(session: Session, *, window_seconds: int, now: datetime, settings: Settings) -> bytes | None:
    """The stored /fleet body of a standard window if it is fresh enough (`max_age`), else None (compute live)."""
    if window_seconds not in settings.fleet_snapshot_windows:
        return None
    snap = snapshots.get(session, window_seconds)
    if snap is None:
        return None
    return fresh_body(snap.generated_at, snap.body, window_seconds=window_seconds, now=now, settings=settings)


def fresh_body(generated_at: datetime, body: bytes, *, window_seconds: int, now: datetime,
               settings: Settings) -> bytes | None:
    """A stored snapshot's body if it is fresh enough at `now` (`max_age`), else None (compute live)."""
    age = (now - generated_at).total_seconds()
    return body if 0 <= age <= max_age(window_seconds, settings) else None


# Parsed snapshots for paged reads (/fleet?offset=...): one parse per stored snapshot and API process, not
# one per page (a 5,000-pool snapshot is ~15 MB of JSON). Keyed by database and window, replaced when a newer
# snapshot is stored; at most PARSED_WINDOWS are kept (the least recently used one goes).
PARSED_WINDOWS = 2
_parsed: OrderedDict[tuple[str, int], tuple[str, dict[str, Any]]] = OrderedDict()
_parsed_lock = threading.Lock()


def snapshot_parsed(session: Session, *, window_seconds: int, now: datetime,
                    settings: Settings) -> dict[str, Any] | None:
    """The stored /fleet body of a standard window as JSON values, if fresh enough (as `snapshot_body`); read
    and parsed only when the stored one is newer than the one this process parsed last. Never mutate it."""
    if window_seconds not in settings.fleet_snapshot_windows:
        return None
    stored = snapshots.version(session, window_seconds)
    if stored is None or not 0 <= (now - stored[0]).total_seconds() <= max_age(window_seconds, settings):
        return None
    bind = session.get_bind()
    key = (str(getattr(bind, "url", None) or bind.engine.url), window_seconds)
    version = f"{stored[0].isoformat()}/{stored[1]}"
    with _parsed_lock:
        hit = _parsed.get(key)
        if hit is not None and hit[0] == version:
            _parsed.move_to_end(key)
            return hit[1]
    snap = snapshots.get(session, window_seconds)
    if snap is None or snap.generated_at != stored[0]:  # replaced meanwhile: the next request parses it
        return orjson.loads(snap.body) if snap is not None else None
    body = orjson.loads(snap.body)
    with _parsed_lock:
        _parsed[key] = (version, body)
        _parsed.move_to_end(key)
        while len(_parsed) > PARSED_WINDOWS:
            _parsed.popitem(last=False)
    return body


def overlay(body: dict[str, Any], session: Session, found: dict | None = None) -> dict[str, Any]:
    """A /fleet body (a stored snapshot's, parsed; never changed) with every row's pending / firing alerts
    as they are now (`found`: fleet_alerts.active, read here when not given), and the state they give."""
    found = fleet_alerts.active(session) if found is None else found
    rows = body["rows"]
    if not found and not any(r.get("alerts") for r in rows):
        return body  # as stored
    return {**body, "rows": fleet_alerts.overlay(rows, found)}
