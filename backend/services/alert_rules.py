"""One alert rule on one target (services.alert_eval gathers the targets' inputs): the domain Evaluation,
with no_data while the target is stale or its engine does not give the figure the rule reads."""

from __future__ import annotations

from datetime import datetime

from backend.config import Settings
from backend.domain import alerting as al
from backend.domain import context_drift as cd
from backend.domain import load_stability as ls
from backend.domain import replicas as rep
from backend.domain.alert_config import AlertConfig, Rule
from backend.domain.engines import wording
from backend.services import load_bands as load_svc
from backend.services.alert_eval import Target


def _p99_verdict(metric):
    """The P99 row's verdict object, as /summary shows it (None without a baseline)."""
    q = next((x for x in (metric.quantiles if metric else []) if x.q == 0.99), None)
    return q.verdict if q is not None else None


def stale_after(config: AlertConfig, settings: Settings) -> float:
    rule = next((r for r in config.rules if r.kind == "stale_data"), None)
    return float(rule.params["after"]) if rule else float(settings.stale_after_seconds)


def age_of(target: Target, now: datetime) -> float | None:
    seen = [p.last_seen for p in target.pools if p.last_seen is not None]
    return (now - min(seen)).total_seconds() if seen else None


def engine_blind(rule: Rule, target: Target) -> str | None:
    """Why a rule cannot evaluate this target's pools: their engine does not give the figure it reads as an
    exact count (SGLang's acceptance is an estimate; llama.cpp has no latency histogram), in the words every
    surface uses (backend.domain.engines.wording); None: it can."""
    if not target.pools or target.is_replica:
        return None
    figures = (tuple(rule.params.get("metrics") or ()) if rule.kind == "latency_regression"
               else wording.RULE_FIGURES.get(rule.kind, ()))
    return wording.unevaluable_text([p.engine for p in target.pools], figures) if figures else None


def _with_excluded(reason: str | None, target: Target) -> str | None:
    """A row mixing exact and estimate-only engines is evaluated on its exact counts: the reason says which
    engines' pools that leaves out."""
    note = wording.excluded_text([p.engine for p in target.pools]) if target.pools else None
    if note is None or wording.estimate_only([p.engine for p in target.pools], "acceptance_rate"):
        return reason
    return f"{reason}; {note}" if reason else note


def _ended(ev, target: Target, *, excluded: bool = False, **extra) -> al.Evaluation:
    """The evaluation with the end of the window it read (and, `excluded`, the engines its reason leaves out)."""
    end = target.window_end.isoformat() if target.window_end else None
    reason = _with_excluded(ev.reason, target) if excluded else ev.reason
    return al.Evaluation(ev.status, ev.value, ev.threshold, reason, {**(ev.values or {}), **extra, "window_end": end})


