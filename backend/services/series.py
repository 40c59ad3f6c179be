"""Acceptance time series: counters summed inside each step (or a trailing rolling window), then divided."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries
from backend.db.models import Pool
from backend.domain import acceptance as acc
from backend.schemas import MIXED, AcceptanceSeriesRead, SparklineRead, WindowRead
from backend.services.analytics import model_pools, pool_ref
from backend.services.errors import InvalidParameter, NotFound
from backend.services.windows import Grid, InvalidWindow, Range, auto_step, check_span, make_grid


def _points(grid: Grid, pts: Sequence[queries.CounterPoint], k: int | None) -> dict[str, list]:
    by_t = {p.t: p for p in pts}
    cols: dict[str, list] = defaultdict(list)
    for i in range(grid.count):
        t = grid.first + i * grid.step
        p = by_t.get(t)
        d, dt, a = (p.drafts, p.draft_tokens, p.accepted_tokens) if p else (None, None, None)
        cols["t"].append(datetime.fromtimestamp(t, tz=UTC))
        cols["drafts"].append(d)
        cols["draft_tokens"].append(dt)
        cols["accepted_tokens"].append(a)
        cols["acceptance_rate"].append(acc.acceptance_rate(a, dt))
        cols["mean_acceptance_length"].append(acc.mean_acceptance_length(a, d))
        cols["seed_alpha"].append(acc.seed_alpha(a, d, k) if k else None)
    return cols


def select_pools(pools: list[Pool], *, traffic_class: str, spec_mode: str | None, settings: Settings) -> list[Pool]:
    spec = [p for p in pools if p.spec_mode != settings.baseline_mode]
    modes = sorted({p.spec_mode for p in spec})
    if spec_mode is None:
        if len(modes) > 1:
            raise InvalidParameter(f"the model runs several spec modes {modes}: pass spec_mode")
        if not modes:
            raise NotFound("the model has no speculative-decoding pool", [p.spec_mode for p in pools])
        spec_mode = modes[0]
    chosen = [p for p in spec if p.spec_mode == spec_mode]
    if not chosen:
        raise NotFound(f"unknown spec_mode {spec_mode!r}", modes)
    if traffic_class != MIXED:
        chosen = [p for p in chosen if p.traffic_class == traffic_class]
        if not chosen:
            known = sorted({p.traffic_class for p in spec if p.spec_mode == spec_mode}) + [MIXED]
            raise NotFound(f"unknown traffic_class {traffic_class!r}", known)
    return chosen


def acceptance_series(
    session: Session, *, model_name: str, traffic_class: str, spec_mode: str | None, rng: Range,
    step: int | None, rolling: int | None, now: datetime, settings: Settings,
) -> AcceptanceSeriesRead:
    width = settings.bucket_seconds
    if step is None:
        step = auto_step(rng.seconds, bucket_seconds=width, max_points=settings.max_points)
    check_span(step, name="step", bucket_seconds=width)
    if rolling is not None:
        check_span(rolling, name="window", bucket_seconds=width)
    if rng.seconds / step > settings.max_points_hard:
        raise InvalidWindow(f"step={step}s gives more than {settings.max_points_hard} points; use a larger step")
    pools = select_pools(model_pools(session, model_name), traffic_class=traffic_class, spec_mode=spec_mode,
                         settings=settings)
    grid = make_grid(rng, step=step, span=rolling or step)
    pts = queries.counter_series(session, pool_ids=[p.id for p in pools], first=grid.first, last=grid.last,
                                 step=grid.step, span=grid.span, bucket_seconds=width)
    ks = {p.num_spec_tokens for p in pools}
    k = next(iter(ks)) if len(ks) == 1 else None
    missing = [p.traffic_class for p in pools if p.last_seen <= rng.start or p.first_seen > rng.end]
    return AcceptanceSeriesRead(
        model_name=model_name, traffic_class=traffic_class, spec_mode=pools[0].spec_mode, num_spec_tokens=k,
        window=WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds), step_seconds=step,
        rolling_window_seconds=rolling, bucket_seconds=width, pools=[pool_ref(p) for p in pools],
        incomplete=traffic_class == MIXED and bool(missing),
        flags=([] if len(ks) == 1 else ["k_differs_across_pools"])
        + [f"no data in the range for class {c!r}" for c in missing if traffic_class == MIXED],
        **_points(grid, pts, k),
    )


def sparkline_counters(
    session: Session, *, pools: list[Pool], now: datetime, settings: Settings,
) -> tuple[Grid, dict[int, list[queries.CounterPoint]]]:
    """Spec counters per pool and coarse step over the last `sparkline_seconds` (one query)."""
    step = settings.sparkline_step_seconds
    rng = Range(datetime.fromtimestamp(now.timestamp() - settings.sparkline_seconds, tz=UTC), now)
    grid = make_grid(rng, step=step)
    pts = queries.counter_series(session, pool_ids=[p.id for p in pools], first=grid.first, last=grid.last,
                                 step=step, span=step, bucket_seconds=settings.bucket_seconds, per_pool=True)
    by_pool: dict[int, list[queries.CounterPoint]] = defaultdict(list)
    for p in pts:
        by_pool[p.key].append(p)
    return grid, by_pool


def _add(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else a + b


def sparkline(grid: Grid, series: Sequence[Sequence[queries.CounterPoint]], k: int | None) -> SparklineRead:
    """Acceptance rate per step from the counters of one or several pools (summed per step, then divided)."""
    summed: dict[int, queries.CounterPoint] = {}
    for pts in series:
        for p in pts:
            cur = summed.get(p.t)
            summed[p.t] = p if cur is None else queries.CounterPoint(
                0, p.t, _add(cur.drafts, p.drafts), _add(cur.draft_tokens, p.draft_tokens),
                _add(cur.accepted_tokens, p.accepted_tokens))
    cols = _points(grid, list(summed.values()), k)
    return SparklineRead(step_seconds=grid.step, t=cols["t"], acceptance_rate=cols["acceptance_rate"])
