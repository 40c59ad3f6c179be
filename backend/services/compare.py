"""Drafter / configuration A/B of one model: two spec modes side by side over one window, or one spec mode
before and after an instant (a change of drafter, K or vLLM version, found in config_changes or given).

Flow: the pools' buckets (db.compare_queries) -> per side, per scope (each traffic class, and the mix) and
stratum (concurrency band; class x band for the mix), time bins of additive sums (the baseline pool's TPOT
of the same bin and band beside the spec pool's) -> domain.ab_compare for alpha, tau, per-position
acceptance, measured speedup and cost per 1 M tokens, and domain.verdict for P99 ITL / TPOT (B's histograms
against A's, buckets in the bands both sides ran in). Every surface (API, CSV, CLI, weekly report) reads the
dict :func:`compare` returns.
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import compare_queries, config_repo, queries
from backend.db.models import Pool
from backend.domain import ab_compare as ab
from backend.domain import capacity as cap
from backend.domain import money
from backend.domain.bands import concurrency_band
from backend.domain.verdict import latency_verdicts
from backend.schemas.summary import MIXED
from backend.services import analytics
from backend.services import capacity as capacity_service
from backend.services.errors import InvalidParameter, NotFound, UnknownModel
from backend.services.windows import Range, verdict_bin_seconds

DEFAULT_SPAN = 7 * 86400
METRIC_LABELS = {"alpha": "alpha (accepted / draft tokens)", "tau": "tau (tokens per step)",
                 "measured_speedup": "measured speedup (TPOT baseline / spec)", "cost_per_mtok": "cost per 1 M tokens"}


class _Side:
    def __init__(self, name: str, label: str, pools: list[Pool], rng: Range) -> None:
        self.name, self.label, self.pools, self.rng = name, label, pools, rng


def _spec_pools(pools: list[Pool], settings: Settings) -> list[Pool]:
    return [p for p in pools if p.spec_mode != settings.baseline_mode and getattr(p, "origin", "engine") == "engine"]


def _label(pools: list[Pool], fallback: str) -> str:
    names = sorted({p.drafter for p in pools if p.drafter})
    return ", ".join(names) if len(names) == 1 else fallback


def _pool_info(pools: list[Pool]) -> dict[str, Any]:
    def one(vals: set) -> Any:
        return vals.pop() if len(vals) == 1 else None
    return {"spec_mode": one({p.spec_mode for p in pools}), "drafter": one({p.drafter for p in pools}),
            "num_spec_tokens": one({p.num_spec_tokens for p in pools}),
            "vllm_version": one({p.vllm_version for p in pools})}


def _sides(session: Session, pools: list[Pool], *, model: str, a: str | None, b: str | None, at: datetime | None,
           rng: Range, span: int, now: datetime, settings: Settings) -> tuple[str, _Side, _Side, list[dict]]:
    spec = _spec_pools(pools, settings)
    modes = sorted({p.spec_mode for p in spec})
    if at is None:
        if not a or not b:
            raise InvalidParameter("give a= and b= (two spec modes side by side) or at= (before/after an instant)")
        for m in (a, b):
            if m not in modes:
                raise NotFound(f"model {model!r} has no spec mode {m!r}", modes, code="unknown_spec_mode")
        if a == b:
            raise InvalidParameter("a and b are the same spec mode: use at= to compare it before and after")
        pa, pb = [p for p in spec if p.spec_mode == a], [p for p in spec if p.spec_mode == b]
        return "side-by-side", _Side("a", _label(pa, a), pa, rng), _Side("b", _label(pb, b), pb, rng), []
    if b is not None:
        raise InvalidParameter("with at=, give the spec mode as a= (or none: every spec mode of the model)")
    if a is not None and a not in modes:
        raise NotFound(f"model {model!r} has no spec mode {a!r}", modes, code="unknown_spec_mode")
    if at >= now:
        raise InvalidParameter("at= must be in the past: there is no 'after' yet")
    sel = [p for p in spec if a is None or p.spec_mode == a]
    after = Range(at, min(at + timedelta(seconds=span), now))
    before = Range(at - (after.end - after.start), at)
    ids = {p.id for p in sel}
    found = [c for c in config_repo.changes(session, start=at, end=at + timedelta(seconds=1), model_name=model)
             if c.pool_id in ids]
    lb, la = f"before {at.isoformat()}", f"after {at.isoformat()}"
    if found:
        lb = "; ".join(sorted({f"{_field(c.field)} {c.old_value}" for c in found}))
        la = "; ".join(sorted({f"{_field(c.field)} {c.new_value}" for c in found}))
    changes = [_change_dict(c) for c in found]
    return "before-after", _Side("a", lb, sel, before), _Side("b", la, sel, after), changes


def _field(f: str) -> str:
    return {"num_spec_tokens": "K", "vllm_version": "vLLM", "drafter": "drafter"}.get(f, f)


def _change_dict(c: config_repo.ChangeRow) -> dict[str, Any]:
    return {"at": c.at.isoformat(), "model": c.model_name, "traffic_class": c.traffic_class, "spec_mode": c.spec_mode,
            "field": c.field, "old": c.old_value, "new": c.new_value, "source": c.source, "note": c.note}


class _Binned:
    """One side's buckets binned: (scope, stratum) -> time bin -> sums; plus histogram rows per family."""

    def __init__(self) -> None:
        self.sums: dict[tuple[str, Any], dict[int, dict[str, Any]]] = defaultdict(lambda: defaultdict(dict))
        self.hist: dict[tuple[str, str, Any], dict[int, np.ndarray]] = defaultdict(dict)  # (family, scope, stratum)
        self.layout: dict[str, int] = {}
        self.off_layout = 0
        self.tokens: dict[str, float] = defaultdict(float)
        self.seconds = 0.0