def evaluate(rule: Rule, target: Target, *, now: datetime, stale_after_seconds: float,
             limit: int = 0) -> al.Evaluation:
    """One rule on one target (parameters after per-model/class overrides); `limit` is the pool limit."""
    labels = target.labels
    v = lambda key: rule.value(key, labels)
    if rule.kind == "pool_limit":
        lookback = float(v("lookback"))
        return al.pool_limit(target.refused_pools.get(lookback, 0), limit=limit, lookback=lookback)
    age = age_of(target, now)
    if rule.kind == "stale_data":
        return al.stale_data(age, after=float(v("after")))
    if age is None or age > stale_after_seconds:
        return al.Evaluation("no_data", None, None, "data is stale", {"age_seconds": age})
    blind = engine_blind(rule, target)
    if blind is not None:  # never evaluated on an empty (or estimated) figure, never fired on a 0
        return al.Evaluation("no_data", None, None, blind, {"engines": sorted({p.engine for p in target.pools})})
    if rule.kind == "replica_outlier":
        w = float(v("window"))
        vols = target.replicas.get(w, {})
        mine, others = rep.aligned(vols, target.replica)  # over the buckets both report
        ev = rep.replica_outlier(mine, others, gap=float(v("gap")), recover_margin=float(v("recover_margin")),
                                 min_drafts=rule.min_drafts, window=w, replicas=len(vols))
        return _ended(ev, target)
    if rule.kind == "alpha_low":
        s, lw = float(v("short_window")), float(v("long_window"))
        short, long = target.rows.get(s), target.rows.get(lw)
        stat = lambda row, w: al.WindowStat(w, row.acceptance_rate if row else None,
                                            row.volume.drafts if row else None,
                                            row.volume.accepted_tokens if row else None,
                                            row.volume.draft_tokens if row else None)
        ev = al.alpha_low(stat(short, s), stat(long, lw), threshold=float(v("threshold")),
                          recover_margin=float(v("recover_margin")), min_drafts=rule.min_drafts)
        return _ended(ev, target, excluded=True, k=long.num_spec_tokens if long else None)
    w = float(v("window"))
    if rule.kind == "context_drift":
        if not target.records:
            return al.Evaluation("no_data", None, None, "no per-request records for this pool", {"window": w})
        boundary = int(v("boundary"))
        short, long = cd.split(target.context.get(w, []), boundary)
        ev = cd.context_drift(short, long, boundary=boundary, margin=float(v("margin")),
                              recover_margin=float(v("recover_margin")), min_drafts=rule.min_drafts, window=w)
        return _ended(ev, target)
    if rule.kind == "load_instability":
        if not target.records:
            return al.Evaluation("no_data", None, None, "no per-request records for this pool", {"window": w})
        params = load_svc.rule_params(rule, labels, min_drafts=rule.min_drafts)
        ev = ls.evaluate(target.load.get(w, []), params, window=w)
        return _ended(ev, target)
    row = target.rows.get(w)
    drafts = row.volume.drafts if row else None
    if rule.kind == "margin_negative":
        speed = row.measured_speedup if row and row.measured_speedup is not None else (row.estimated_speedup if row else None)
        source = ("measured" if row and row.measured_speedup is not None else f"estimated (eps_step {row.eps_step_source})") if row else None
        ev = al.margin_negative(speed, source=source, min_speedup=float(v("min_speedup")),
                                recover_margin=float(v("recover_margin")), drafts=drafts,
                                min_drafts=rule.min_drafts, window=w)
        return al.Evaluation(ev.status, ev.value, ev.threshold, _with_excluded(ev.reason, target), ev.values)
    if rule.kind == "latency_regression":
        if row is None or not drafts or drafts < rule.min_drafts:
            return al.Evaluation("no_data", None, None, "too little volume", {"drafts": drafts, "window": w})
        found = {m: _p99_verdict(getattr(row, m)) for m in rule.params["metrics"]}
        return al.latency_regression({m: v.verdict if v else None for m, v in found.items()}, window=w,
                                     details={"drafts": drafts},
                                     reasons={m: v.reason for m, v in found.items() if v is not None})
    if rule.kind == "acceptance_drift":
        depth = row.drift.last_to_first_ratio if row and row.drift else None
        bands = target.band_alpha.get(w, {})
        conc = None
        if len(bands) >= 2 and bands[min(bands)][0] > 0:
            conc = bands[max(bands)][0] / bands[min(bands)][0]
        return al.acceptance_drift(depth, conc, min_depth_ratio=float(v("min_depth_ratio")),
                                   min_concurrency_ratio=float(v("min_concurrency_ratio")), drafts=drafts,
                                   min_drafts=rule.min_drafts, window=w)
    raise ValueError(f"unknown rule kind {rule.kind!r}")


def window_text(rule: Rule) -> str:
    def fmt(s: float) -> str:
        s = int(s)
        for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
            if s >= n and s % n == 0:
                return f"{s // n}{unit}"
        return f"{s}s"
    if rule.kind == "alpha_low":
        return f"{fmt(rule.params['short_window'])} and {fmt(rule.params['long_window'])} (both below)"
    if rule.kind == "stale_data":
        return f"stale after {fmt(rule.params['after'])}"
    if rule.kind == "pool_limit":
        return f"refusals in the last {fmt(rule.params['lookback'])}"
    return fmt(rule.params["window"])
