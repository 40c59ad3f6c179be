"""Rollout tracking: derive each model x scope's stage from the data (domain.rollout), record every gate
measurement and every stage change with the numbers at that moment; operators' manual transitions;
frozen baseline snapshots for models without a concurrent baseline pool.

Facts per scope come from the analytics summary of the trailing window (the same numbers the API and
the dashboard show): the candidate drafter is the scope's busiest spec_mode; alpha is its acceptance
rate A/D (pooled over the scope's classes for `mixed`); the latency check is the P99 TPOT verdict
against, in order of preference, a same-class baseline pool that reported in the window, the newest
frozen snapshot, or another class's baseline pool (labelled other-class).
"""

from __future__ import annotations

from dataclasses import asdict, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries
from backend.db import rollout_repo as repo
from backend.db.models import Pool
from backend.db.models_rollout import BaselineSnapshot, RolloutEvent, RolloutMeasurement, RolloutTrack
from backend.domain import plan, wording
from backend.domain import rollout as ro
from backend.domain.bands import concurrency_band
from backend.schemas.summary import MIXED, ClassSummaryRead
from backend.services import analytics, fleet_alerts, latency
from backend.services.errors import InvalidParameter, NotFound
from backend.services.windows import Range

SYSTEM = "specwatch"
PLAN_LOOKBACK = timedelta(days=7)  # a plan reads measured values from this far back


def policy(s: Settings) -> ro.GatePolicy:
    return ro.GatePolicy(threshold=s.rollout_gate_alpha, min_drafts=s.rollout_min_drafts,
                         failure_limit=s.rollout_failure_limit,
                         consecutive_error_limit=s.rollout_consecutive_error_limit,
                         inconclusive_limit=s.rollout_inconclusive_limit,
                         consecutive_successes=s.rollout_consecutive_successes, dry_run=s.rollout_dry_run)


def _p99(row: ClassSummaryRead | None, family: str = "tpot") -> dict[str, Any]:
    metric = getattr(row, family, None) if row is not None else None
    q = next((x for x in (metric.quantiles if metric else []) if x.q == 0.99), None)
    return _p99_values(q)


def _p99_values(q) -> dict[str, Any]:
    """The P99 row's verdict as recorded with a decision: the label, its interval and reason, the values."""
    if q is None:
        return {"verdict": None}
    v = q.verdict
    return {"verdict": v.verdict if v else None, "reason": v.reason if v else None,
            "delta_low": v.delta_low if v else None, "delta_high": v.delta_high if v else None,
            "spec": q.spec.value, "base": q.baseline.value if q.baseline else None, "delta": q.delta,
            "delta_rel": q.delta_rel}


def snapshot_bins(snap: BaselineSnapshot, family: str) -> list[queries.HistogramBin]:
    return snapshot_bins_from(snap.bins or {}, family)


def _has_data(p: Pool, data: analytics.WindowData) -> bool:
    t = data.totals.get(p.id)
    return bool(t and ((t.all.tpot_count or 0) + (t.all.itl_count or 0) + (t.all.drafts or 0)) > 0)


