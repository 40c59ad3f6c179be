"""The model page's cards: a class row's KPIs (acceptance, τ, break-even, margin, speedup, the P99 latency
deltas with their verdicts, volume), its data-quality flags and findings, and the model's resolution advice."""

from __future__ import annotations

import dash_bootstrap_components as dbc
from dash import html

from backend.domain.engines import wording
from backend.schemas.summary import ClassSummaryRead, SummaryRead
from dashboard import components as c
from dashboard import figures
from dashboard import formatting as fm


def kpis(k: ClassSummaryRead, summary: SummaryRead, engines: list[str] | None = None,
         est: dict | None = None) -> html.Div:
    engines, est = engines or ["vllm"], est or {}
    fmts = {"acceptance_rate": fm.fmt_rate, "accept_length": fm.fmt_tau}

    def shown(figure: str, text: str) -> str:
        """The one wording of an engine's figure; an estimate-only row shows its pool's estimate."""
        if text == fm.NO_DATA and est.get(figure) is not None:
            text = fmts[figure](est[figure])
        return wording.row_figure_text(engines, figure, None if text == fm.NO_DATA else text, none=fm.NO_DATA)
    eps_src = fm.fmt_eps_step(k.eps_step, k.eps_step_source, k.concurrency_band)
    drift = k.drift.last_to_first_ratio if k.drift else None
    itl_q = next((q for q in (k.itl.quantiles if k.itl else []) if q.q == 0.99), None)
    tpot_q = next((q for q in (k.tpot.quantiles if k.tpot else []) if q.q == 0.99), None)
    cards = [
        c.kpi("acceptance rate r", shown("acceptance_rate", fm.fmt_rate(k.acceptance_rate)), id="md-kpi-acceptance_rate",
              hint="A/D over the window; depends on K", sub=f"K = {fm.fmt(k.num_spec_tokens, 'd')}"),
        c.kpi("τ (tokens / step)", shown("accept_length", fm.fmt_tau(k.mean_acceptance_length)), id="md-kpi-mean_acceptance_length",
              hint="1 + A/N"),
        c.kpi("per-token a (i.i.d. fit)", fm.fmt_rate(k.per_token_acceptance), id="md-kpi-per_token_acceptance",
              hint="model value: assumes position-independent acceptance",
              sub=f"drift p_last/p_0 = {fm.fmt(drift, '.2f')}"),
        c.kpi("break-even α", fm.fmt_rate(k.break_even_alpha), id="md-kpi-break_even_alpha",
              hint="ε_step/K: the step overhead (mean ITL spec/baseline − 1, same band, else the band default)",
              sub=eps_src),
        c.kpi("margin", shown("margin", fm.fmt(k.margin, "+.3f")), id="md-kpi-margin", hint="seed alpha − ε_step/K",
              sub=f"band {k.concurrency_band or '—'} · business: S − 1 = {fm.fmt(k.speedup_margin, '+.2f')}"),
        c.kpi("speedup measured / est.", f"{fm.fmt_speedup(k.measured_speedup)} / {fm.fmt_speedup(k.estimated_speedup)}",
              id="md-kpi-speedup", hint="measured: TPOT mean baseline/spec in the same band; estimated: "
              "τ/(1+ε_step) from step times (ITL)", sub=_check_word(k)),
        c.kpi("P99 ITL Δ (per step)", shown("itl", _delta(itl_q)), id="md-kpi-p99-itl", hint=figures.ITL_HINT,
              sub=_verdict(itl_q, "itl")),
        c.kpi("P99 TPOT Δ (per token)", shown("tpot", _delta(tpot_q)), id="md-kpi-p99-tpot", hint=figures.TPOT_HINT,
              sub=_verdict(tpot_q, "tpot")),
        c.kpi("drafts", shown("drafts", fm.fmt_count(k.volume.drafts)), id="md-kpi-drafts", hint="verify steps with drafts",
              sub="enough volume" if k.volume.sufficient else f"below {k.volume.min_drafts} (low volume)"),
    ]
    flags = k.data_quality + k.incomplete_reasons
    extra = [dbc.Alert("data quality: " + ", ".join(flags), color="light", className="py-1")] if flags else []
    extra += speedup_finding(k)
    extra += advice(summary)
    return html.Div([dbc.Row([dbc.Col(x, xs=6, md=4, xl=True) for x in cards], className="g-2 mb-2"), *extra])


