"""What only per-request data shows: α distribution per class, request- vs draft-token-weighted α, α against
output length and context length, the lowest requests, reconciliation with the engine counters. Storing the
records: services.request_ingest."""

from __future__ import annotations

from functools import reduce

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries
from backend.db import request_repo as repo
from backend.domain import request_stats
from backend.domain.bands import BAND_EDGES
from backend.domain.records import known_add
from backend.services import load_bands
from backend.services.errors import InvalidParameter, UnknownModel
from backend.services.totals import group_rows
from backend.services.windows import Range

QUANTILES = (0.1, 0.5, 0.9)
HIST_BINS = 20


def _pools(session: Session, model: str) -> list:
    pools = queries.list_pools(session, model_name=model)
    if not pools:
        raise UnknownModel(model, queries.model_names(session))
    return pools


def parse_label_filter(values: list[str] | None, settings: Settings) -> dict[str, str]:
    out = {}
    for v in values or []:
        name, sep, value = v.partition("=")
        if not sep or name not in settings.requests_labels or not value:
            raise InvalidParameter(f"label={v!r}: expected name=value with name one of "
                                   f"{', '.join(settings.requests_labels)}")
        out[name] = value
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def distribution(session: Session, *, model: str, rng: Range, settings: Settings, traffic_class: str | None = None,
                 label_filter: dict[str, str] | None = None) -> dict:
    """Per class of the model's per-request pools: the α histogram, share below the threshold, P10/P50/P90,
    request-weighted vs draft-token-weighted α, α by output length, and both α with 95 % intervals by
    context-length band (context_length_bands); α and τ by concurrency band with the load-stability finding
    (services.load_bands)."""
    pools = [p for p in _pools(session, model) if p.origin == "requests"
             and (traffic_class is None or p.traffic_class == traffic_class)]
    ids = [p.id for p in pools]
    args = {"pool_ids": ids, "lo": rng.start, "hi": rng.end, "label_filter": label_filter}
    stats = {s.pool_id: s for s in repo.alpha_stats(session, threshold=settings.alpha_threshold,
                                                     quantiles=QUANTILES, **args)} if ids else {}
    hist = repo.alpha_histogram(session, bins=HIST_BINS, **args) if ids else {}
    by_len: dict[int, list] = {}
    for pid, band, n, d, a, mean in (repo.alpha_by_length(session, **args) if ids else []):
        by_len.setdefault(pid, []).append({
            "output_tokens_from": 2 ** band, "output_tokens_to": 2 ** (band + 1) - 1, "requests": n,
            "draft_token_weighted_alpha": _ratio(a, d), "request_weighted_alpha": mean})
    by_ctx = context_length_bands(session, pool_ids=ids, rng=rng, label_filter=label_filter)
    load = load_bands.groups_by_pool(session, settings=settings, **args)
    load_rules = load_bands.stored_rules(session) if load else []
    classes = []
    for p in sorted(pools, key=lambda p: p.traffic_class):
        s = stats.get(p.id)
        if s is None:
            continue
        target = {"model": p.model_name, "traffic_class": p.traffic_class, "spec_mode": p.spec_mode}
        params = load_bands.rule_params(load_bands.rule_for(load_rules, target), target,
                                        min_drafts=settings.min_drafts)
        classes.append({
            "traffic_class": p.traffic_class, "spec_mode": p.spec_mode, "num_spec_tokens": p.num_spec_tokens,
            "requests": s.requests, "requests_with_drafts": s.with_drafts, "drafts": s.steps,
            "draft_tokens": s.draft_tokens, "accepted_tokens": s.accepted, "output_tokens": s.output_tokens,
            "draft_token_weighted_alpha": _ratio(s.accepted, s.draft_tokens),
            "request_weighted_alpha": s.request_mean,
            "share_below_threshold": _ratio(s.below, s.with_drafts),
            "p10": s.quantiles[0], "p50": s.quantiles[1], "p90": s.quantiles[2],
            "histogram": {"bin_width": 1 / HIST_BINS, "counts": hist.get(p.id, [0] * HIST_BINS)},
            "by_output_length": by_len.get(p.id, []),
            "by_context_length": by_ctx.get(p.id, []),
            **load_bands.class_view(load.get(p.id, []), params),
        })
    return {"model_name": model, "window": {"start": rng.start, "end": rng.end}, "threshold": settings.alpha_threshold,
            "label_filter": label_filter or {}, "classes": classes}