def scope_facts(session: Session, *, model: str, pools: list[Pool], data: analytics.WindowData,
                rows: list[ClassSummaryRead], settings: Settings) -> dict[str, tuple[str | None, ro.Facts, dict]]:
    """scope -> (candidate spec_mode, facts, values recorded with the decision)."""
    base_mode = settings.baseline_mode
    # the classes the summary shows (an unlabelled engine pool is the mix when records carry the classes:
    # backend.domain.pool_rows) and those of the baselines
    classes = sorted({r.traffic_class for r in rows if r.traffic_class != MIXED}
                     | {p.traffic_class for p in pools if p.spec_mode == base_mode})
    out = {}
    for scope in [*classes, MIXED]:
        in_scope = [p for p in pools if scope == MIXED or p.traffic_class == scope]
        spec = [p for p in in_scope if p.spec_mode != base_mode]
        base_live = [p for p in in_scope if p.spec_mode == base_mode and _has_data(p, data)]
        cands = [r for r in rows if r.traffic_class == scope]
        row = max(cands, key=lambda r: (r.volume.drafts or 0, r.spec_mode == min(c.spec_mode for c in cands)),
                  default=None)
        mode = row.spec_mode if row else (min(p.spec_mode for p in spec) if spec else None)
        spec_classes = sorted({p.traffic_class for p in spec}) or ([scope] if scope != MIXED else classes)
        snaps = [s for s in (repo.latest_snapshot(session, model, c) for c in spec_classes) if s is not None]
        lat, source = _p99(row), None
        match = row.tpot.baseline.match if row is not None and row.tpot and row.tpot.baseline else None
        if base_live and (match == "same-class" or scope == MIXED):
            source = "pool"
        elif snaps and row is not None:
            spec_pools = [p for p in spec if p.spec_mode == mode]
            spec_bins = [b for p in spec_pools for b in data.hist["tpot"].get(p.id, [])]
            cmp = latency.compare("tpot", spec_bins=spec_bins, base_bins=[b for s in snaps for b in snapshot_bins(s, "tpot")],
                                  baseline=None, layouts=data.layouts, quantiles=(0.99,))
            lat = _p99_values(cmp.quantiles[0] if cmp.quantiles else None)
            source = "snapshot"
        elif match is not None and any(_has_data(p, data) for p in pools if p.spec_mode == base_mode):
            source = "pool-other-class"
        vol = row.volume.drafts if row else None
        facts = ro.Facts(baseline=bool(base_live or snaps or source), spec=bool(spec),
                         spec_data=bool(row and row.pools and vol), drafts=vol,
                         alpha=row.acceptance_rate if row else None,
                         accepted=row.volume.accepted_tokens if row else None,
                         draft_tokens=row.volume.draft_tokens if row else None,
                         latency_verdict=lat.get("verdict") if source else None,
                         latency_reason=lat.get("reason") if source else None)
        values = {"alpha": facts.alpha, "seed_alpha": row.seed_alpha if row else None,
                  "tau": row.mean_acceptance_length if row else None, "drafts": vol,
                  "margin": row.margin if row else None, "eps_step": row.eps_step if row else None,
                  "eps_step_source": row.eps_step_source if row else None,
                  "speedup": (row.measured_speedup or row.estimated_speedup) if row else None,
                  "tpot_p99": lat if source else None, "itl_p99": _p99(row, "itl") if source == "pool" else None,
                  "baseline_source": source, "snapshot_ids": [s.id for s in snaps] or None}
        out[scope] = (mode, facts, values)
    return out


def _counters(t: RolloutTrack) -> ro.Counters:
    return ro.Counters(t.successes_in_row, t.failures_total, t.errors_in_row, t.inconclusive_total, t.measurements)


def _set_counters(t: RolloutTrack, c: ro.Counters) -> None:
    (t.successes_in_row, t.failures_total, t.errors_in_row, t.inconclusive_total, t.measurements) = (
        c.successes_in_row, c.failures_total, c.errors_in_row, c.inconclusive_total, c.measurements)


def _event(session: Session, t: RolloutTrack, *, at: datetime, kind: str, to: str, actor: str, reason: str,
           values: dict | None, action: str | None = None, frm: str | None = None) -> RolloutEvent:
    return repo.add(session, RolloutEvent(track_id=t.id, at=at, kind=kind, action=action, from_stage=frm,
                                          to_stage=to, actor=actor, reason=reason, values=values))


