"""Rule inputs from stored data: per window, the analytics summaries (the same numbers as /summary and
the fleet overview: r = A/D summed over the window, speedup, P99 verdicts, drift indicators, volume,
freshness), turned into one domain Evaluation per (rule, target).

A target is one spec pool class row (model x traffic class x spec mode), plus the model's `mixed` row
when it has several classes. Stale data is its own rule; while a target is stale every other rule reads
no_data, so missing data never resolves (or fires) anything.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries, replica_repo, request_repo
from backend.db.models import Pool
from backend.domain import acceptance as acc
from backend.domain import context_drift as cd
from backend.domain import pool_rows
from backend.domain import replicas as rep
from backend.domain.alert_config import AlertConfig
from backend.domain.mix import pooled
from backend.schemas.summary import ClassSummaryRead
from backend.services import load_bands as load_svc
from backend.services import replicas as replica_svc
from backend.services.analytics import fetch, model_summaries
from backend.services.totals import Totals, total
from backend.services.windows import Range

COLLECTION = {"model": "(collection)", "traffic_class": "all", "spec_mode": "all"}  # collection-wide rules' target
MIN_BAND_DRAFTS = 200  # a concurrency band with fewer drafts is not compared (cf. spec-math §3 "few trials")


@dataclass
class Target:
    labels: dict[str, str]
    pools: list[Pool]
    rows: dict[float, ClassSummaryRead | RateRow] = field(default_factory=dict)  # window seconds -> summary
    band_alpha: dict[float, dict[int, tuple[float, float]]] = field(default_factory=dict)  # window -> band -> (r, D)
    window_end: datetime | None = None
    refused_pools: dict[float, int] = field(default_factory=dict)  # collection target: lookback -> pools refused
    # replica target: window -> {replica: {coarse bucket start: its sums}} of every replica of the pool in the
    # window (compared bucket by bucket: domain.replicas.aligned), and this replica
    replicas: dict[float, dict[rep.ReplicaKey, dict[datetime, rep.ReplicaVolume]]] = field(default_factory=dict)
    replica: rep.ReplicaKey | None = None
    records: list[Pool] = field(default_factory=list)  # per-request records pools of the row (pool_rows.Row)
    context: dict[float, list[tuple[int, cd.ContextSums]]] = field(default_factory=dict)  # window -> context bands
    load: dict[float, list] = field(default_factory=dict)  # window -> (bucket, concurrency band, LoadSums) groups

    @property
    def is_collection(self) -> bool:
        return self.labels == COLLECTION

    @property
    def is_replica(self) -> bool:
        return self.replica is not None


def replica_name(key: rep.ReplicaKey) -> str:
    """The `replica` label: instance, with `/engine` when vLLM reports an engine label."""
    return f"{key.instance}/{key.engine}" if key.engine else key.instance


def replica_targets(session: Session, *, windows: set[float], now: datetime, settings: Settings) -> dict[tuple, Target]:
    """One target per replica of every spec pool (labels: the pool's plus `replica`), with every replica's
    sums per window. Windows end at the pool's newest replica bucket (replica rows are coarser than the pool's);
    pools whose windows end alike are read in one query per window (a fleet's usually all are)."""
    spec = [p for p in queries.list_pools(session) if p.spec_mode != settings.baseline_mode]
    newest: dict[int, datetime] = {}  # each pool's newest replica bucket end (replica_svc.newest_end), one read
    for r in replica_repo.replicas_of(session, [p.id for p in spec]):
        newest[r.pool_id] = max(newest.get(r.pool_id, r.last_seen), r.last_seen)
    by_end: dict[datetime, list[Pool]] = defaultdict(list)  # pools whose windows end alike: read together
    for p in spec:
        if p.id in newest:
            by_end[min(newest[p.id], now)].append(p)
    targets: dict[tuple, Target] = {}
    for end, group in by_end.items():
        totals = {w: replica_svc.window_totals(session, group, since=end - timedelta(seconds=w), until=end)
                  for w in windows}
        for p in group:
            per_window = {w: {rep.ReplicaKey(t.instance, t.engine): t.by_bucket for t in totals[w].get(p.id, [])}
                          for w in windows}
            keys = {k for vols in per_window.values() for k in vols}
            for k in keys:
                labels = {"model": p.model_name, "traffic_class": p.traffic_class, "spec_mode": p.spec_mode,
                          "replica": replica_name(k)}
                targets[(p.model_name, p.traffic_class, p.spec_mode, labels["replica"])] = Target(
                    labels, [p], window_end=end, replicas=per_window, replica=k)
    return targets


def collection_target(session: Session, *, lookbacks: set[float], now: datetime) -> Target:
    """The one target of collection-wide rules (pool_limit): pools refused per lookback."""
    return Target(dict(COLLECTION), [], refused_pools={
        w: queries.refused_pools(session, rule="pool_limit", since=now - timedelta(seconds=w)) for w in lookbacks})


def _band_alpha(data, pools: list[Pool]) -> dict[int, tuple[float, float]]:
    per_band: dict[int, list[Totals]] = defaultdict(list)
    for p in pools:
        for idx, t in (data.totals[p.id].by_band.items() if p.id in data.totals else ()):
            if idx is not None:
                per_band[idx].append(t)
    out = {}
    for idx, ts in per_band.items():
        t = total(ts)
        r = acc.acceptance_rate(t.accepted_tokens, t.draft_tokens)
        if r is not None and (t.drafts or 0) >= MIN_BAND_DRAFTS:
            out[idx] = (r, t.drafts or 0.0)
    return out


@dataclass(frozen=True)
class Volume:
    drafts: float | None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None


@dataclass(frozen=True)
class RateRow:
    """What an alpha rule reads of a window (ClassSummaryRead's acceptance_rate, volume.drafts and
    num_spec_tokens, the same numbers), for a window no other rule reads: no operating point, per-position
    or latency work for it."""

    traffic_class: str
    spec_mode: str
    acceptance_rate: float | None
    num_spec_tokens: int | None
    volume: Volume


def rate_rows(pools: list[Pool], data, *, settings: Settings) -> list[RateRow]:
    """analytics.model_summaries' rows of one model, reduced to RateRow: each class's counters pooled as
    class_summary pools them (A / D over the summed counters), then `mixed` per spec mode."""
    out = []

    def row(name: str, mode: str, members: list[Pool]) -> RateRow:
        mix = pooled([(data.totals[p.id].all if p.id in data.totals else Totals()).class_totals(p.traffic_class)
                      for p in members], name=name)
        ks = {p.num_spec_tokens for p in members}
        return RateRow(name, mode, acc.acceptance_rate(mix.accepted, mix.draft_tokens),
                       next(iter(ks)) if len(ks) == 1 else None, Volume(mix.drafts, mix.draft_tokens, mix.accepted))

    for r in pool_rows.rows(pools, baseline_mode=settings.baseline_mode, default_class=settings.default_class):
        out.append(row(r.traffic_class, r.spec_mode, list(r.pools)))
    return out


@dataclass(frozen=True)
class Reads:
    """Which windows the rules read, and how much of them: `latency` (a latency rule: the histograms and
    verdicts), `full` (any rule but alpha_low: the whole summary), `drift` (the concurrency bands' alpha)."""

    windows: set[float]
    latency: set[float]
    full: set[float]
    drift: set[float]
    context: set[float] = field(default_factory=set)  # windows of context_drift: records by context band only
    load: set[float] = field(default_factory=set)  # windows of load_instability: records by concurrency band only


def reads(config: AlertConfig) -> Reads:
    records_only = ("context_drift", "load_instability")
    summary = [r for r in config.rules if r.kind not in ("pool_limit", "stale_data", "replica_outlier",
                                                         *records_only)]
    return Reads(windows={w for r in config.rules if r.kind not in records_only for w in r.windows()},
                 latency=latency_windows(config),
                 full={w for r in summary if r.kind != "alpha_low" for w in r.windows()},
                 drift={w for r in summary if r.kind == "acceptance_drift" for w in r.windows()},
                 context={w for r in config.rules if r.kind == "context_drift" for w in r.windows()},
                 load={w for r in config.rules if r.kind == "load_instability" for w in r.windows()})


def snapshot(session: Session, *, windows: set[float], now: datetime, settings: Settings,
             latency_windows: set[float] | None = None, full_windows: set[float] | None = None,
             drift_windows: set[float] | None = None) -> dict[tuple, Target]:
    """{(model, class, mode): Target} with a summary per window (one fetch per window for all pools).
    latency_windows: the windows whose summaries need the latency verdicts (those a latency rule reads);
    the others skip the histograms (their rules never read them). full_windows: the windows with whole
    summaries; the others get RateRows (only alpha rules read them). drift_windows: those with the bands'
    alpha. None: every window has it."""
    pools = queries.list_pools(session)
    spec = [p for p in pools if p.spec_mode != settings.baseline_mode]
    by_model: dict[str, list[Pool]] = defaultdict(list)
    for p in pools:
        by_model[p.model_name].append(p)
    targets: dict[tuple, Target] = {}
    for model, mpools in by_model.items():  # the rows surfaces show (pool_rows): each pool once
        rows = pool_rows.rows(mpools, baseline_mode=settings.baseline_mode, default_class=settings.default_class)
        for r in rows:
            if not pool_rows.repeats_class_row(r, rows):
                targets[(model, r.traffic_class, r.spec_mode)] = Target(
                    {"model": model, "traffic_class": r.traffic_class, "spec_mode": r.spec_mode}, list(r.pools),
                    records=list(r.pools if r.source == pool_rows.RECORDS else r.records))
    if not spec:
        return targets
    # stored data lags `now` by the collection delay (settle + interval): windows end at the newest
    # collected bucket, so a short window is not half empty; staleness is judged on its own rule
    end = min([now, max(p.last_seen for p in spec)])
    for t in targets.values():
        t.window_end = end
    for w in sorted(windows):
        rng = Range(end - timedelta(seconds=w), end)
        latency = latency_windows is None or w in latency_windows
        full = full_windows is None or w in full_windows or latency
        bands = drift_windows is None or w in drift_windows
        data = fetch(session, pools=pools, rng=rng, settings=settings, **({} if latency else {"families": ()}))
        for model, mpools in by_model.items():
            rows = (model_summaries(mpools, data, settings=settings, now=now, quantiles=(0.99,)) if full
                    else rate_rows(mpools, data, settings=settings))
            for row in rows:
                t = targets.get((model, row.traffic_class, row.spec_mode))
                if t is not None:
                    t.rows[w] = row
                    if bands:
                        t.band_alpha[w] = _band_alpha(data, t.pools)
    return targets


def _record_windows(targets: dict[tuple, Target], windows: set[float]):
    """(targets, their records pools' ids, window start, end, window): per window end the targets with
    records share (windows end where the target's do), per window."""
    with_records = [t for t in targets.values() if t.records and t.window_end is not None]
    for end in {t.window_end for t in with_records}:
        group = [t for t in with_records if t.window_end == end]
        ids = sorted({p.id for t in group for p in t.records})
        for w in windows:
            yield group, ids, end - timedelta(seconds=w), end, w


def context_bands(session: Session, targets: dict[tuple, Target], *, windows: set[float]) -> None:
    """Fill each target's per-request records by context band (the API's by_context_length bands: the same
    query) per window, summed over the target's records pools."""
    for group, ids, lo, hi, w in _record_windows(targets, windows):
        per_pool: dict[int, dict[int, cd.ContextSums]] = defaultdict(dict)
        for pid, band, n, d, a, saa, sdd, sad, _mean, _sd, steps in request_repo.alpha_by_context(
                session, pool_ids=ids, lo=lo, hi=hi):
            per_pool[pid][band] = cd.ContextSums(int(n), float(steps or 0), float(d or 0), float(a or 0),
                                                 float(saa or 0), float(sdd or 0), float(sad or 0))
        for t in group:
            bands: dict[int, cd.ContextSums] = defaultdict(cd.ContextSums)
            for p in t.records:
                for band, sums in per_pool.get(p.id, {}).items():
                    bands[band] = bands[band] + sums
            t.context[w] = sorted(bands.items())


def load_bands(session: Session, targets: dict[tuple, Target], *, windows: set[float], settings: Settings) -> None:
    """Fill each target's per-request records by (bucket, concurrency band) per window (the API's
    by_concurrency groups: the same query, services.load_bands), over the target's records pools."""
    for group, ids, lo, hi, w in _record_windows(targets, windows):
        per_pool = load_svc.groups_by_pool(session, pool_ids=ids, lo=lo, hi=hi, settings=settings)
        for t in group:
            t.load[w] = [g for p in t.records for g in per_pool.get(p.id, [])]


def latency_windows(config: AlertConfig) -> set[float]:
    """The windows a latency rule reads (the only ones whose summaries need the histograms)."""
    return {w for r in config.rules if r.kind == "latency_regression" for w in r.windows()}