def context_length_bands(session: Session, *, pool_ids: list[int], rng: Range,
                         label_filter: dict[str, str] | None = None) -> dict[int, list[dict]]:
    """α by context-length band per records pool: the API's `by_context_length`, the model page's and the
    weekly report's section (one function for every surface). Band b holds prompt_tokens in [2^b, 2^(b+1))
    (the first from 0, the last, 131,072 and up, open-ended), over the requests that sent prompt_tokens and
    drafted; per band: requests, drafts (verify steps), draft and accepted tokens, the pooled
    (draft-token-weighted) α and the request-weighted α, each with its 95 % interval (request = unit).
    A pool without such requests has no entry."""
    out: dict[int, list[dict]] = {}
    if not pool_ids:
        return out
    for pid, band, n, d, a, saa, sdd, sad, mean, sd, steps in repo.alpha_by_context(
            session, pool_ids=pool_ids, lo=rng.start, hi=rng.end, label_filter=label_filter):
        pooled, lo, hi = request_stats.pooled_alpha_interval(n, a, d, saa, sdd, sad)
        weighted, wlo, whi = request_stats.mean_alpha_interval(n, mean, sd)
        top = band == repo.CONTEXT_TOP_BAND
        out.setdefault(pid, []).append({
            "prompt_tokens_from": 2 ** band if band else 0, "prompt_tokens_to": None if top else 2 ** (band + 1) - 1,
            "requests": n, "drafts": steps, "draft_tokens": d, "accepted_tokens": a,
            "draft_token_weighted_alpha": pooled, "draft_token_weighted_alpha_interval": [lo, hi],
            "request_weighted_alpha": weighted, "request_weighted_alpha_interval": [wlo, whi]})
    return out


def lowest_requests(session: Session, *, model: str, rng: Range, settings: Settings, limit: int,
                    min_draft_tokens: int, traffic_class: str | None = None,
                    label_filter: dict[str, str] | None = None) -> dict:
    """The lowest-acceptance requests: ids and labels (never prompt text), for drafter fine-tuning."""
    if not 1 <= limit <= settings.requests_export_max:
        raise InvalidParameter(f"limit must be 1 .. {settings.requests_export_max} (requests_export_max)")
    pools = {p.id: p for p in _pools(session, model) if p.origin == "requests"
             and (traffic_class is None or p.traffic_class == traffic_class)}
    rows = repo.lowest(session, pool_ids=list(pools), lo=rng.start, hi=rng.end, limit=limit,
                       min_draft_tokens=min_draft_tokens, label_filter=label_filter) if pools else []
    return {"model_name": model, "window": {"start": rng.start, "end": rng.end}, "requests": [
        {"request_id": rid, "traffic_class": pools[pid].traffic_class, "labels": labels, "finish_time": fin,
         "output_tokens": out, "drafts": steps, "draft_tokens": d, "accepted_tokens": a, "alpha": alpha,
         "replica": replica}
        for rid, pid, labels, fin, out, steps, d, a, alpha, replica in rows]}


def reconciliation(session: Session, *, model: str, rng: Range, settings: Settings) -> dict:
    """Per-request sums vs the engine counters of the same model and window (buckets ending in it), and the
    coverage: the share of the engine's drafts, draft tokens and accepted tokens seen per request. The engine
    side is every spec-decoding pool of the model collected from vLLM (baseline pools have no drafts).
    Each coverage is flagged on its own (`coverage_flags`: coverage -> flag or None, request_stats.coverage_flag);
    `flags` lists every flag raised by any of them, plus the missing-data flags."""
    pools = _pools(session, model)
    spec = [p for p in pools if p.spec_mode != settings.baseline_mode]
    rows = queries.window_totals(session, pool_ids=[p.id for p in spec], start=rng.start, end=rng.end,
                                 bucket_seconds=settings.bucket_seconds, n_pos=1, band_edges=BAND_EDGES)
    per_pool = group_rows(rows)
    sums: dict[str, dict[str, float | None]] = {}
    for origin in ("engine", "requests"):
        t = [per_pool[p.id].all for p in spec if p.origin == origin and p.id in per_pool]
        sums[origin] = {name: reduce(known_add, (getattr(x, name) for x in t), None) for name in ("drafts", "draft_tokens", "accepted_tokens")}
        sums[origin]["alpha"] = _ratio(sums[origin]["accepted_tokens"], sums[origin]["draft_tokens"])
    eng, req = sums["engine"], sums["requests"]
    cov = {name: request_stats.coverage(req[name], eng[name]) for name in request_stats.COVERAGES}
    cov_flags = {name: request_stats.coverage_flag(req[name], eng[name]) for name in request_stats.COVERAGES}
    flags = []
    if eng["drafts"] is None:
        flags.append("no_engine_counters")
    if req["drafts"] is None:
        flags.append("no_per_request_data")
    flags += [f for f in ("per_request_exceeds_engine", "partial_coverage") if f in cov_flags.values()]
    return {"model_name": model, "window": {"start": rng.start, "end": rng.end}, "engine": eng, "per_request": req,
            "coverage": cov, "coverage_flags": cov_flags, "flags": flags,
            "coverage_band": [float(request_stats.COVERAGE_LOW), float(request_stats.COVERAGE_HIGH)]}
