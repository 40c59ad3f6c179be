"""Weekly rollout report for managers: pick any past ISO week; per model the stage and what changed,
alpha per class this week vs last, margin, latency verdicts, alerts and time in alert, decisions taken
and pending, drafter comparisons; exports (Markdown, CSV, PDF) through the API."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import dash
import dash_bootstrap_components as dbc
import plotly.graph_objects as go
from dash import Input, Output, State, callback, ctx, dcc, html

from backend.domain import money, wording
from backend.domain.engines.wording import is_words
from dashboard import components as c
from dashboard import context_view, figures, ids
from dashboard import formatting as fm
from dashboard.api_client import ApiClient, get_client, weekly_export, weekly_report

dash.register_page(__name__, path="/report", name="Weekly report", order=5, title="specwatch · weekly report")

WEEKS_BACK = 26


def week_options(today: date, n: int = WEEKS_BACK) -> list[str]:
    """The last n complete ISO weeks, newest first, plus the current one (in progress)."""
    out = []
    for i in range(n + 1):
        y, w, _ = (today - timedelta(weeks=i)).isocalendar()
        out.append(f"{y}-W{w:02d}")
    return out


def layout(**kwargs: str) -> html.Div:
    weeks = week_options(datetime.now(UTC).date())
    week = kwargs.get("week") if kwargs.get("week") in weeks else None  # None: the latest week with data
    buttons = [dbc.Button(f"export {f.upper()}", id=i, size="sm", color="secondary", outline=True, className="me-1")
               for f, i in (("md", ids.RP_EXPORT_MD), ("csv", ids.RP_EXPORT_CSV), ("pdf", ids.RP_EXPORT_PDF))]
    return html.Div([
        html.Div([html.H4("Weekly rollout report", className="mb-0 me-3"),
                  c.select(ids.RP_WEEK, "week", [{"label": w + (" (in progress)" if i == 0 else ""), "value": w}
                                                 for i, w in enumerate(weeks)], week, width="14rem"),
                  html.Div(buttons), dcc.Download(id=ids.RP_DOWNLOAD)],
                 className="d-flex align-items-center flex-wrap gap-2 mb-2"),
        html.Div(id=ids.RP_STATUS),
        dcc.Loading(html.Div(id=ids.RP_BODY), type="dot", delay_show=300),
    ])


@callback(Output(ids.RP_STATUS, "children"), Output(ids.RP_BODY, "children"), Output(ids.RP_WEEK, "value"),
          Input(ids.RP_WEEK, "value"), Input(ids.THEME_STORE, "data"))
def update(week, theme):
    out = c.guarded(lambda: (None, True, *render(get_client(), week, theme or "light")), n_outputs=4)
    return out[0], out[2], out[3]


@callback(Output(ids.RP_DOWNLOAD, "data"), Input(ids.RP_EXPORT_MD, "n_clicks"), Input(ids.RP_EXPORT_CSV, "n_clicks"),
          Input(ids.RP_EXPORT_PDF, "n_clicks"), State(ids.RP_WEEK, "value"), prevent_initial_call=True)
def export(_md, _csv, _pdf, week):
    fmt = {ids.RP_EXPORT_MD: "md", ids.RP_EXPORT_CSV: "csv", ids.RP_EXPORT_PDF: "pdf"}[ctx.triggered_id]
    return dcc.send_bytes(weekly_export(get_client(), week, fmt), f"specwatch-{week}.{fmt}")


def has_data(r: dict[str, Any]) -> bool:
    return any(x["alpha"] is not None or x.get("drafts") for m in r["models"] for x in m["classes"])


def latest_report(client: ApiClient, today: date) -> dict[str, Any]:
    """The last complete week when it has data, else the week in progress (a new install), else the last
    complete week (empty)."""
    weeks = week_options(today, 1)
    last = weekly_report(client, weeks[1])
    if has_data(last):
        return last
    current = weekly_report(client, weeks[0])
    return current if has_data(current) else last


def render(client: ApiClient, week: str | None, theme: str) -> tuple[html.Div, str]:
    """(the report's body, the week shown): `week` None opens the latest week with data."""
    r = weekly_report(client, week) if week else latest_report(client, datetime.now(UTC).date())
    span = f"{_day(r['start'])} to {_day(r['end'])}"
    head = html.Div(f"{span} ({r['timezone']}), vs {r['previous_week']}; gate {(r.get('gate') or 'alpha >= ' + format(r['threshold'], '.2f')).replace('>=', '≥')}"
                    + ("" if r["complete"] else " · week in progress"), className="sw-muted mb-2")
    if not has_data(r):
        note = "no data reported in that week" + ("" if r["models"] else " (no models yet)")
        return html.Div([head, c.request_error(note)]), r["week"]
    return html.Div([head, stamp(r), what_changed(r), summary_table(r), savings_table(r)]
                    + [model_section(m, r["threshold"], theme) for m in r["models"]]), r["week"]


def stamp(r: dict[str, Any]) -> html.Div:
    """The window every value below covers, and when a week in progress was computed (the API's text,
    the one the Markdown and the PDF print)."""
    return html.Div(r.get("stamp") or "", className="sw-muted mb-2", id="rp-stamp")


def what_changed(r: dict[str, Any]) -> html.Div:
    """The report's opening: each drafter, K or vLLM version change of the week with its A/B verdicts (the
    API's items, the lines the Markdown prints)."""
    items = r.get("what_changed") or []
    rows = []
    for x in items:
        v = x.get("verdicts") or {}
        cells = [_verdict(v[k]["verdict"], v[k].get("text")) if k in v else c.value(fm.NO_DATA)
                 for k in ("alpha", "measured_speedup", "p99_tpot")]
        where = f"{x['model']} {x['spec_mode']}" + (f" ({', '.join(x['classes'])})" if x["classes"] else "")
        rows.append([_when(x["at"]), where, x["what"], *cells, x.get("sentence") or fm.NO_DATA])
    content = (_table(["when", "where", "change", "alpha", "speedup", "P99 TPOT", "A/B"], rows) if rows
               else html.Div("no drafter, K or vLLM version change this week", className="sw-muted"))
    return html.Div([html.H5("What changed this week"), content], className="sw-section mb-3", id="rp-changed")


def summary_table(r: dict[str, Any]) -> html.Div:
    """The table the Markdown and the PDF open with: the API's rows (report.summary_table), as they are."""
    t = r.get("summary") or {"head": [], "rows": []}
    return html.Div([html.H5("Summary"), _table(t["head"], [list(row) for row in t["rows"]])],
                    className="sw-section mb-3", id="rp-summary")


def _cur(r: dict[str, Any]) -> str:
    return r.get("currency") or money.DEFAULT_CURRENCY


def _money(v: float | None, currency: str) -> str:
    return money.money_text(v, currency, none=fm.NO_DATA)


def _between(m: dict[str, Any], currency: str) -> str:
    return money.interval_text(m.get("saved_this_week_so_far_low"), m.get("saved_this_week_so_far_high"), currency,
                               none=fm.NO_DATA)


def _saved(m: dict[str, Any], currency: str) -> str:
    return money.saved_week_cell(m.get("saved_this_week_so_far"), m.get("hours_of_data"), currency, none=fm.NO_DATA)


def savings_table(r: dict[str, Any]) -> html.Div:
    """The managers' lines: "saved this week so far (N h of data)" per model and for the fleet, with the
    interval, in the report's currency."""
    cur = _cur(r)
    rows = [[m["model"], _saved(m.get("capacity", {}).get("total", {}), cur),
             _between(m.get("capacity", {}).get("total", {}), cur)] for m in r["models"]]
    total = r.get("capacity_total", {})
    rows.append([html.Strong("fleet"), _saved(total, cur), _between(total, cur)])
    return html.Div([html.H5("Saved by speculation"),
                     html.Div("Saved this week so far: over the week until now (the whole week once it is over), the "
                              "replica-hours the baseline would "
                              "have needed for the same output tokens in the same concurrency band, minus those used, "
                              "times the GPU-hour price (negative: a loss), with the hours of data it rests on; 95 % "
                              f"bootstrap interval over time bins. Currency: {cur}.", className="sw-muted mb-1"),
                     _table(["model", money.SAVED_WEEK_SO_FAR, "95 % interval"], rows)],
                    className="sw-section mb-3", id="rp-savings")


def capacity_table(m: dict[str, Any]) -> list:
    cp = m.get("capacity") or {}
    lines = cp.get("lines") or []
    if not lines:
        return []
    cur = cp.get("currency") or money.DEFAULT_CURRENCY
    return [html.H6("Capacity and money"), _table(
        ["scope", "method", "operating band", "tokens/s per replica (spec / baseline)",
         "cost per 1M tokens (spec / baseline)", money.SAVED_WEEK_SO_FAR, "95 % interval", "stops paying from"],
        [[x["scope"], x["spec_mode"], x.get("operating_band") or fm.NO_DATA, f"{fm.fmt(x['per_replica'], ',.1f')} / {fm.fmt(x['per_replica_baseline'], ',.1f')}",
          f"{_money(x['cost_per_mtok_spec'], cur)} / {_money(x['cost_per_mtok_baseline'], cur)}", _saved(x, cur),
          _between(x, cur), x["stops_paying_band"] or "never"] for x in lines]),
        html.Ul([html.Li(f"{x['scope']} {x['spec_mode']}: {x['note']}") for x in lines])]


def context_table(m: dict[str, Any]) -> list:
    """α by context length over the week (the report's by_context_length: the API's bands, worded as the
    model page and the exports word them); nothing for a model without per-request records."""
    sections = m.get("by_context_length") or []
    if not sections:
        return []
    return [html.H6(context_view.cv.SECTION),
            context_view.table(sections, f"rp-context-{m['model']}".replace(".", "-").replace("/", "-"))]


def _day(iso: str) -> str:
    return datetime.fromisoformat(iso).strftime("%a %b %d")


def _when(iso: str | None) -> str:
    """'Nov 25 06:00 UTC': minutes, never seconds or microseconds."""
    return fm.fmt_time(datetime.fromisoformat(iso), now=datetime.min.replace(tzinfo=UTC)) if iso else fm.NO_DATA


def alpha_chart(m: dict[str, Any], threshold: float, theme: str = "light") -> go.Figure:
    """Alpha per class and mixed, last week vs this week (nulls stay gaps), with each scope's gate."""
    scopes = [c_["scope"] for c_ in m["classes"]]
    fig = go.Figure(layout={"template": "plotly_dark" if theme == "dark" else "plotly_white", "height": 280,
                            "barmode": "group", "margin": {"l": 45, "r": 10, "t": 20, "b": 30},
                            "legend": figures.LEGEND, "yaxis": {"range": [0, 1.12], "title": "α"},
                            "paper_bgcolor": "rgba(0,0,0,0)"})
    fig.add_bar(x=scopes, y=[x["alpha_prev"] for x in m["classes"]], name="last week", marker_color=fm.OKABE_ITO["grey"])
    fig.add_bar(x=scopes, y=[x["alpha"] for x in m["classes"]], name="this week", marker_color=fm.OKABE_ITO["blue"])
    # the gate of each scope (the alert rules' alpha_low threshold for its class): a mark across its bars
    limits = [x.get("threshold") if x.get("threshold") is not None else threshold for x in m["classes"]]
    fig.add_scatter(x=scopes, y=limits, name="gate", mode="markers", hovertemplate="gate %{y:.2f}<extra></extra>",
                    marker={"symbol": "line-ew", "size": 36, "line": {"width": 3, "color": fm.OKABE_ITO["vermillion"]}})
    return fig


def _verdict(v: str | None, reason: str | None = None):
    return c.verdict_badge(v, reason) if v else c.value(fm.NO_DATA)


def _table(head: list[str], rows: list[list]) -> dbc.Table:
    return c.stacked(dbc.Table([html.Thead(html.Tr([html.Th(h) for h in head])),
                                html.Tbody([html.Tr([html.Td(x) for x in row]) for row in rows])], size="sm",
                               responsive=True, className="sw-report-table"))


def model_section(m: dict[str, Any], threshold: float, theme: str) -> html.Div:
    # a figure the row's engine does not give as a count: the API's words for it (engine wording), never a 0
    words = lambda x, key, text: x.get(key) if x.get(key) and is_words(x[key]) else text
    classes = _table(["scope", "engine", "method", "drafter", "alpha", "last week", "change", "tau", "margin",
                      "speedup", "band (margin, speedup)", "P99 TPOT", "P99 ITL"],
                     [[x["scope"], x.get("engine") or "vLLM", x["spec_mode"] or fm.NO_DATA,
                       c.value(x.get("drafter") or fm.NO_DATA),
                       words(x, "alpha_text", fm.fmt_rate(x["alpha"])), fm.fmt_rate(x["alpha_prev"]),
                       fm.fmt(x["alpha_delta"], "+.3f"), words(x, "tau_text", fm.fmt_tau(x["tau"])),
                       words(x, "margin_text", fm.fmt(x["margin"], "+.3f")),
                       fm.fmt_speedup(x["speedup"]), x.get("concurrency_band") or fm.NO_DATA,
                       x.get("tpot_text") or _verdict(x["tpot_p99_verdict"], x.get("tpot_p99_reason")),
                       x.get("itl_text") or _verdict(x["itl_p99_verdict"], x.get("itl_p99_reason"))]
                      for x in m["classes"]])
    al = m["alerts"]
    lists = [html.Li(f"{_when(e['at'])} {e['scope']}: {wording.stage_text(e['from']) if e['from'] else '—'} → "
                     f"{wording.stage_text(e['to'])} ({e['actor']}): {e['reason']}")
             for e in m["changes"]] or [html.Li("nothing")]
    pending = [html.Li(f"{p['scope']}: {wording.stage_text(p['stage'])}; to do: {p['action']}")
               for p in m["pending"]] or [html.Li("none")]
    decided = [html.Li(f"{_when(d['at'])} {d['scope']}: {wording.action_text(d['action'])} by {d['actor']}: {d['reason']}")
               for d in m["decisions"]] or [html.Li("none")]
    parts = [html.H5(f"{m['model']} — {wording.stage_text(m['stage'])}", id=f"rp-model-{m['model']}"),
             dbc.Row([dbc.Col(figures.chart(f"rp-chart-{m['model']}".replace(".", "-"), "Acceptance rate: last week vs this week",
                                      figure=alpha_chart(m, threshold, theme)), lg=4),
                      dbc.Col(classes, lg=8)]),
             *capacity_table(m),
             *context_table(m),
             html.Div(f"alerts fired: {al['fired']} · time in alert: {fm.fmt_duration(al['seconds_in_alert'])} "
                      "(overlapping alerts counted once)", className="mb-1"),
             dbc.Row([dbc.Col([html.H6("Rollout stage changes"), html.Ul(lists)], md=6),
                      dbc.Col([html.H6("Decisions taken"), html.Ul(decided), html.H6("Pending"), html.Ul(pending)], md=6)])]
    if m["drafters"]:
        parts += [html.H6("Drafter comparison"), _table(
            ["scope", "reference → challenger", "alpha", "tau", "P99 TPOT (challenger vs reference)"],
            [[d["scope"], f"{d['reference']} → {d['challenger']}", f"{fm.fmt_rate(d['alpha'][0])} → {fm.fmt_rate(d['alpha'][1])}",
              f"{fm.fmt_tau(d['tau'][0])} → {fm.fmt_tau(d['tau'][1])}", c.verdict_badge(d["tpot_p99_verdict"], d.get("tpot_p99_reason"))]
             for d in m["drafters"]])]
    return html.Div(parts, className="sw-section mb-4")