CHECK_WORDS = {"agree": "estimate agrees with measured", "disagree": "⚠ estimate ≠ measured (finding)",
               "undetermined": "agreement not determined"}


def _check_word(k: ClassSummaryRead) -> str:
    if k.speedup_check is None:
        return "no measured ε_step: nothing to check" if k.measured_speedup is not None else "no baseline"
    return CHECK_WORDS[k.speedup_check.verdict]


def speedup_finding(k: ClassSummaryRead) -> list:
    """The estimate from step time against the measured speedup, named as a finding when they disagree
    beyond their uncertainty; also says what the effective overhead τ/S − 1 is."""
    chk = k.speedup_check
    if chk is None or chk.verdict != "disagree":
        return []
    return [dbc.Alert([html.Strong("Finding: speedup estimate ≠ measured. "),
                       (f"τ/(1+ε_step) = {fm.fmt_speedup(chk.estimated)} against {fm.fmt_speedup(chk.measured)} "
                       f"measured (TPOT), ratio {fm.fmt(chk.ratio, '.3f')}, 2 SE {fm.fmt(chk.ratio_low, '.3f')}–"
                       f"{fm.fmt(chk.ratio_high, '.3f')} over {chk.bins} time bins: {chk.reason.split(': ', 1)[-1]}. "
                       f"Effective overhead τ/S − 1 = {fm.fmt(k.eps_effective, '.2f')}; "
                       f"{fm.fmt_eps_step(k.eps_step, k.eps_step_source, k.concurrency_band)}.")],
                      color="warning", className="py-1", id="md-speedup-finding")]


def advice(summary: SummaryRead) -> list:
    """Once per model: latency verdicts the buckets cannot resolve, and the vLLM setting that would."""
    return [dbc.Alert([html.Strong("⇅ below the histogram's resolution: "), a.text.split(a.flag)[0],
                       html.Code(a.flag, className="sw-wrap"), a.text.split(a.flag)[1]],
                      color="light", className="py-1", id=f"md-resolution-{a.family_key}")
            for a in summary.resolution_advice]


def _delta(q) -> str:
    """The P99 delta spec − baseline: the overview's "P99 … Δ" figure (the same API value, formatted alike)."""
    return fm.fmt_delta_ms(q.delta if q is not None else None)


def _interval(q) -> str:
    """Where spec − baseline lies by the verdict's bucket edges (what the verdict rests on), named apart."""
    v = q.verdict if q is not None else None
    return fm.NO_DATA if v is None else fm.fmt_interval(v.delta_low, v.delta_high)


def _side(name: str, value, low: float | None, high: float | None) -> str:
    point = fm.fmt_ms(value.value) if value is not None else fm.NO_DATA
    return f"{name} {'> ' if value is not None and value.lower_bound else ''}{point} in {fm.fmt_bucket(low, high)}"


def _verdict(q, family: str) -> list | None:
    """The verdict badge, the interval it rests on, its one-line reason and each side's point value next to
    its bucket bounds."""
    if q is None or q.verdict is None:
        return None
    v = q.verdict
    icon, text, colour = fm.VERDICTS[v.verdict]
    lines = [html.Span(f"{icon} {text}", id=f"md-verdict-{family}", title=c.verdict_reason(v.verdict),
                       className=f"sw-verdict-line {fm.tone(colour)}"),
             html.Span(f"interval {_interval(q)}", id=f"md-interval-{family}", className="sw-verdict-line",
                       title="where spec − baseline lies by the histogram's bucket edges (the verdict rests on it)")]
    if v.reason:
        lines.append(html.Span(v.reason, id=f"md-reason-{family}", className="sw-verdict-line"))
    if v.spec_bucket_low is not None or v.spec_bucket_high is not None:
        lines.append(html.Span(f"{_side('spec', q.spec, v.spec_bucket_low, v.spec_bucket_high)} · "
                               f"{_side('baseline', q.baseline, v.base_bucket_low, v.base_bucket_high)}",
                               id=f"md-buckets-{family}", className="sw-verdict-line"))
    return lines
