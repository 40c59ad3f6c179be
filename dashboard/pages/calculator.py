"""Calculator: the what-if from the lesson. Sliders for alpha, K, eps and a two-class traffic mix; every
number comes from POST /api/v1/calc/* (the same code as `specwatch calc`)."""

from __future__ import annotations

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, callback, dcc, html

from backend.schemas.calc import (
    BreakevenCalcBody,
    MixCalcBody,
    MixClassBody,
    RequiredAlphaCalcBody,
    SpeedupCalcBody,
)
from dashboard import components as c
from dashboard import figures, ids
from dashboard import formatting as fm
from dashboard.api_client import ApiClient, get_client, parallel

dash.register_page(__name__, path="/calculator", name="Calculator", order=3, title="specwatch · calculator")

CURVE = [i / 10 for i in range(11)]
TARGETS = (2.0, 3.0)
K_MAX = 12


def _slider(id: str, label: str, lo: float, hi: float, step: float, value: float, hint: str,
            marks: dict | None = None) -> html.Div:
    return html.Div([
        html.Label(html.Span(label, title=hint, className="sw-help"), htmlFor=id),
        dcc.Slider(id=id, min=lo, max=hi, step=step, value=value, marks=marks,
                   updatemode="mouseup"),
    ], className="mb-2")


def layout(**_kwargs: str) -> html.Div:
    controls = dbc.Card(dbc.CardBody([
        _slider(ids.CA_ALPHA, "α (accepted per draft / K)", 0, 1, 0.01, 0.7,
                "seed alpha α_s = A/(N·K); equals vLLM's acceptance rate for full-length drafts",
                {0: "0", 0.55: "0.55", 1: "1"}),
        _slider(ids.CA_K, "K (draft length)", 1, 10, 1, 5, "num_speculative_tokens",
                {i: str(i) for i in range(1, 11)}),
        _slider(ids.CA_EPS, "ε_step (step overhead)", 0, 2, 0.05, 0.1,
                "spec step time / plain step time − 1, at the same load; the model page measures it from ITL "
                "against a baseline (ε_step), use that rather than a guess",
                {0: "0", 0.5: "0.5", 1: "1", 2: "2"}),
        html.Hr(),
        html.Div("traffic mix: class A at α above, class B below", className="sw-muted mb-1"),
        _slider(ids.CA_MIX_SHARE, "share of requests in class A", 0, 1, 0.05, 0.7,
                "request shares at equal output length: τ_mix = 1/Σ(s_c/τ_c), so the pooled α is below the share-weighted mean", {0: "0", 0.5: "0.5", 1: "1"}),
        _slider(ids.CA_MIX_ALPHA2, "α of class B", 0, 1, 0.01, 0.4, "seed alpha of the second class",
                {0: "0", 1: "1"}),
    ]), className="mb-3")
    return html.Div([
        html.H4("Calculator", className="mb-1"),
        html.Div("S = (1 + K·α)/(1 + ε); break-even α = ε/K; α for a target S = (S(1+ε) − 1)/K.",
                 className="sw-muted mb-2"),
        html.Div(id=ids.CA_STATUS),
        dbc.Row([
            dbc.Col(controls, lg=4),
            dbc.Col([dcc.Loading(html.Div(id=ids.CA_KPIS), type="dot", delay_show=300),
                     figures.chart(ids.CA_CURVE, "Speedup vs acceptance: S(α) = (1 + K·α)/(1 + ε)"),
                     figures.chart(ids.CA_MIX, "Traffic mix: class alphas, the pooled alpha and the naive mean")], lg=8),
        ]),
    ])


@callback(Output(ids.CA_STATUS, "children"), Output(ids.CA_KPIS, "children"), Output(ids.CA_CURVE, "figure"),
          Output(ids.CA_MIX, "figure"), Input(ids.CA_ALPHA, "value"), Input(ids.CA_K, "value"),
          Input(ids.CA_EPS, "value"), Input(ids.CA_MIX_SHARE, "value"), Input(ids.CA_MIX_ALPHA2, "value"),
          Input(ids.THEME_STORE, "data"))
