"""Latency quantiles per pool over a window: the fleet's P99 table, with each spec pool's verdict.

Each pool's histogram is its buckets summed over the window (backend.db.histogram_totals), the quantile
domain.histogram_quantile over it: exactly Prometheus's `histogram_quantile(q, sum by (pool, le)
(increase(...)))` over the same buckets. A spec pool's quantile carries the verdict vs its baseline taken
from analytics.model_summaries over the same window: the object /summary shows for the pool's class.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries
from backend.db.histogram_totals import histogram_totals
from backend.domain.histogram import histogram_quantile
from backend.domain.pool_rows import ENGINE, origin_of
from backend.schemas.common import WindowRead
from backend.schemas.latency import LatencyTableRead, PoolLatencyRead, PoolQuantileRead, VerdictRead
from backend.services import analytics
from backend.services.analytics import models_pools, pool_ref
from backend.services.errors import InvalidParameter
from backend.services.windows import Range

LABELS = {"itl": "per engine step (chunk)", "tpot": "per token", "ttft": "time to first token"}


def latency_table(session: Session, *, family: str, quantiles: Sequence[float], models: Sequence[str] | None,
                  rng: Range, now: datetime, settings: Settings) -> LatencyTableRead:
    if family not in LABELS:
        raise InvalidParameter(f"unknown family {family!r}; choose from {sorted(LABELS)}")
    bad = [q for q in quantiles if not (isinstance(q, float | int) and 0 <= q <= 1 and math.isfinite(q))]
    if bad or not quantiles:
        raise InvalidParameter(f"quantiles must lie in [0, 1], got {list(quantiles)}")
    pools = [p for p in models_pools(session, models) if origin_of(p) == ENGINE]  # records carry no latency
    pools.sort(key=lambda p: (p.model_name, p.traffic_class, p.spec_mode))
    layouts = queries.layout_bounds(session)
    totals = histogram_totals(session, pool_ids=[p.id for p in pools], family=family, start=rng.start, end=rng.end,
                              bucket_seconds=settings.bucket_seconds,
                              n_counts=queries.count_width(layouts))
    verdicts = pool_verdicts(session, pools, family=family, quantiles=quantiles, rng=rng, now=now, settings=settings)
    rows = []
    for p in pools:
        mine = sorted((t for t in totals if t.pool_id == p.id), key=lambda t: (-t.counts[-1], t.layout_id))
        row = PoolLatencyRead(pool=pool_ref(p), layout_changed=len(mine) > 1)
        if mine:
            t = mine[0]
            row.samples = t.count
            row.mean = t.sum / t.count if t.sum is not None and t.count else None
            pairs = list(zip((*layouts[t.layout_id], math.inf), t.counts.tolist()))
            for q in quantiles:
                r = histogram_quantile(q, pairs)
                row.quantiles.append(PoolQuantileRead(
                    q=q, value=r.value, lower_bound=r.lower_bound, fixed_monotonicity=r.fixed_monotonicity,
                    bucket_low=r.bucket_low, bucket_high=r.bucket_high, verdict=verdicts.get((p.id, q))))
        rows.append(row)
    return LatencyTableRead(window=WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds), family=family,
                            label=LABELS[family], rows=rows)


def pool_verdicts(session: Session, pools: Sequence, *, family: str, quantiles: Sequence[float], rng: Range,
                  now: datetime, settings: Settings) -> dict[tuple[int, float], VerdictRead]:
    """(spec pool id, q) -> the verdict of the pool's class row (analytics.model_summaries over `rng`, the
    same computation /summary runs); `pools` holds every pool of its models; quantiles 0 and 1 have none."""
    qs = tuple(dict.fromkeys(float(q) for q in quantiles if 0 < q < 1))
    spec = [p for p in pools if p.spec_mode != settings.baseline_mode]
    if not qs or not spec:
        return {}
    models = sorted({p.model_name for p in spec})
    mpools = [p for p in pools if p.model_name in models]  # every pool of those models: baselines too
    data = analytics.fetch(session, pools=mpools, rng=rng, settings=settings, families=(family,))
    out = {}
    for model in models:
        mine = [p for p in mpools if p.model_name == model]
        for which, row in analytics.model_rows(mine, data, settings=settings, now=now, with_mixed=False,
                                               quantiles=qs):
            pool = which.pools[0]  # a class row sums one pool (backend.domain.pool_rows)
            for cmp in getattr(row, family).quantiles:
                if cmp.verdict is not None:
                    out[(pool.id, cmp.q)] = cmp.verdict
    return out
