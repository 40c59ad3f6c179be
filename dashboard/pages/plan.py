"""Rollout plan generator: model, K, traffic mix, production concurrency (and assumed alphas) -> a staged
Markdown plan from POST /api/v1/plan, with the calculator's numbers and measured values when the model
has data."""

from __future__ import annotations

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, State, callback, dcc, html

from dashboard import components as c
from dashboard import ids
from dashboard.api_client import ApiClient, get_client, rollout_plan

dash.register_page(__name__, path="/plan", name="Plan", order=6, title="specwatch · rollout plan")


def layout(**kwargs: str) -> html.Div:
    field = lambda label, comp: dbc.Col([html.Label(label, htmlFor=comp.id, className="sw-form-label"), comp],
                                        md=2, className="sw-form-field")
    return html.Div([
        html.H4("Rollout plan", className="mb-1"),
        html.Div("Same numbers as the calculator; measured alphas and eps fill in when the model has data.",
                 className="sw-muted mb-2"),
        dbc.Row([
            field("model", dbc.Input(id=ids.PL_MODEL, value=kwargs.get("model", ""), placeholder="model name")),
            field("K", dbc.Input(id=ids.PL_K, type="number", min=1, max=16, value=5)),
            field("traffic (request shares)", dbc.Input(id=ids.PL_TRAFFIC, value="chat=0.7,code=0.3")),
            field("concurrency", dbc.Input(id=ids.PL_CONCURRENCY, type="number", min=1, value=64)),
            field("alpha (optional)", dbc.Input(id=ids.PL_ALPHA, placeholder="chat=0.7,code=0.4")),
            dbc.Col(dbc.Button("generate", id=ids.PL_SUBMIT, color="primary", className="sw-btn-primary"), md=2,
                    className="sw-form-field"),
        ], className="g-2 mb-3 sw-form-row"),
        html.Div(id=ids.PL_STATUS),
        dcc.Loading(dcc.Markdown(id=ids.PL_OUTPUT, className="sw-plan"), type="dot", delay_show=300),
    ])


def parse_shares(text: str | None) -> dict[str, float]:
    """'chat=0.7,code=0.3' -> {'chat': 0.7, 'code': 0.3}; ValueError with a readable message."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in (text or "").split(",") if p.strip()):
        name, sep, val = part.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"expected name=value, got {part!r}")
        out[name.strip()] = float(val)
    return out


@callback(Output(ids.PL_STATUS, "children"), Output(ids.PL_OUTPUT, "children"), Input(ids.PL_SUBMIT, "n_clicks"),
          State(ids.PL_MODEL, "value"), State(ids.PL_K, "value"), State(ids.PL_TRAFFIC, "value"),
          State(ids.PL_CONCURRENCY, "value"), State(ids.PL_ALPHA, "value"), prevent_initial_call=True)
def generate(_n, model, k, traffic, concurrency, alpha):
    out = c.guarded(lambda: render(get_client(), model, k, traffic, concurrency, alpha), n_outputs=3)
    return out[0], out[2]


def render(client: ApiClient, model: str | None, k, traffic: str | None, concurrency, alpha: str | None) -> tuple:
    try:
        shares, alphas = parse_shares(traffic), parse_shares(alpha)
        if not model or not shares or not k or not concurrency:
            raise ValueError("give a model, K, the traffic shares and the concurrency")
    except ValueError as exc:
        return c.request_error(str(exc)), True, ""
    body = rollout_plan(client, model=model, k=int(k), traffic=shares, concurrency=int(concurrency), alpha=alphas)
    return None, True, body["markdown"]
