"""Weekly rollout report: per model, the stage and its rollout stage changes, alpha per class and mixed this
week vs last week, margin, latency verdicts, alerts fired and time in alert, decisions taken and pending,
and the drafter comparison when a model ran two spec modes.

Weeks are ISO weeks (Monday 00:00 to Monday 00:00) in settings.report_timezone; the range is converted to
UTC for the queries, so a DST change gives a 167- or 169-hour week, as the calendar does. Every number
comes from analytics.summary's machinery over the week's range (counters summed, then ratios).
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries
from backend.db import rollout_repo as repo
from backend.domain import capacity as cap
from backend.domain import intervals, money
from backend.domain import rollout as ro
from backend.domain.engines import wording as engine_words
from backend.schemas.summary import MIXED, ClassSummaryRead
from backend.services import (
    analytics,
    capacity,
    fleet_alerts,
    latency,
    per_request,
    report_changes,
    spec_figures,
)
from backend.services.errors import InvalidParameter
from backend.services.report_wording import gate_text, stamp, summary_table
from backend.services.windows import Range

WEEK_PATTERN = r"^(?:[0-9]{4}-W[0-9]{2})?$"  # empty: the default week
_WEEK = re.compile(r"([0-9]{4})-W([0-9]{2})", re.ASCII)
WEEK_YEARS = (1971, 2199)  # a report reads the week before too; date arithmetic stays far from year 1 and 9999
PENDING = {"gate_failed": "disable speculation or train a domain drafter",
           "gate_error": "repair the data source, then resume",
           "held": "too little data for the gate, or P99 TPOT too close to tell: sign off, resume (measure on) or abort",
           "latency_failed": "P99 TPOT slower than baseline: sign off or disable"}


def parse_week(text: str) -> tuple[int, int]:
    m = _WEEK.fullmatch(text)
    if not m:
        raise InvalidParameter(f"week={text!r}: expected an ISO week such as 2026-W48")
    year, week = int(m.group(1)), int(m.group(2))
    if not WEEK_YEARS[0] <= year <= WEEK_YEARS[1]:
        raise InvalidParameter(f"week={text!r}: the year must be in {WEEK_YEARS[0]}..{WEEK_YEARS[1]}")
    try:
        date.fromisocalendar(year, week, 1)
    except ValueError:
        raise InvalidParameter(f"week={text!r}: {year} has no week {week}") from None
    return year, week


def week_label(d: date) -> str:
    y, w, _ = d.isocalendar()
    return f"{y}-W{w:02d}"


def week_range(week: str, tz_name: str) -> Range:
    """[Monday 00:00, next Monday 00:00) local time, as UTC instants."""
    year, w = parse_week(week)
    tz = ZoneInfo(tz_name)
    monday = date.fromisocalendar(year, w, 1)
    return Range(datetime.combine(monday, time(0), tz), datetime.combine(monday + timedelta(days=7), time(0), tz))


def week_of(at: datetime, tz_name: str) -> str:
    return week_label(at.astimezone(ZoneInfo(tz_name)).date())


def previous_week(week: str) -> str:
    year, w = parse_week(week)
    return week_label(date.fromisocalendar(year, w, 1) - timedelta(days=7))


def _p99(row: ClassSummaryRead | None, family: str) -> tuple[str | None, float | None, str | None]:
    """The P99 verdict of the summary row as /summary shows it: label, relative delta, one-line reason."""
    metric = getattr(row, family, None) if row else None
    q = next((x for x in (metric.quantiles if metric else []) if x.q == 0.99), None)
    v = q.verdict if q else None
    return (v.verdict if v else None), (q.delta_rel if q else None), (v.reason if v else None)


def _busiest(rows: list[ClassSummaryRead], scope: str) -> ClassSummaryRead | None:
    cands = [r for r in rows if r.traffic_class == scope]
    return max(cands, key=lambda r: (r.volume.drafts or 0, r.spec_mode), default=None)


def _drafter(pools, scope: str, spec_mode: str | None) -> str | None:
    """The drafter name(s) the pools of `scope` (every class for the mix) report for `spec_mode`, or None
    when none is stored (then the report shows the spec method alone, labelled as the method)."""
    names = sorted({p.drafter for p in pools if p.drafter and p.spec_mode == spec_mode
                    and (scope == MIXED or p.traffic_class == scope)})
    return ", ".join(names) or None


def _scope_pools(pools, scope: str, spec_mode: str | None) -> list:
    return [p for p in pools if getattr(p, "origin", "engine") == "engine" and p.spec_mode == spec_mode
            and (scope == MIXED or p.traffic_class == scope)]


def engine_cells(engines: list[str], c: dict[str, Any], estimate: tuple[float | None, float | None] | None = None,
                 none: str = "n/a") -> dict[str, Any]:
    """A report row's engine and, per figure, its text in the one wording (backend.domain.engines.wording):
    "not exposed by <engine>" where the row's engines have none, "(estimated)" for an estimate (then the
    estimate's value; a row's exact figures never include it), the number otherwise."""
    alpha, tau = (c.get("alpha"), c.get("tau"))
    if engine_words.estimate_only(engines, "acceptance_rate") and estimate is not None:
        alpha, tau = estimate
    fmt = lambda v, d=3: None if v is None else f"{v:.{d}f}"
    return {"engine": engine_words.engines_text(engines), "engines": engines,
           "alpha_text": engine_words.row_figure_text(engines, "acceptance_rate", fmt(alpha), none=none),
           "tau_text": engine_words.row_figure_text(engines, "accept_length", fmt(tau), none=none),
           "margin_text": engine_words.row_figure_text(engines, "margin", fmt(c.get("margin")), none=none),
           "tpot_text": engine_words.row_figure_text(engines, "tpot", "", none=none) or None,
           "itl_text": engine_words.row_figure_text(engines, "itl", "", none=none) or None,
           "alpha_estimate": alpha if engine_words.estimate_only(engines, "acceptance_rate") else None,
           "estimate_basis": next((engine_words.basis_text(n, "acceptance_rate") for n in engines
                                   if engine_words.estimated(n, "acceptance_rate")), None),
           "excluded": None if engine_words.estimate_only(engines, "acceptance_rate")
           else engine_words.excluded_text(engines)}


def _class_rows(rows: list[ClassSummaryRead], prev: list[ClassSummaryRead], pools=(), *,
                every_mode: bool = False, estimates: dict | None = None) -> list[dict[str, Any]]:
    """A row per scope (its busiest spec mode, the mix last), or with `every_mode` a row per class x spec mode
    and no mix (the CSV's class rows: their counts add up to the model's)."""
    if every_mode:
        keys = sorted({(r.traffic_class, r.spec_mode) for r in [*rows, *prev] if r.traffic_class != MIXED})
        pick = {k: (next((r for r in rows if (r.traffic_class, r.spec_mode) == k), None),
                    next((p for p in prev if (p.traffic_class, p.spec_mode) == k), None)) for k in keys}
    else:
        scopes = sorted({r.traffic_class for r in rows if r.traffic_class != MIXED}) + [MIXED]
        pick = {(scope, None): (_busiest(rows, scope), _busiest(prev, scope)) for scope in scopes}
    out = []
    for (scope, _mode), (r, p) in pick.items():
        if r is None and p is None:
            continue
        tpot, tpot_rel, tpot_why = _p99(r, "tpot")
        itl, _, itl_why = _p99(r, "itl")
        a, b = (r.acceptance_rate if r else None), (p.acceptance_rate if p else None)
        mode = r.spec_mode if r else p.spec_mode
        out.append({"scope": scope, "spec_mode": mode, "drafter": _drafter(pools, scope, mode), "alpha": a,
                    "alpha_prev": b,
                    "alpha_delta": a - b if a is not None and b is not None else None,
                    "tau": r.mean_acceptance_length if r else None, "margin": r.margin if r else None,
                    "speedup": (r.measured_speedup or r.estimated_speedup) if r else None,
                    "concurrency_band": r.concurrency_band if r else None,  # the band margin and speedup are of
                    "eps_step_source": r.eps_step_source if r else None, "drafts": r.volume.drafts if r else None,
                    "tpot_p99_verdict": tpot, "tpot_p99_delta_rel": tpot_rel, "itl_p99_verdict": itl,
                    "tpot_p99_reason": tpot_why, "itl_p99_reason": itl_why,
                    "source": (r or p).source, "records_coverage": r.records_coverage if r else None})
        mine = _scope_pools(pools, scope, mode)
        engines = sorted({getattr(x, "engine", "vllm") for x in mine}) or ["vllm"]
        est = spec_figures.estimated_figures([(estimates or {}).get(x.id) for x in mine]) if estimates else None
        out[-1].update(engine_cells(engines, out[-1], est))
    return out


def alert_summary(session: Session, *, model: str, rng: Range, now: datetime) -> dict[str, Any]:
    """Alerts fired in the week (transitions to firing) and the time inside the week during which at least
    one alert of the model was firing (overlapping alerts count once: intervals.covered_seconds)."""
    end = min(rng.end, max(now, rng.start))
    items, fired, clipped = [], 0, []
    for st, trs in repo.alert_history(session, model_name=model, start=rng.start, end=rng.end):
        since: datetime | None = None
        spans: list[tuple[datetime, datetime | None]] = []
        for tr in trs:
            if tr.to_phase == "firing" and since is None:
                since = tr.at
                fired += rng.start <= tr.at < rng.end
            elif tr.from_phase == "firing" and tr.to_phase != "firing" and since is not None:
                spans.append((since, tr.at))
                since = None
        if since is not None:
            spans.append((since, None))
        for a, b in spans:
            lo, hi = max(a, rng.start), min(b or end, end)
            secs = max(0.0, (hi - lo).total_seconds())
            if secs > 0 or rng.start <= a < rng.end:
                clipped.append((lo, hi))
                items.append({"rule": st.rule, "severity": st.severity, "traffic_class": st.labels.get("traffic_class"),
                              "fired_at": a.isoformat(), "resolved_at": b.isoformat() if b else None,
                              "seconds_in_week": secs})
    return {"fired": int(fired), "seconds_in_alert": intervals.covered_seconds(clipped), "items": items}


def drafter_comparison(pools, data: analytics.WindowData, rows: list[ClassSummaryRead],
                       settings: Settings) -> list[dict[str, Any]]:
    """Two spec modes of one model, per class, like a baseline comparison: the incumbent (first seen) is
    the reference; alpha, tau, per-position acceptance and the P99 TPOT verdict of the challenger vs it."""
    spec = [p for p in pools if p.spec_mode != settings.baseline_mode]
    modes = sorted({p.spec_mode for p in spec}, key=lambda m: (min(p.first_seen for p in spec if p.spec_mode == m), m))
    out = []
    for challenger in modes[1:]:
        ref = modes[0]
        for cls in sorted({p.traffic_class for p in spec}) + [MIXED]:
            a = next((r for r in rows if r.traffic_class == cls and r.spec_mode == ref), None)
            b = next((r for r in rows if r.traffic_class == cls and r.spec_mode == challenger), None)
            if a is None or b is None or not a.volume.drafts or not b.volume.drafts:
                continue
            bins = {m: [x for p in spec if p.spec_mode == m and (cls == MIXED or p.traffic_class == cls)
                        for x in data.hist["tpot"].get(p.id, [])] for m in (ref, challenger)}
            cmp = latency.compare("tpot", spec_bins=bins[challenger], base_bins=bins[ref], baseline=None,
                                  layouts=data.layouts, quantiles=(0.99,))
            q = cmp.quantiles[0] if cmp.quantiles else None
            out.append({"scope": cls, "reference": ref, "challenger": challenger,
                        "alpha": [a.acceptance_rate, b.acceptance_rate],
                        "tau": [a.mean_acceptance_length, b.mean_acceptance_length],
                        "per_position": [a.per_position_conditional, b.per_position_conditional],
                        "tpot_mean": [cmp.baseline_mean, cmp.spec_mean],
                        "tpot_p99_verdict": q.verdict.verdict if q and q.verdict else None,
                        "tpot_p99_reason": q.verdict.reason if q and q.verdict else None,
                        "tpot_p99_delta_rel": q.delta_rel if q else None})
    return out


def _stages(session: Session, model: str, rng: Range) -> tuple[list[dict], list[dict], list[dict], list[dict]]:
    scopes, changes, decisions, pending = [], [], [], []
    for t in repo.tracks(session, model_name=model):
        end_ev, start_ev = repo.stage_at(session, t.id, rng.end), repo.stage_at(session, t.id, rng.start)
        stage = end_ev.to_stage if end_ev else None
        if stage is None:
            continue
        scopes.append({"scope": t.scope, "stage": stage, "step": ro.step_number(stage),
                       "stage_at_start": start_ev.to_stage if start_ev else None, "since": end_ev.at.isoformat()})
        if stage in PENDING:
            pending.append({"scope": t.scope, "stage": stage, "since": end_ev.at.isoformat(), "action": PENDING[stage]})
    for ev in reversed(repo.events(session, model_name=model, start=rng.start, end=rng.end)):
        t = repo.track_by_id(session, ev.track_id)
        item = {"at": ev.at.isoformat(), "scope": t.scope if t else None, "kind": ev.kind, "action": ev.action,
                "from": ev.from_stage, "to": ev.to_stage, "actor": ev.actor, "reason": ev.reason}
        changes.append(item)
        if ev.kind == "manual":
            decisions.append(item)
    return scopes, changes, decisions, pending


def week_money(m, hours: float | None, currency: str) -> dict[str, Any]:
    """The report's one money figure, "saved this week so far (N h of data)": the saving over the week up to
    now (services.capacity over [week start, min(week end, now)), its 95 % interval, the hours of data it
    rests on (domain.capacity.hours_of_data) and the label every surface shows for it."""
    return {"saved_this_week_so_far": m.saved_in_window, "saved_this_week_so_far_low": m.saved_in_window_low,
            "saved_this_week_so_far_high": m.saved_in_window_high, "hours_of_data": hours, "currency": currency,
            "label": money.saved_week_label(hours)}


def capacity_section(session: Session, *, model: str, pools, rng: Range, now: datetime,
                     settings: Settings) -> tuple[dict[str, Any], list[cap.Money]]:
    """Capacity and money of the week so far (services.capacity): a line per spec pool, the model's total, and
    the total's bootstrap replicates for the fleet total."""
    rng = Range(rng.start, min(rng.end, max(now, rng.start)))  # a week in progress: the week so far
    mc = capacity.model_capacity(session, model_name=model, rng=rng, now=now, settings=settings, pools=pools)
    cur = settings.currency
    lines = [{"scope": c.traffic_class, "spec_mode": c.spec_mode, "cost_per_mtok_spec": c.money.cost_per_mtok_spec,
              "cost_per_mtok_baseline": c.money.cost_per_mtok_baseline,
              **week_money(c.money, money.hours_of_data([c.spec.seconds]), cur),
              "per_replica": c.spec.per_replica, "per_replica_baseline": c.baseline.per_replica if c.baseline else None,
              "stops_paying_band": c.stops_paying_band, "stops_paying_significant": c.stops_paying_significant,
              "operating_band": c.operating_band, "note": c.note} for c in mc.read.classes]
    hours = money.hours_of_data([c.spec.seconds for c in mc.read.classes if c.money.saved_in_window is not None])
    price = mc.read.classes[0].gpu_hour_price if mc.read.classes else None
    gpus = mc.read.classes[0].gpus_per_replica if mc.read.classes else None
    return {"lines": lines, "total": week_money(mc.read.total, hours, cur), "currency": cur, "gpu_hour_price": price,
            "gpus_per_replica": gpus, "method": mc.read.method}, mc.parts


def context_section(session: Session, *, pools, rng: Range) -> list[dict[str, Any]]:
    """α by context length over the week, per records pool (class x spec mode) of the model: the API's
    `by_context_length` (per_request.context_length_bands, the same function and the same bands). Empty
    when the model has no per-request records pool; a pool whose records carry no prompt_tokens has no bands."""
    recs = sorted((p for p in pools if p.origin == "requests"), key=lambda p: (p.traffic_class, p.spec_mode))
    bands = per_request.context_length_bands(session, pool_ids=[p.id for p in recs], rng=rng)
    return [{"scope": p.traffic_class, "spec_mode": p.spec_mode, "bands": bands.get(p.id, [])} for p in recs]


def model_report(session: Session, *, model: str, rng: Range, prev: Range, now: datetime,
                 settings: Settings, parts: list | None = None) -> dict[str, Any]:
    """One model's section; its capacity total's replicates are appended to `parts` (the fleet total)."""
    pools = analytics.model_pools(session, model)
    data = analytics.fetch(session, pools=pools, rng=rng, settings=settings)
    rows = analytics.model_summaries(pools, data, settings=settings, now=now)
    est_ids = [p.id for p in pools if engine_words.estimated(getattr(p, "engine", "vllm"), "acceptance_rate")]
    estimates = queries.estimate_sums(session, pool_ids=est_ids, start=rng.start, end=rng.end,
                                      bucket_seconds=settings.bucket_seconds) if est_ids else {}
    prev_rows = analytics.model_summaries(pools, analytics.fetch(session, pools=pools, rng=prev, settings=settings),
                                          settings=settings, now=now)
    scopes, changes, decisions, pending = _stages(session, model, rng)
    mixed = next((s for s in scopes if s["scope"] == MIXED), None)
    cap_section, model_parts = capacity_section(session, model=model, pools=pools, rng=rng, now=now, settings=settings)
    if parts is not None:
        parts += model_parts
    return {"model": model, "capacity": cap_section, "stage": mixed["stage"] if mixed else "untracked",
            "step": mixed["step"] if mixed else None, "scopes": scopes, "changes": changes,
            "classes": _class_rows(rows, prev_rows, pools, estimates=estimates),
            "class_modes": _class_rows(rows, prev_rows, pools, every_mode=True, estimates=estimates),
            "engines": sorted({getattr(p, "engine", "vllm") for p in pools if getattr(p, "origin", "engine") == "engine"}), "alerts": alert_summary(session, model=model, rng=rng, now=now),
            "decisions": decisions, "pending": pending,
            "drafters": drafter_comparison(pools, data, rows, settings),
            "by_context_length": context_section(session, pools=pools, rng=rng)}


def weekly(session: Session, *, week: str, now: datetime, settings: Settings, model: str | None = None) -> dict[str, Any]:
    rng = week_range(week, settings.report_timezone)
    if rng.start >= now:
        raise InvalidParameter(f"week={week}: has not started yet")
    prev = week_range(previous_week(week), settings.report_timezone)
    models = [model] if model else queries.model_names(session)
    parts: list[cap.Money] = []
    reports = [model_report(session, model=m, rng=rng, prev=prev, now=now, settings=settings, parts=parts)
               for m in models]
    hours = [m["capacity"]["total"]["hours_of_data"] for m in reports]
    fleet_hours = max((h for h in hours if h is not None), default=None)
    total = cap.total_saving(parts, window_seconds=(min(rng.end, now) - rng.start).total_seconds())
    limits = fleet_alerts.thresholds(session, settings, default=settings.rollout_gate_alpha)
    for m in reports:  # the gate's threshold per scope: the alert rules' alpha_low for its class, as the gate
        for c in (*m["classes"], *m["class_modes"]):
            c["threshold"] = limits.of(m["model"], c["scope"], c["spec_mode"]) if c["spec_mode"] else None
    out = {"week": week, "previous_week": previous_week(week), "timezone": settings.report_timezone,
           "start": rng.start.isoformat(), "end": rng.end.isoformat(), "threshold": settings.rollout_gate_alpha,
           "complete": rng.end <= now, "generated_at": now.isoformat(), "currency": settings.currency,
           "models": reports, "capacity_total": week_money(total, fleet_hours, settings.currency)}
    out["what_changed"] = report_changes.week_changes(session, models=models, rng=rng, now=now, settings=settings)
    out["stamp"] = stamp(out)
    out["summary"] = summary_table(out)
    out["gate"] = gate_text(out)
    return out