def _add(d: dict[str, Any], key: str, v: float | None) -> None:
    if v is not None and math.isfinite(v):
        d[key] = d.get(key, 0.0) + float(v)


def _bin(session: Session, side: _Side, base_pools: dict[str, Pool], *, settings: Settings) -> _Binned:
    rng, width = side.rng, settings.bucket_seconds
    bin_s = verdict_bin_seconds(rng.seconds, bucket_seconds=width, max_samples=settings.verdict_max_samples)
    spec_ids = {p.id: p for p in side.pools}
    bases = {p.id: p for p in base_pools.values()}
    rows = compare_queries.buckets(session, pool_ids=[*spec_ids, *bases], start=rng.start, end=rng.end)
    reps = capacity_service.replica_counts(session, side.pools, rng, settings)
    out = _Binned()
    out.seconds = rng.seconds
    for r in rows:
        band = concurrency_band(r.running_mean)
        if band is None:
            continue
        t = int((r.bucket_start - rng.start).total_seconds() // bin_s)
        if r.pool_id in bases:
            cls = bases[r.pool_id].traffic_class
            for scope, stratum in ((cls, band), (MIXED, (cls, band))):
                d = out.sums[(scope, stratum)][t]
                _add(d, "base_tpot_sum", r.tpot_sum)
                _add(d, "base_tpot_count", r.tpot_count)
            continue
        p = spec_ids[r.pool_id]
        cls = p.traffic_class
        start_ts = r.bucket_start.timestamp()
        n = reps[p.id].at(start_ts, start_ts + r.bucket_seconds)
        for scope, stratum in ((cls, band), (MIXED, (cls, band))):
            d = out.sums[(scope, stratum)][t]
            d["has_spec"] = True
            for key, v in (("drafts", r.drafts), ("draft_tokens", r.draft_tokens), ("accepted", r.accepted),
                           ("tpot_sum", r.tpot_sum), ("tpot_count", r.tpot_count), ("tokens", r.generation_tokens)):
                _add(d, key, v)
            if r.per_pos:
                cur = d.get("per_pos") or []
                d["per_pos"] = [(cur[i] if i < len(cur) else 0.0) + (r.per_pos[i] if i < len(r.per_pos) else 0.0)
                                for i in range(max(len(cur), len(r.per_pos)))]
                d["k_min"] = min(d.get("k_min", len(r.per_pos)), len(r.per_pos))
            if n is None:
                d["replicas_unknown"] = True
            else:
                _add(d, "replica_seconds", n * r.bucket_seconds)
            for fam, lid, counts in (("itl", r.itl_layout_id, r.itl_buckets), ("tpot", r.tpot_layout_id, r.tpot_buckets)):
                if lid is None or not counts:
                    continue
                if out.layout.setdefault(fam, lid) != lid:
                    out.off_layout += 1
                    continue
                cell = out.hist[(fam, scope, stratum)]
                arr = np.asarray(counts, dtype=float)
                cell[t] = cell[t] + arr if t in cell else arr
        _add(out.tokens, cls, r.generation_tokens)
        _add(out.tokens, MIXED, r.generation_tokens)
    return out


def _bins_of(binned: _Binned, scope: str) -> dict[Any, list[ab.Bin]]:
    strata: dict[Any, list[ab.Bin]] = {}
    keys = sorted((k for k in binned.sums if k[0] == scope), key=lambda k: str(k[1]))
    for key in keys:
        out = []
        for _t, d in sorted(binned.sums[key].items()):
            if not d.get("has_spec"):
                continue
            k = d.get("k_min", 0)
            out.append(ab.Bin(drafts=d.get("drafts", 0.0), draft_tokens=d.get("draft_tokens", 0.0),
                              accepted=d.get("accepted", 0.0), per_pos=tuple((d.get("per_pos") or [])[:k]),
                              tpot_sum=d.get("tpot_sum", 0.0), tpot_count=d.get("tpot_count", 0.0),
                              base_tpot_sum=d.get("base_tpot_sum", 0.0), base_tpot_count=d.get("base_tpot_count", 0.0),
                              tokens=d.get("tokens", 0.0),
                              replica_seconds=None if d.get("replicas_unknown") else d.get("replica_seconds", 0.0)))
        if out:
            strata[key[1]] = out
    return strata


def _p99(fam: str, scope: str, strata: tuple, a: _Binned, b: _Binned, layouts: dict[int, tuple[float, ...]]) -> dict:
    lid_a, lid_b = a.layout.get(fam), b.layout.get(fam)
    if lid_a is None or lid_b is None or lid_a != lid_b:
        why = "no histogram on a side" if lid_a is None or lid_b is None else "the two sides use different buckets"
        return {"verdict": "inconclusive", "reason": why, "a": None, "b": None, "delta_low": None, "delta_high": None}

    def cells(x: _Binned) -> dict:
        return {s: {t: arr.tolist() for t, arr in x.hist.get((fam, scope, s), {}).items()} for s in strata}

    rows_a, rows_b = ab.standardised_histograms(cells(a), cells(b), strata)  # A at B's mix of bands
    v = latency_verdicts(rows_b, rows_a, layouts[lid_a], (0.99,))[0]
    return {"verdict": v.verdict, "reason": v.reason.replace("spec", "B").replace("baseline", "A"),
            "a": v.base_value, "b": v.spec_value, "delta_low": v.delta_low, "delta_high": v.delta_high}


def _metric_dict(m: ab.MetricComparison) -> dict[str, Any]:
    return {"metric": m.metric, "a": m.a, "b": m.b, "change": m.change, "change_low": m.change_low,
            "change_high": m.change_high, "verdict": m.verdict, "reason": m.reason,
            "higher_is_better": m.higher_is_better}


def _stratum_text(s: Any) -> str:
    return f"{s[0]} {s[1]}" if isinstance(s, tuple) else str(s)


def compare(session: Session, *, model: str, a: str | None = None, b: str | None = None, at: datetime | None = None,
            rng: Range | None = None, span_seconds: int = DEFAULT_SPAN, traffic_class: str | None = None,
            now: datetime, settings: Settings) -> dict[str, Any]:
    """The A/B of one model (see the module docstring); `rng` for side by side, `at` (+ span) for before/after."""
    pools = analytics.model_pools(session, model)
    if not pools:
        raise UnknownModel(model, queries.model_names(session))
    classes = sorted({p.traffic_class for p in _spec_pools(pools, settings)})
    if traffic_class is not None and traffic_class not in classes:
        raise NotFound(f"model {model!r} has no spec pool of class {traffic_class!r}", classes,
                       code="unknown_traffic_class")
    if span_seconds < settings.bucket_seconds or span_seconds > settings.max_range_seconds:
        raise InvalidParameter(f"window must be between {settings.bucket_seconds} s and {settings.max_range_seconds} s")
    rng = rng or Range(now - timedelta(days=1), now)
    mode, side_a, side_b, changes = _sides(session, pools, model=model, a=a, b=b, at=at, rng=rng, span=span_seconds,
                                           now=now, settings=settings)
    base = {p.traffic_class: p for p in pools if p.spec_mode == settings.baseline_mode
            and getattr(p, "origin", "engine") == "engine"}
    binned = {s.name: _bin(session, s, base, settings=settings) for s in (side_a, side_b)}
    price, gpus = capacity_service.price_of(model, settings)
    rph = cap.replica_hour_price(price, gpus)
    layouts = queries.layout_bounds(session)
    scopes = ([traffic_class] if traffic_class else classes) + ([] if traffic_class else [MIXED])
    out_scopes = []
    for scope in scopes:
        sa_, sb_ = _bins_of(binned["a"], scope), _bins_of(binned["b"], scope)
        tb = binned["b"]
        per_week = cap.per_week(tb.tokens.get(scope), tb.seconds)
        c = ab.compare(sa_, sb_, replica_hour_price=rph, b_tokens_per_week=per_week)
        out_scopes.append({
            "scope": scope, "bands": [_stratum_text(s) for s in c.strata], "a_only": [_stratum_text(s) for s in c.a_only],
            "b_only": [_stratum_text(s) for s in c.b_only], "weights": list(c.weights),
            "compared_fraction": c.compared_fraction, "drafts": {"a": c.drafts[0], "b": c.drafts[1]},
            "metrics": [_metric_dict(m) for m in c.metrics],
            "p99": {fam: _p99(fam, scope, c.strata, binned["a"], tb, layouts) for fam in ("itl", "tpot")},
            "saving_per_week": c.saving_per_week, "saving_per_week_low": c.saving_per_week_low,
            "saving_per_week_high": c.saving_per_week_high, "notes": list(c.notes)})
    result = {"model": model, "mode": mode, "generated_at": now.isoformat(), "currency": settings.currency,
              "confidence": 0.95, "changes": changes,
              "a": {"label": side_a.label, "start": side_a.rng.start.isoformat(), "end": side_a.rng.end.isoformat(),
                    **_pool_info(side_a.pools)},
              "b": {"label": side_b.label, "start": side_b.rng.start.isoformat(), "end": side_b.rng.end.isoformat(),
                    **_pool_info(side_b.pools)},
              "scopes": out_scopes,
              "method": ("load-matched: bands both sides ran in, each side standardised to B's traffic per band; "
                         "95 % intervals by linearisation over time bins; P99 by histogram buckets (bootstrap over "
                         "time bins), A's histograms reweighted to B's observations per band")}
    result["sentence"] = sentence(result)
    return result


def _metric(scope: dict, name: str) -> dict | None:
    return next((m for m in scope["metrics"] if m["metric"] == name), None)


def sentence(r: dict[str, Any]) -> str:
    """"B vs A on MODEL: speedup +23 % (18–28 %) on chat, +4 % (−2–9 %) on code; saving X per week"."""
    parts = []
    for s in r["scopes"]:
        if s["scope"] == MIXED and len(r["scopes"]) > 1:
            continue
        m = _metric(s, "measured_speedup")
        if m is None:
            continue
        txt = ab.percent_text(m["change"], m["change_low"], m["change_high"])
        if m["verdict"] == ab.INCONCLUSIVE:
            txt = "inconclusive"
        parts.append(f"{txt} on {s['scope']}")
    mix = next((s for s in r["scopes"] if s["scope"] == MIXED), r["scopes"][0] if r["scopes"] else None)
    saving = mix.get("saving_per_week") if mix else None
    cost = (f"saving {money.money_text(saving, r['currency'])} per week" if saving is not None and saving >= 0
             else f"costing {money.money_text(-saving, r['currency'])} more per week" if saving is not None
             else "saving per week n/a (no GPU price or replica count)")
    return f"{r['b']['label']} vs {r['a']['label']} on {r['model']}: speedup {', '.join(parts) or 'n/a'}; {cost}"


CSV_FIELDS = ("model", "mode", "a", "b", "scope", "metric", "a_value", "b_value", "change", "change_low", "change_high",
              "verdict", "reason", "bands", "compared_fraction")


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    text = str(v)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text  # no formula injection in spreadsheets


def to_csv(r: dict[str, Any]) -> str:
    """One row per scope x metric (P99 ITL / TPOT as metrics p99_itl, p99_tpot with their deltas in seconds)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for s in r["scopes"]:
        common = [r["model"], r["mode"], r["a"]["label"], r["b"]["label"], s["scope"]]
        tail = [";".join(s["bands"]), s["compared_fraction"]]
        for m in s["metrics"]:
            w.writerow([_cell(x) for x in [*common, m["metric"], m["a"], m["b"], m["change"], m["change_low"],
                                            m["change_high"], m["verdict"], m["reason"], *tail]])
        for fam, v in s["p99"].items():
            w.writerow([_cell(x) for x in [*common, f"p99_{fam}", v["a"], v["b"], None, v["delta_low"],
                                            v["delta_high"], v["verdict"], v["reason"], *tail]])
    return buf.getvalue()
