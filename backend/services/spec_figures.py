"""Per pool of a model, the spec-decode figures over a window, each saying whether it is exact or estimated.

Exact figures come from the engine's counters (vLLM, llama.cpp), summed as every window total is
(queries.window_totals, raw buckets and hourly rollups): acceptance rate = accepted / draft tokens, mean
accepted length = 1 + accepted / drafts (backend.domain.acceptance, the functions every surface uses).
An SGLang pool has no counter: the same two functions read the estimate's parts instead (accepted and draft
tokens estimated, verify steps estimated; backend.domain.engines.estimate), and the figure says so (`exact`
false, `estimate_basis`). The two never meet: an exact figure reads only exact columns, an estimate only the
`est_*` ones. A figure the engine does not expose is null with `exposed` false, never 0."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries
from backend.domain.acceptance import acceptance_rate, mean_acceptance_length
from backend.domain.bands import BAND_EDGES
from backend.domain.engines import FIGURES, figure_basis
from backend.schemas.common import PoolRefRead, WindowRead
from backend.schemas.pools import PoolFigureRowRead, PoolFiguresRead, SpecFigureRead
from backend.services.errors import NotFound
from backend.services.windows import Range


def _sum(values) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def _exact_sums(session: Session, pool_ids: list[int], rng: Range, width: int) -> dict[int, dict[str, float | None]]:
    """Per pool, drafts, draft tokens and accepted tokens over the window, summed over its concurrency bands."""
    rows = queries.window_totals(session, pool_ids=pool_ids, start=rng.start, end=rng.end, bucket_seconds=width,
                                 n_pos=0, band_edges=BAND_EDGES)
    out: dict[int, dict[str, float | None]] = {}
    for pid in {r.pool_id for r in rows}:
        mine = [r for r in rows if r.pool_id == pid]
        out[pid] = {name: _sum(getattr(r, name) for r in mine) for name in ("drafts", "draft_tokens", "accepted_tokens")}
    return out


def estimated_figures(parts) -> tuple[float | None, float | None]:
    """(acceptance rate, mean accepted length) of the estimate parts of some SGLang pools over a window
    (`queries.EstimateSums`, summed like counts): the same two functions as the exact figures, on the
    estimate's columns only."""
    parts = [p for p in parts if p is not None]
    acc = _sum(p.est_accepted_tokens for p in parts)
    drafted = _sum(p.est_draft_tokens for p in parts)
    steps = _sum(p.est_verify_steps for p in parts)
    emitted = _sum(p.est_weight_tokens for p in parts)
    return (acceptance_rate(acc, drafted),
            mean_acceptance_length(None if emitted is None or steps is None else emitted - steps, steps))


def _values(engine: str, exact: dict | None, est: queries.EstimateSums | None) -> dict[str, float | list | None]:
    if engine == "sglang":
        if est is None:
            return dict.fromkeys(FIGURES)
        alpha, tau = estimated_figures([est])
        return {"acceptance_rate": alpha, "accept_length": tau,
                "drafts": None, "draft_tokens": est.est_draft_tokens, "accepted_tokens": est.est_accepted_tokens,
                "accepted_per_pos": None}
    if exact is None:
        return dict.fromkeys(FIGURES)
    return {"acceptance_rate": acceptance_rate(exact["accepted_tokens"], exact["draft_tokens"]),
            "accept_length": mean_acceptance_length(exact["accepted_tokens"], exact["drafts"]),
            "drafts": exact["drafts"], "draft_tokens": exact["draft_tokens"],
            "accepted_tokens": exact["accepted_tokens"], "accepted_per_pos": None}


def pool_figures(session: Session, *, model_name: str, rng: Range, settings: Settings,
                 now: datetime | None = None) -> PoolFiguresRead:
    """Each engine pool's figures over `rng`. An estimate reads the raw buckets only: where the window reaches
    past `raw_retention_days` before `now`, its note says it covers the kept part only."""
    horizon = None
    if now is not None and settings.raw_retention_days > 0:
        kept_from = now - timedelta(days=settings.raw_retention_days)
        if rng.start < kept_from:
            horizon = (f"the estimate covers only the raw buckets kept ({settings.raw_retention_days} days): "
                       f"from {kept_from.isoformat()}")
    pools = [p for p in queries.list_pools(session, model_name=model_name) if p.origin == "engine"]
    if not pools:
        raise NotFound(f"unknown model {model_name!r}", known=queries.model_names(session))
    exact = _exact_sums(session, [p.id for p in pools if p.engine != "sglang"], rng, settings.bucket_seconds)
    est = queries.estimate_sums(session, pool_ids=[p.id for p in pools if p.engine == "sglang"], start=rng.start,
                                end=rng.end, bucket_seconds=settings.bucket_seconds)
    rows = []
    for p in pools:
        values = _values(p.engine, exact.get(p.id), est.get(p.id))
        figures = []
        for figure in FIGURES:
            if figure == "accepted_per_pos":
                continue  # per position: the acceptance API's
            basis = figure_basis(p.engine, figure)
            note = None if basis is None else basis.note
            if basis is not None and not basis.exact and horizon:
                note = horizon
            figures.append(SpecFigureRead(
                figure=figure, value=values[figure] if basis is not None else None, exposed=basis is not None,
                exact=None if basis is None else basis.exact,
                estimate_basis=None if basis is None else basis.estimate_basis,
                note=note))
        rows.append(PoolFigureRowRead(
            pool=PoolRefRead(id=p.id, model_name=p.model_name, traffic_class=p.traffic_class, spec_mode=p.spec_mode,
                             num_spec_tokens=p.num_spec_tokens), engine=p.engine, figures=figures))
    return PoolFiguresRead(window=WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds), pools=rows)
