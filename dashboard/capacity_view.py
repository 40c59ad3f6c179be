"""The model page's capacity and money section (GET /capacity): a line per spec pool, then the selected class's
concurrency bands, with the model's savings over the window and per week at the window's rate."""

from __future__ import annotations

import dash_bootstrap_components as dbc
from dash import html

from backend.domain import money
from dashboard import components as c
from dashboard import formatting as fm
from dashboard import state
from dashboard.api_client import ApiClient


def _money(v: float | None, currency: str) -> str:
    return money.money_text(v, currency, none=fm.NO_DATA)


def _between(low: float | None, high: float | None, currency: str) -> str:
    return money.interval_text(low, high, currency, none=fm.NO_DATA)


def _table(head: list[str], rows: list[list], id: str) -> dbc.Table:
    return c.stacked(dbc.Table([html.Thead(html.Tr([html.Th(h) for h in head])),
                                html.Tbody([html.Tr([html.Td(x) for x in row]) for row in rows])], size="sm",
                               responsive=True, id=id))


def render_capacity(client: ApiClient, view: state.View) -> html.Div:
    """GET /capacity of the model shown: a line per spec pool, then the selected class's concurrency bands."""
    models = c.spec_models(client.pools())
    model = c.pick(models, view.model)
    if model is None:
        return html.Div("no speculative pools reported yet", className="sw-muted")
    cap = client.capacity(model, view)
    cur = cap.currency
    if not cap.classes:
        return html.Div("no output-token counters (vllm:generation_tokens_total) in this window", className="sw-muted")
    lines = _table(
        ["class", "mode", "operating band", "tokens/s per replica (spec / baseline)", "per running request",
         "cost per 1M tokens",
         money.SAVED_IN_WINDOW, "95 % interval", money.PER_WEEK_AT_WINDOW_RATE, "stops paying from"],
        [[k.traffic_class, k.spec_mode, k.operating_band or fm.NO_DATA,
          f"{fm.fmt(k.spec.per_replica, ',.1f')} / {fm.fmt(k.baseline.per_replica if k.baseline else None, ',.1f')}",
          f"{fm.fmt(k.spec.per_request, ',.2f')} / {fm.fmt(k.baseline.per_request if k.baseline else None, ',.2f')}",
          f"{_money(k.money.cost_per_mtok_spec, cur)} / {_money(k.money.cost_per_mtok_baseline, cur)}",
          _money(k.money.saved_in_window, cur),
          _between(k.money.saved_in_window_low, k.money.saved_in_window_high, cur),
          _money(k.money.per_week_at_window_rate, cur), k.stops_paying_band or "never"] for k in cap.classes],
        "md-capacity-lines")
    mode_rows = [k for k in cap.classes if view.mode in (None, k.spec_mode)] or cap.classes
    chosen = next((k for k in mode_rows if k.traffic_class == view.cls), mode_rows[0])
    bands = _table(
        ["band (running requests)", "tokens/s per replica spec", "baseline", "ratio (95 %)", "per running request",
         "cost per 1M spec", "baseline", money.SAVED_IN_WINDOW, "pays"],
        [[b.band, fm.fmt(b.spec.per_replica, ",.1f"), fm.fmt(b.baseline.per_replica if b.baseline else None, ",.1f"),
          f"{fm.fmt(b.ratio_per_replica, '.2f')} ({fm.fmt(b.ratio_low, '.2f')}–{fm.fmt(b.ratio_high, '.2f')})",
          f"{fm.fmt(b.spec.per_request, ',.2f')} / {fm.fmt(b.baseline.per_request if b.baseline else None, ',.2f')}",
          _money(b.spec.cost_per_mtok, cur), _money(b.baseline.cost_per_mtok if b.baseline else None, cur),
          _money(b.saved_in_window, cur),
          b.pays or fm.NO_DATA] for b in chosen.bands], "md-capacity-bands")
    notes = [html.Li(f"{k.traffic_class} {k.spec_mode}: {k.note}") for k in cap.classes]
    total = cap.total
    return html.Div([
        html.Div(f"{model}: {money.SAVED_IN_WINDOW} {_money(total.saved_in_window, cur)} (95 %: "
                 f"{_between(total.saved_in_window_low, total.saved_in_window_high, cur)}); "
                 f"{money.PER_WEEK_AT_WINDOW_RATE} {_money(total.per_week_at_window_rate, cur)}. "
                 f"Interval: {cap.method}.", className="mb-1",
                 id="md-capacity-total"),
        lines, html.H6(f"{chosen.traffic_class} {chosen.spec_mode} per concurrency band"), bands, html.Ul(notes)])
