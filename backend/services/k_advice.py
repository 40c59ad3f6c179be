"""K advice from measured data: per spec mode of a model, each class's p_1..p_K over the window
(per-position counters summed across the class's pools, then divided), the mode's eps (the pooled row's,
measured against the baseline or the band default, labelled) calibrated into eps(K) = eps0 + K eps_tok,
refined by other spec modes of the same model and drafter measured at another K in the same band.
The math is backend.domain.k_advisor; the mix weights each class by its output tokens N + A."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db.models import Pool
from backend.domain import acceptance as acc
from backend.domain import calc as dcalc
from backend.domain import k_advisor as ka
from backend.domain.mix import pooled
from backend.schemas import MIXED, KAdviceModeRead, KAdviceRead, KAdviceSetRead, KOverheadRead, WindowRead
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


def _mode(mode: str, pools: list[Pool], rows: dict, data: analytics.WindowData, calib: dict,
          settings: Settings) -> KAdviceModeRead:
    mixed = rows.get((mode, MIXED))
    drafters = {p.drafter for p in pools}
    drafter = drafters.pop() if len(drafters) == 1 else None
    out = KAdviceModeRead(spec_mode=mode, drafter=drafter, k=mixed.num_spec_tokens if mixed else None,
                          eps=mixed.eps if mixed else None, eps_source=mixed.eps_source if mixed else None,
                          concurrency_band=mixed.concurrency_band if mixed else None)
    if out.k is None or out.eps is None:
        out.unavailable = {p.traffic_class: "K differs across pools or no data in the window" for p in pools}
        return out
    others = [(k, e) for (d, band, k), e in calib.items() if out.eps_source == "measured" and drafter is not None
              and d == drafter and band == out.concurrency_band and k != out.k]
    try:
        ov = ka.calibrate(out.eps, out.k, eps0_share=settings.k_advisor_eps0_share, points=others)
    except ValueError as exc:  # e.g. a negative measured eps: no split is physical
        out.unavailable = {p.traffic_class: f"eps cannot be calibrated: {exc}" for p in pools}
        return out
    out.overhead = KOverheadRead.model_validate(dcalc.json_safe(dcalc.overhead_dict(ov)))
    weighted = []
    for p in sorted(pools, key=lambda x: x.traffic_class):
        row = rows.get((mode, p.traffic_class))
        cond, trials = _curve([p], data)
        if cond is None or len(cond) != out.k:
            out.unavailable[p.traffic_class] = "no per-position counters for this K in the window"
            continue
        try:
            adv = ka.advise_class(p.traffic_class, cond, out.k, ov, trials=trials,
                                  min_trials=settings.k_advisor_min_trials)
        except ValueError as exc:  # p_j > 1 from flagged data: not an acceptance value
            out.unavailable[p.traffic_class] = f"per-position data fails its checks: {exc}"
            continue
        n = row.volume.drafts if row else None
        a = row.volume.accepted_tokens if row else None
        tokens = None if n is None or a is None else n + a
        out.classes.append(_advice(adv, drafts=n, output_tokens=tokens))
        if tokens:
            weighted.append((adv, tokens))
    out.incomplete = bool(out.unavailable) or len(weighted) < len(out.classes)
    if weighted:
        out.mix = _advice(ka.advise_mix(weighted, ov, name=MIXED),
                          output_tokens=sum(t for _, t in weighted))
    return out


def k_advice(session: Session, *, model_name: str, rng: Range, now: datetime, settings: Settings) -> KAdviceSetRead:
    pools = analytics.model_pools(session, model_name)
    data = analytics.fetch(session, pools=pools, rng=rng, settings=settings, families=("tpot",))
    summaries = analytics.model_summaries(pools, data, settings=settings, now=now, quantiles=(0.99,))
    rows = {(r.spec_mode, r.traffic_class): r for r in summaries}
    spec = [p for p in pools if p.spec_mode != settings.baseline_mode and p.num_spec_tokens]
    modes = sorted({p.spec_mode for p in spec})
    calib: dict = {}
    for mode in modes:
        mixed = rows.get((mode, MIXED))
        drafters = {p.drafter for p in spec if p.spec_mode == mode}
        if mixed and mixed.eps_source == "measured" and mixed.eps is not None and mixed.num_spec_tokens \
                and len(drafters) == 1 and None not in drafters:
            calib[(drafters.pop(), mixed.concurrency_band, mixed.num_spec_tokens)] = mixed.eps
    return KAdviceSetRead(
        model_name=model_name, window=WindowRead(start=rng.start, end=rng.end, seconds=rng.seconds),
        generated_at=now, note=NOTE,
        modes=[_mode(m, [p for p in spec if p.spec_mode == m], rows, data, calib, settings) for m in modes])
