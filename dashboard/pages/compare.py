"""Drafter / configuration A/B: two spec modes side by side, or one before and after an instant (a drafter,
K or vLLM version change). GET /api/v1/compare: per class and for the mix, load-matched by concurrency band,
each figure with its 95 % interval and verdict; CSV export through the API."""

from __future__ import annotations

from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, State, callback, dcc, html

from backend.domain import ab_compare as ab
from dashboard import components as c
from dashboard import formatting as fm
from dashboard import ids
from dashboard.api_client import ApiClient, compare_csv, compare_params, compare_report, get_client

dash.register_page(__name__, path="/compare", name="A/B", order=7, title="specwatch · drafter A/B")

NAMES = {"alpha": "alpha", "tau": "tau", "measured_speedup": "measured speedup", "cost_per_mtok": "cost per 1 M tokens"}


def layout(**kwargs: str) -> html.Div:
    field = lambda label, comp: dbc.Col([html.Label(label, htmlFor=comp.id, className="sw-form-label"), comp],
                                        md=2, className="sw-form-field")
    return html.Div([
        html.H4("Drafter A/B", className="mb-1"),
        html.Div("B against A, load-matched: only concurrency bands both sides ran in, each side at B's traffic "
                 "per band. Give A and B (two spec modes over the window), or an instant (before and after it).",
                 className="sw-muted mb-2"),
        dbc.Row([
            field("model", dbc.Input(id=ids.CP_MODEL, value=kwargs.get("model", ""), placeholder="model name")),
            field("A (reference spec mode)", dbc.Input(id=ids.CP_A, value=kwargs.get("a", ""))),
            field("B (candidate spec mode)", dbc.Input(id=ids.CP_B, value=kwargs.get("b", ""))),
            field("or before/after (RFC 3339)", dbc.Input(id=ids.CP_AT, value=kwargs.get("at", ""),
                                                          placeholder="2026-11-30T12:00:00Z")),
            field("window", dbc.Input(id=ids.CP_WINDOW, value=kwargs.get("range", "7d"))),
            dbc.Col([dbc.Button("compare", id=ids.CP_SUBMIT, color="primary", className="sw-btn-primary me-1"),
                     dbc.Button("export CSV", id=ids.CP_EXPORT, color="secondary", outline=True)], md=2,
                    className="sw-form-field"),
        ], className="g-2 mb-3 sw-form-row"),
        dcc.Download(id=ids.CP_DOWNLOAD),
        html.Div(id=ids.CP_STATUS),
        dcc.Loading(html.Div(id=ids.CP_BODY), type="dot", delay_show=300),
    ])


@callback(Output(ids.CP_STATUS, "children"), Output(ids.CP_BODY, "children"), Input(ids.CP_SUBMIT, "n_clicks"),
          State(ids.CP_MODEL, "value"), State(ids.CP_A, "value"), State(ids.CP_B, "value"), State(ids.CP_AT, "value"),
          State(ids.CP_WINDOW, "value"), prevent_initial_call=True)
def submit(_n, model, a, b, at, window):
    out = c.guarded(lambda: render(get_client(), model, a, b, at, window), n_outputs=3)
    return out[0], out[2]


@callback(Output(ids.CP_DOWNLOAD, "data"), Input(ids.CP_EXPORT, "n_clicks"), State(ids.CP_MODEL, "value"),
          State(ids.CP_A, "value"), State(ids.CP_B, "value"), State(ids.CP_AT, "value"), State(ids.CP_WINDOW, "value"),
          prevent_initial_call=True)
def export(_n, model, a, b, at, window):
    if not model:
        return dash.no_update
    return dcc.send_bytes(compare_csv(get_client(), compare_params(model, a, b, at, window)), "specwatch-compare.csv")


def render(client: ApiClient, model, a, b, at, window) -> tuple:
    if not (model or "").strip():
        return c.request_error("give a model, then A and B, or an instant"), True, None
    r = compare_report(client, compare_params(model, a, b, at, window))
    return None, True, body(r)


def _num(v: float | None, metric: str) -> str:
    if v is None:
        return fm.NO_DATA
    return f"{v:,.2f}" if metric == "cost_per_mtok" else f"{v:.3f}"


def body(r: dict[str, Any]) -> html.Div:
    parts: list = [html.H5(r["sentence"], id="cp-sentence"),
                   html.Div(f"A: {r['a']['label']} ({r['a']['start']} to {r['a']['end']}) · "
                            f"B: {r['b']['label']} ({r['b']['start']} to {r['b']['end']})", className="sw-muted mb-2")]
    for s in r["scopes"]:
        rows = [[NAMES.get(m["metric"], m["metric"]), _num(m["a"], m["metric"]), _num(m["b"], m["metric"]),
                 ab.percent_text(m["change"], m["change_low"], m["change_high"]), c.verdict_badge(m["verdict"], m["reason"])]
                for m in s["metrics"]]
        rows += [[f"P99 {fam.upper()}", fm.NO_DATA if v["a"] is None else f"{v['a'] * 1000:.1f} ms",
                  fm.NO_DATA if v["b"] is None else f"{v['b'] * 1000:.1f} ms", fm.NO_DATA,
                  c.verdict_badge(v["verdict"], v["reason"])] for fam, v in s["p99"].items()]
        table = c.stacked(dbc.Table([html.Thead(html.Tr([html.Th(h) for h in ("figure", "A", "B", "change (95 %)",
                                                                                "verdict")])),
                                     html.Tbody([html.Tr([html.Td(x) for x in row]) for row in rows])],
                                    size="sm", responsive=True))
        parts.append(html.Div([html.H6(f"{s['scope']} · bands compared: {', '.join(s['bands']) or 'none'}"), table,
                               html.Ul([html.Li(n) for n in s["notes"]])], className="sw-section mb-3"))
    parts.append(html.Div(r["method"], className="sw-muted"))
    return html.Div(parts)