def evaluate_model(session: Session, *, model: str, rng: Range, now: datetime, settings: Settings) -> list[dict]:
    pools = analytics.model_pools(session, model)
    data = analytics.fetch(session, pools=pools, rng=rng, settings=settings)
    # the decision reads the P99 verdicts only (_p99): the same verdict as among (0.5, 0.9, 0.99), one
    # bootstrap instead of three quantiles' edges
    rows = analytics.model_summaries(pools, data, settings=settings, now=now, quantiles=(0.99,))
    base = policy(settings)
    # the gate compares alpha with the scope's alpha_low threshold of the alert rules (per class, as the
    # alerts and the overview read it); SPECWATCH_ROLLOUT_GATE_ALPHA where no alpha_low rule applies
    limits = fleet_alerts.thresholds(session, settings, default=settings.rollout_gate_alpha)
    changes = []
    for scope, (mode, facts, values) in scope_facts(session, model=model, pools=pools, data=data, rows=rows,
                                                    settings=settings).items():
        pol = replace(base, threshold=limits.of(model, scope, mode)) if mode is not None else base
        t = repo.track(session, model, scope, for_update=True)
        if t is None:
            t = repo.add(session, RolloutTrack(model_name=model, scope=scope, spec_mode=mode, stage="no_data",
                                               stage_since=now, manual=False, gate_phase="idle", reason="",
                                               created_at=now))
        if mode != t.spec_mode and t.spec_mode is not None and mode is not None:
            _set_counters(t, ro.Counters())  # a new candidate drafter starts a new gate run
        d = ro.decide(t.stage, _counters(t), facts, pol, manual=t.manual)
        values = {**values, "threshold": pol.threshold, "min_drafts": pol.min_drafts, "spec_mode": mode,
                  "window": {"start": rng.start.isoformat(), "end": rng.end.isoformat()},
                  "gate": d.gate.result, "gate_phase": d.gate_phase, "latency": d.latency.result,
                  "gate_reason": d.gate.reason, "latency_reason": d.latency.reason,
                  "counters": asdict(d.counters)}
        if facts.spec:
            repo.add(session, RolloutMeasurement(
                track_id=t.id, at=now, window_start=rng.start, window_end=rng.end, result=d.gate.result,
                latency_result=d.latency.result, alpha=facts.alpha, threshold=pol.threshold, drafts=facts.drafts,
                dry_run=pol.dry_run, reason=f"{d.gate.reason}; {d.latency.reason}", values=values))
        if d.stage != t.stage:
            _event(session, t, at=now, kind="derived", frm=t.stage, to=d.stage, actor=SYSTEM, reason=d.reason,
                   values=values)
            changes.append({"model": model, "scope": scope, "from": t.stage, "to": d.stage, "reason": d.reason})
            t.stage, t.stage_since = d.stage, now
        _set_counters(t, d.counters)
        t.spec_mode, t.gate_phase, t.gate_result = mode, d.gate_phase, d.gate.result if facts.spec else None
        t.latency_result, t.reason, t.last_eval_at, t.last_values = d.latency.result, d.reason, now, values
    return changes


def evaluate(session: Session, *, settings: Settings, now: datetime, window_seconds: int | None = None,
             model: str | None = None) -> dict[str, Any]:
    """One derivation cycle over every model (or one). Skips when another cycle holds the lock."""
    if not repo.try_eval_lock(session):
        return {"skipped": "another rollout evaluation is running"}
    rng = Range(now - timedelta(seconds=window_seconds or settings.rollout_window_seconds), now)
    changes: list[dict] = []
    for name in [model] if model else queries.model_names(session):
        changes += evaluate_model(session, model=name, rng=rng, now=now, settings=settings)
    return {"at": now.isoformat(), "window_seconds": rng.seconds, "changes": changes}


def get_track(session: Session, model: str, scope: str, *, for_update: bool = False) -> RolloutTrack:
    t = repo.track(session, model, scope, for_update=for_update)
    if t is None:
        known = [f"{x.model_name}/{x.scope}" for x in repo.tracks(session)]
        raise NotFound(f"no rollout track for {model!r} scope {scope!r}", known)
    return t


def transition(session: Session, *, model: str, scope: str, action: str, reason: str, actor: str, now: datetime,
               settings: Settings) -> RolloutEvent:
    """An operator's decision (sign-off, disable, domain drafter, hold, resume), validated and audited."""
    t = get_track(session, model, scope, for_update=True)
    try:
        target = ro.validate_manual(t.stage, action, reason)
    except ro.TransitionError as exc:
        raise InvalidParameter(str(exc)) from None
    old = t.stage
    if target is None:  # resume: back to derivation, a new gate run
        t.manual, target = False, "spec_on" if t.spec_mode else "baseline"
        _set_counters(t, ro.Counters())
    elif action == "sign_off":
        t.manual = old in ("held", "latency_failed")  # a human overrode the data: keep it until resumed
        _set_counters(t, ro.Counters(successes_in_row=max(t.successes_in_row, settings.rollout_consecutive_successes),
                                     failures_total=0, measurements=max(1, t.measurements)))
    else:
        t.manual = True
    t.stage, t.stage_since, t.reason = target, now, f"{wording.action_text(action)} by {actor}: {reason}"
    values = {**(t.last_values or {}), "counters_before": t.last_values.get("counters") if t.last_values else None}
    return _event(session, t, at=now, kind="manual", action=action, frm=old, to=target, actor=actor,
                  reason=reason.strip(), values=values)