def update(alpha, k, eps, share, alpha2, theme):
    out = c.guarded(lambda: (None, True, *render(get_client(), alpha, int(k), eps, share, alpha2, theme or "light")),
                    n_outputs=5)
    return out[0], *out[2:]


def render(client: ApiClient, alpha: float, k: int, eps: float, share: float, alpha2: float, theme: str) -> tuple:
    calls = [lambda: client.calc("speedup", SpeedupCalcBody(k=k, alpha=alpha, overhead=eps)),
             lambda: client.calc("breakeven", BreakevenCalcBody(k=k, overhead=eps)),
             lambda: client.calc("mix", MixCalcBody(k=k, overhead=eps, share_basis="requests", classes=[
                 MixClassBody(name="A", alpha=alpha, share=share), MixClassBody(name="B", alpha=alpha2,
                                                                                share=1 - share)]))]
    calls += [lambda t=t: client.calc("required-alpha", RequiredAlphaCalcBody(k=k, speedup=t, overhead=eps))
              for t in TARGETS]
    calls += [lambda a=a: client.calc("speedup", SpeedupCalcBody(k=k, alpha=a, overhead=eps)) for a in CURVE]
    calls += [lambda kk=kk: client.calc("required-alpha", RequiredAlphaCalcBody(k=kk, speedup=2.0, overhead=eps))
              for kk in range(1, K_MAX + 1)]
    res = parallel(calls)
    speed, breakeven, mix = res[:3]
    required = dict(zip(TARGETS, (r.values.get("alpha_required") for r in res[3:3 + len(TARGETS)])))
    curve = [r.values.get("speedup") for r in res[3 + len(TARGETS):3 + len(TARGETS) + len(CURVE)]]
    per_k = res[3 + len(TARGETS) + len(CURVE):]
    k_needed = next((i + 1 for i, r in enumerate(per_k)
                     if r.values.get("alpha_required") is not None and r.values["alpha_required"] <= alpha), None)
    be = breakeven.values.get("alpha_breakeven")
    cards = [
        c.kpi("speedup S", fm.fmt_speedup(speed.values.get("speedup")), id="ca-kpi-speedup",
              sub=f"tokens/step {fm.fmt(speed.values.get('tokens_per_step'), '.2f')}"),
        c.kpi("break-even α", fm.fmt_rate(be), id="ca-kpi-breakeven", hint="ε/K",
              sub=f"margin {fm.fmt(speed.values.get('margin_alpha'), '+.3f')}"),
        c.kpi("α for 2×", fm.fmt_rate(required[2.0]), id="ca-kpi-alpha-2x", hint="null: infeasible at this K and ε",
              sub=None if required[2.0] is not None else "infeasible"),
        c.kpi("α for 3×", fm.fmt_rate(required[3.0]), id="ca-kpi-alpha-3x", hint="null: infeasible at this K and ε",
              sub=None if required[3.0] is not None else "infeasible"),
        c.kpi("K needed for 2×", fm.fmt(k_needed, "d") if k_needed else fm.NO_DATA, id="ca-kpi-k-2x",
              hint=f"smallest K ≤ {K_MAX} whose required α ≤ the α above, at this ε (ε grows with K in reality)"),
        c.kpi("mixed α (pooled)", fm.fmt_rate(mix.values.get("mixed_alpha")), id="ca-kpi-mixed",
              sub=f"overall S {fm.fmt_speedup(mix.values.get('speedup'))}"),
    ]
    notes = [n for r in (speed, breakeven) for n in r.notes if n]
    kpis = html.Div([c.kpi_row(cards)] + [html.Div(n, className="sw-muted") for n in notes])
    curve_fig = figures.speedup_curve(CURVE, curve, alpha=alpha, k=k, eps=eps, break_even=be, targets=required,
                                      theme=theme)
    return kpis, curve_fig, figures.mix_bars(mix, theme)
