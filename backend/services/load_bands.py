"""α and τ by concurrency band from per-request records, and the load-stability finding (the API's
`by_concurrency` and `load_stability` per class of GET /requests/acceptance, and the inputs of the
`load_instability` alert rule: one query, one domain function, backend.domain.load_stability)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import alert_repo
from backend.db import request_repo as repo
from backend.domain import load_stability as ls
from backend.domain.alert_config import ConfigError, Rule, parse_config
from backend.domain.bands import BAND_EDGES

Groups = list[tuple[datetime, int | None, ls.LoadSums]]


def groups_by_pool(session: Session, *, pool_ids: Sequence[int], lo: datetime, hi: datetime, settings: Settings,
                   label_filter: dict[str, str] | None = None) -> dict[int, Groups]:
    """records pool id -> its (bucket, band index, sums) groups over the requests that drafted in (lo, hi]."""
    out: dict[int, Groups] = defaultdict(list)
    if not pool_ids:
        return out
    for (pid, bucket, band, basis, n, steps, d, a, saa, sdd, sad, sss, sas, asum, asq) in repo.alpha_by_concurrency(
            session, pool_ids=pool_ids, lo=lo, hi=hi, width=settings.bucket_seconds, band_edges=BAND_EDGES,
            label_filter=label_filter):
        out[pid].append((bucket, band, ls.LoadSums(
            int(n), float(steps or 0), float(d or 0), float(a or 0), float(saa or 0), float(sdd or 0),
            float(sad or 0), float(sss or 0), float(sas or 0), float(asum or 0), float(asq or 0),
            int(n) if basis == ls.RECORD else 0, int(n) if basis == ls.POOL else 0,
            with_steps=int(n) if steps is not None else 0, with_draft_tokens=int(n) if d is not None else 0)))
    return out


def rule_params(rule: Rule | None, labels: dict[str, str], *, min_drafts: float) -> ls.RuleParams:
    """The rule's parameters for one target (after its overrides); no rule: the defaults of the rule kind."""
    if rule is None:
        return ls.RuleParams(min_drafts=float(min_drafts))
    labels = {**labels, "rule": rule.name}
    v = lambda key: float(rule.value(key, labels))
    return ls.RuleParams(boundary=int(v("boundary")), margin=v("margin"), recover_margin=v("recover_margin"),
                         dispersion_ratio=v("dispersion_ratio"),
                         recover_dispersion_ratio=v("recover_dispersion_ratio"), min_drafts=rule.min_drafts)


def stored_rules(session: Session) -> list[Rule]:
    """The load_instability rules of the alert config in force (read only; none when none is stored or it no
    longer parses)."""
    latest = alert_repo.latest_config(session)
    if latest is None:
        return []
    try:
        config = parse_config(latest.content)
    except ConfigError:
        return []
    return [r for r in config.rules if r.kind == "load_instability"]


def rule_for(rules: list[Rule], labels: dict[str, str]) -> Rule | None:
    """The first load_instability rule that selects the target, as the evaluator picks it."""
    return next((r for r in rules if r.selects({**labels, "rule": r.name})), None)


def class_view(groups: Groups, params: ls.RuleParams) -> dict:
    """One class's `by_concurrency` rows, its requests without a band, and its `load_stability` finding."""
    rows, unknown = ls.band_table(groups, boundary=params.boundary)
    ev = ls.evaluate(groups, params)
    v = ev.values or {}
    return {"by_concurrency": rows, "requests_without_concurrency": unknown.requests,
            "load_stability": {"status": ev.status, "finding": ev.status == "breached", "falls": v.get("falls"),
                               "unstable": v.get("unstable"), "text": ev.reason,
                               "boundary_running_requests": params.boundary,
                               "parameters": {"margin": params.margin, "recover_margin": params.recover_margin,
                                              "dispersion_ratio": params.dispersion_ratio,
                                              "recover_dispersion_ratio": params.recover_dispersion_ratio,
                                              "min_drafts": params.min_drafts},
                               **{k: v.get(k) for k in (
                                   "alpha_low_load", "alpha_high_load", "difference", "difference_interval",
                                   "dispersion_low_load", "dispersion_high_load", "dispersion_ratio",
                                   "dispersion_ratio_interval", "drafts_low_load", "drafts_high_load",
                                   "buckets_low_load", "buckets_high_load")}}}
