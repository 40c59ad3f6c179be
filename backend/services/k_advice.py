"""K advice from measured data: per spec mode of a model, each class's p_1..p_K over the window
(per-position counters summed across the class's pools, then divided) and its own step overhead eps_step
(mean ITL against the baseline in the class's concurrency band, or the band default, labelled).
eps(K) = eps0 + K eps_tok is calibrated per class: its eps_step split by the configured share, or fitted
through measurements of the same drafter at other K in the same band (other modes, or other classes).
The mix pools the classes' counts (tokens, steps and step time weighted by output tokens N + A); it never
borrows the mixed row's overhead. The math is backend.domain.k_advisor."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db.models import Pool
from backend.domain import acceptance as acc
from backend.domain import calc as dcalc
from backend.domain import k_advisor as ka
from backend.domain import pool_rows
from backend.domain.mix import pooled
from backend.schemas.calc import KAdviceModeRead, KAdviceRead, KAdviceSetRead, KOverheadRead
from backend.schemas.common import WindowRead
from backend.schemas.summary import MIXED, ClassSummaryRead
from backend.services import analytics
from backend.services.totals import Totals
from backend.services.windows import Range

NOTE = dcalc.K_ADVISOR_NOTE + "; the mix weights classes by output tokens N + A (docs/k-advisor.md)"


def _curve(pools: list[Pool], data: analytics.WindowData) -> tuple[list[float | None] | None, list[float | None]]:
    """Pooled p_1..p_K and the trials behind each (drafts that reached the position)."""
    window = {p.id: data.totals[p.id].all if p.id in data.totals else Totals() for p in pools}
    pp = pooled([window[p.id].per_pos_totals(p.traffic_class) for p in pools if window[p.id].has_spec_data])
    if pp.per_pos is None or not pp.drafts:
        return None, []
    return acc.per_position_conditional(pp.per_pos, pp.drafts), [pp.drafts, *pp.per_pos[:-1]]


def _advice(adv: ka.Advice, **extra) -> KAdviceRead:
    return KAdviceRead.model_validate({**dcalc.json_safe(dcalc.advice_dict(adv)), **extra})


def _overhead(ov: ka.Overhead) -> KOverheadRead:
    return KOverheadRead.model_validate(dcalc.json_safe(dcalc.overhead_dict(ov)))


Calib = dict[tuple[str, str | None, int], tuple[float, float]]  # (drafter, band, K) -> (drafts, eps_step)


def _calibrate(row: ClassSummaryRead, k: int, drafter: str | None, calib: Calib,
               settings: Settings) -> ka.Overhead:
    """eps(K) for a row measured at K: its eps_step split by the configured share, or the line through it
    and the busiest measurements of the same drafter at other K in the same concurrency band."""
    others = [(kk, e) for (d, band, kk), (_, e) in calib.items() if row.eps_step_source == "measured"
              and drafter is not None and d == drafter and band == row.concurrency_band and kk != k]
    return ka.calibrate(row.eps_step, k, eps0_share=settings.k_advisor_eps0_share, points=others)


def _mode(mode: str, pools: list[Pool], rows: dict, data: analytics.WindowData, calib: Calib,
          settings: Settings) -> KAdviceModeRead:
    mixed = rows.get((mode, MIXED))
    drafters = {p.drafter for p in pools}
    drafter = drafters.pop() if len(drafters) == 1 else None
    ks = sorted({p.num_spec_tokens for p in pools})
    out = KAdviceModeRead(spec_mode=mode, drafter=drafter, k=ks[0] if len(ks) == 1 else None,
                          concurrency_band=mixed.concurrency_band if mixed else None)
    if len(ks) > 1:
        out.unavailable[MIXED] = f"classes run different K ({', '.join(map(str, ks))}): no common candidates"
    weighted = []
    for p in sorted(pools, key=lambda x: x.traffic_class):
        row, k = rows.get((mode, p.traffic_class)), p.num_spec_tokens
        cond, trials = _curve([p], data)
        if row is None or row.eps_step is None or cond is None or len(cond) != k:
            out.unavailable[p.traffic_class] = "no per-position counters for this K in the window"
            continue
        try:  # the class's own eps_step and its own p_j: never another row's
            ov = _calibrate(row, k, p.drafter, calib, settings)
            adv = ka.advise_class(p.traffic_class, cond, k, ov, trials=trials,
                                  min_trials=settings.k_advisor_min_trials)
        except ValueError as exc:  # a negative eps_step, or p_j > 1 from flagged data: not an acceptance value
            out.unavailable[p.traffic_class] = f"cannot advise: {exc}"
            continue
        n, a = row.volume.drafts, row.volume.accepted_tokens
        tokens = None if n is None or a is None else n + a
        out.classes.append(_advice(adv, drafts=n, output_tokens=tokens, eps_step=row.eps_step,
                                   eps_step_source=row.eps_step_source, overhead=_overhead(ov)))
        if tokens:
            weighted.append((adv, tokens))
    out.incomplete = bool(out.unavailable) or len(weighted) < len(out.classes)
    if len(ks) == 1 and weighted:
        mix = ka.advise_mix(weighted, name=MIXED)
        at_k = next((r.eps for r in mix.rows if r.k == ks[0]), None)
        out.mix = _advice(mix, output_tokens=sum(t for _, t in weighted), eps_step=at_k,
                          eps_step_source="pooled from classes")
    return out


def k_advice(session: Session, *, model_name: str, rng: Range, now: datetime, settings: Settings) -> KAdviceSetRead:
    pools = analytics.model_pools(session, model_name)
    data = analytics.fetch(session, pools=pools, rng=rng, settings=settings, families=("tpot",))
    summaries = analytics.model_summaries(pools, data, settings=settings, now=now, quantiles=(0.99,))
    rows = {(r.spec_mode, r.traffic_class): r for r in summaries}
    spec = [p for p in pools if p.spec_mode != settings.baseline_mode and p.num_spec_tokens]
    modes = sorted({p.spec_mode for p in spec})
    # the pool of each class row (backend.domain.pool_rows): one per class, engine or records, never both
    shown = [r.pools[0] for r in pool_rows.rows(spec, baseline_mode=settings.baseline_mode,
                                                default_class=settings.default_class) if r.traffic_class != MIXED]
    calib: Calib = {}
    for (mode, cls), r in rows.items():  # measured eps_step per drafter, band and K: the busiest class row wins
        drafters = {p.drafter for p in spec if p.spec_mode == mode and p.traffic_class == cls}
        if cls == MIXED or r.eps_step_source != "measured" or r.eps_step is None or not r.num_spec_tokens \
                or len(drafters) != 1 or None in drafters:
            continue
        key = (drafters.pop(), r.concurrency_band, r.num_spec_tokens)
        if key not in calib or (r.volume.drafts or 0) > calib[key][0]:
            calib[key] = (r.volume.drafts or 0, r.eps_step)
    return KAdviceSetRead(
        model_name=model_name, window=WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds),
        generated_at=now, note=NOTE,
        modes=[_mode(m, [p for p in shown if p.spec_mode == m], rows, data, calib, settings) for m in modes])