def capture_snapshot(session: Session, *, model: str, rng: Range, by: str, reason: str, now: datetime,
                     settings: Settings, traffic_class: str | None = None) -> list[BaselineSnapshot]:
    """Freeze the baseline pools' latency over `rng` (one snapshot per class) for later deltas."""
    pools = [p for p in analytics.model_pools(session, model) if p.spec_mode == settings.baseline_mode
             and (traffic_class is None or p.traffic_class == traffic_class)]
    data = analytics.fetch(session, pools=pools, rng=rng, settings=settings) if pools else None
    out = []
    for p in pools:
        if data is None or not _has_data(p, data):
            continue
        bins = {f: [{k: v for k, v in asdict(b).items() if k != "pool_id"}
                    for blk in data.hist[f].get(p.id, []) for b in blk.bins()] for f in ("tpot", "itl")}
        tpot, itl = latency.Histograms(snapshot_bins_from(bins, "tpot")), latency.Histograms(snapshot_bins_from(bins, "itl"))
        snap = repo.add(session, BaselineSnapshot(
            model_name=model, traffic_class=p.traffic_class, window_start=rng.start, window_end=rng.end,
            captured_at=now, captured_by=by, reason=reason, tpot_mean=tpot.mean, itl_mean=itl.mean,
            running_mean=data.totals[p.id].all.running_mean, samples=int(tpot.count or 0), bins=bins))
        out.append(snap)
        for t in repo.tracks(session, model_name=model):
            if t.scope in (p.traffic_class, MIXED):
                _event(session, t, at=now, kind="snapshot", to=t.stage, frm=t.stage, actor=by, action="snapshot",
                       reason=reason or "baseline snapshot frozen",
                       values={"snapshot_id": snap.id, "traffic_class": p.traffic_class, "tpot_mean": snap.tpot_mean,
                               "samples": snap.samples, "window": [rng.start.isoformat(), rng.end.isoformat()]})
    if not out:
        raise InvalidParameter(f"no baseline pool of {model!r} reported between {rng.start} and {rng.end}")
    return out


def snapshot_bins_from(bins: dict, family: str) -> list[queries.HistogramBin]:
    return [queries.HistogramBin(pool_id=0, **b) for b in bins.get(family, [])]


def build_plan(session: Session | None, *, model: str, k: int, traffic: dict[str, float], concurrency: int,
               alpha: dict[str, float], settings: Settings, now: datetime) -> tuple[plan.PlanInputs, dict]:
    """Plan inputs: given alphas win; else the class's measured acceptance rate over the last week
    (busiest drafter; no session = offline, nothing measured); eps_step measured (ITL against the baseline) when the model's mixed row was measured in the plan's
    concurrency band, else the band's default; each class measured in that band keeps its own eps_step."""
    band = concurrency_band(concurrency)
    eps, eps_source = settings.eps_default_by_band.get(band or "", settings.eps_default), "default-for-band"
    alphas, sources = dict(alpha), {c: "given" for c in alpha}
    curves: dict[str, list[float | None]] = {}
    own_eps: dict[str, float] = {}
    if session is not None and model in queries.model_names(session):
        rng = Range(now - max(PLAN_LOOKBACK, timedelta(seconds=settings.rollout_window_seconds)), now)
        rows = analytics.summary(session, model_name=model, rng=rng, now=now, settings=settings).classes
        for cls in traffic:
            row = max((r for r in rows if r.traffic_class == cls and r.acceptance_rate is not None),
                      key=lambda r: r.volume.drafts or 0, default=None)
            if cls not in alphas and row is not None:
                alphas[cls], sources[cls] = row.acceptance_rate, "measured"
            if row is not None and row.num_spec_tokens == k and row.per_position_conditional:
                curves[cls] = row.per_position_conditional  # the K advisor's measured p_1..p_K
            if row is not None and row.eps_step_source == "measured" and row.eps_step is not None \
                    and row.concurrency_band == band:
                own_eps[cls] = row.eps_step  # the class's own step overhead, never the mix's
        mixed = max((r for r in rows if r.traffic_class == MIXED), key=lambda r: r.volume.drafts or 0, default=None)
        if mixed and mixed.eps_step_source == "measured" and mixed.eps_step is not None \
                and mixed.concurrency_band == band:
            eps, eps_source = mixed.eps_step, "measured"
    inputs = plan.PlanInputs(model=model, k=k, traffic=traffic, concurrency=concurrency, eps_step=eps,
                             eps_step_source=eps_source, band=band, threshold=settings.rollout_gate_alpha,
                             min_drafts=settings.rollout_min_drafts,
                             consecutive_successes=settings.rollout_consecutive_successes,
                             failure_limit=settings.rollout_failure_limit, alpha=alphas, alpha_source=sources,
                             curves=curves, eps0_share=settings.k_advisor_eps0_share, eps_step_by_class=own_eps)
    return inputs, plan.numbers(inputs)
