"""Alerts: firing, pending and silenced alerts, the history of transitions with the values that caused them,
the silences; operators silence (matchers model / class / rule, a duration, a reason; the API records the
logged-in user as author) and acknowledge; viewers see those actions disabled with the reason.

Also the overview's firing-alerts banner (its slot is in pages/overview.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import dash
import dash_bootstrap_components as dbc
from dash import ALL, Input, Output, State, callback, ctx, dcc, html, no_update

from dashboard import alerts_client as ac
from dashboard import alerts_view as v
from dashboard import auth, ids, state
from dashboard import components as c
from dashboard import formatting as fm
from dashboard.api_client import ApiClient, ApiError, ApiUnavailable, get_client, parallel

dash.register_page(__name__, path="/alerts", name="Alerts", order=4, title="specwatch · alerts")

DURATIONS = (("30m", 1800), ("1h", 3600), ("2h", 7200), ("4h", 14400), ("12h", 43200), ("1d", 86400))
N_OUT = 11  # outputs of `update`
HISTORY = 100  # transitions shown


def _input(id: str, label: str, placeholder: str) -> html.Div:
    return html.Div([html.Label(label, htmlFor=id, className="sw-nav-label"),
                     dbc.Input(id=id, placeholder=placeholder, size="sm", debounce=False)], className="sw-al-field")


def _receiver_link(url: str | None) -> html.P | None:
    """The Slack-compatible receiver's page (the demo's channel), when the dashboard was told of one."""
    if not url:
        return None
    return html.P(["The messages sent to Slack: ", html.A("open the receiver's channel page", href=url,
                                                           id=v.AL_RECEIVER, target="_blank", rel="noopener")],
                  className="sw-muted mb-1")


def layout(**_kw: str) -> html.Div:
    return html.Div([
        dcc.Interval(id=v.AL_RETRY, interval=5000, disabled=True),
        dcc.Store(id=v.AL_DATA, data={}), dcc.Store(id=v.AL_DONE_SILENCE, data=0), dcc.Store(id=v.AL_DONE_ACK, data=0),
        html.H4("Alerts", className="mb-1"),
        _receiver_link(auth.settings().receiver_url),
        html.Div(id=v.AL_STATUS),
        dcc.Loading(html.Div(id=v.AL_KPIS), type="dot", delay_show=300),
        html.H5("Firing", className="sw-section"), html.Div(id=v.AL_FIRING),
        html.H5("Pending", className="sw-section"), html.Div(id=v.AL_PENDING),
        html.H5("Silenced", className="sw-section"), html.Div(id=v.AL_SILENCED),
        html.Div(id=v.AL_ACK_RESULT),
        html.H5("Silence alerts", className="sw-section"),
        dbc.Card(dbc.CardBody([
            html.Div([_input(v.AL_MODEL, "model", "e.g. llama-3.1-70b or llama-*"),
                      _input(v.AL_CLASS, "class", "e.g. chat (empty: any)"),
                      _input(v.AL_RULE, "rule", "e.g. alpha-low (empty: any)"),
                      html.Div([html.Label("for", htmlFor=v.AL_DURATION, className="sw-nav-label"),
                                dbc.Select(id=v.AL_DURATION, value="3600", size="sm",
                                           options=[{"label": t, "value": str(s)} for t, s in DURATIONS])],
                               className="sw-al-field"),
                      _input(v.AL_REASON, "reason", "why (shown to everyone)")], className="sw-al-form"),
            html.Div([dbc.Button("silence", id=v.AL_SUBMIT, size="sm", className="sw-btn-primary", disabled=True),
                      html.Span(id=v.AL_WHY, className="sw-muted ms-2")], className="d-flex align-items-center mt-2"),
            html.Div(id=v.AL_RESULT, className="mt-2"),
        ]), className="sw-al-formcard"),
        html.H5("Silences", className="sw-section"), html.Div(id=v.AL_SILENCES),
        html.H5("History", className="sw-section"),
        html.Div(f"Each transition with the values that caused it (the newest {HISTORY}).", className="sw-muted"),
        html.Div(id=v.AL_HISTORY),
    ])


@callback(Output(v.AL_STATUS, "children"), Output(v.AL_RETRY, "disabled"), Output(v.AL_KPIS, "children"),
          Output(v.AL_FIRING, "children"), Output(v.AL_PENDING, "children"), Output(v.AL_SILENCED, "children"),
          Output(v.AL_HISTORY, "children"), Output(v.AL_SILENCES, "children"), Output(v.AL_SUBMIT, "disabled"),
          Output(v.AL_WHY, "children"), Output(v.AL_DATA, "data"),
          Input(ids.REFRESH_INTERVAL, "n_intervals"), Input(v.AL_RETRY, "n_intervals"),
          Input(v.AL_DONE_SILENCE, "data"), Input(v.AL_DONE_ACK, "data"), State(ids.URL, "search"))
def update(_tick, _retry, _done_s, _done_a, search):
    query = state.as_dict(state.parse_search(search))
    return c.guarded(lambda: render(get_client(), auth.current_user(), auth.mode(), query), n_outputs=N_OUT)


def render(client: ApiClient, user: auth.User | None, mode: str, query: dict) -> tuple:
    allowed, why = v.permission(user, mode)
    try:
        alerts, history, silences = parallel([lambda: ac.alerts(client), lambda: ac.history(client, limit=HISTORY),
                                              lambda: ac.silences(client)])
    except ApiError as exc:
        if not ac.needs_token(exc):
            raise
        note = dbc.Alert([c.info_icon(), html.Strong(v.NEEDS_TOKEN), " · ", _how_to_log_in(mode)],
                         color="info", className="sw-al-needs-token")
        return (note, True, None, None, None, None, None, None, True, why, {})
    shown = {a.id: v.shown_phase(a) for a in alerts}
    firing = [a for a in alerts if shown[a.id] == "firing"]
    pending = [a for a in alerts if shown[a.id] == "pending"]
    silenced = [a for a in alerts if shown[a.id] == "silenced"]
    active = [s for s in silences if s.active]
    kpis = c.kpi_row([c.kpi("▲ firing", str(len(firing)), id="al-kpi-firing"),
                      c.kpi("◎ pending", str(len(pending)), id="al-kpi-pending"),
                      c.kpi("⊘ silenced", str(len(silenced)), id="al-kpi-silenced"),
                      c.kpi("✓ acknowledged", str(sum(1 for a in firing + pending if a.acked_by)), id="al-kpi-acked"),
                      c.kpi("active silences", str(len(active)), id="al-kpi-silences")])
    status = html.Span(f"{len(alerts)} alerts pending, firing or resolved · updated {fm.fmt_time(datetime.now(UTC))}",
                       className="sw-muted sw-updated")
    data = {str(a.id): {"model": a.labels.get("model", ""), "traffic_class": a.labels.get("traffic_class", ""),
                        "rule": a.rule} for a in alerts}
    return (status, True, kpis,
            v.alert_table(firing, v.AL_FIRING, "nothing is firing", allowed, why, query),
            v.alert_table(pending, v.AL_PENDING, "nothing is pending", allowed, why, query),
            v.alert_table(silenced, v.AL_SILENCED, "no alert is silenced", allowed, why, query),
            v.history_table(history, query), v.silences_table(silences), not allowed, why, data)


@callback(Output(v.AL_MODEL, "value"), Output(v.AL_CLASS, "value"), Output(v.AL_RULE, "value"),
          Input({"type": v.AL_PREFILL, "index": ALL}, "n_clicks"), State(v.AL_DATA, "data"),
          prevent_initial_call=True)
def prefill(clicks, data):
    if not ctx.triggered_id or not any(clicks or []):
        return no_update, no_update, no_update
    labels = (data or {}).get(str(ctx.triggered_id["index"]))
    return (labels["model"], labels["traffic_class"], labels["rule"]) if labels else (no_update,) * 3


@callback(Output(v.AL_RESULT, "children"), Output(v.AL_DONE_SILENCE, "data"), Input(v.AL_SUBMIT, "n_clicks"),
          State(v.AL_MODEL, "value"), State(v.AL_CLASS, "value"), State(v.AL_RULE, "value"),
          State(v.AL_DURATION, "value"), State(v.AL_REASON, "value"), State(v.AL_DONE_SILENCE, "data"),
          prevent_initial_call=True)
def submit_silence(n, model, cls, rule, duration, reason, done):
    if not n:
        return no_update, no_update
    return silence(get_client(), auth.current_user(), auth.mode(), model, cls, rule, duration, reason, done)


def silence(client: ApiClient, user, mode: str, model, cls, rule, duration, reason, done) -> tuple:
    allowed, why = v.permission(user, mode)
    if not allowed:
        return dbc.Alert(why, color="info"), no_update
    matchers = {k: x.strip() for k, x in (("model", model), ("traffic_class", cls), ("rule", rule)) if x and x.strip()}
    if not matchers or not (reason or "").strip():
        return dbc.Alert("give at least one of model / class / rule, and a reason", color="info"), no_update
    try:
        s = ac.create_silence(client, matchers=matchers, duration_seconds=float(duration or 3600), reason=reason.strip())
    except (ApiError, ApiUnavailable) as exc:
        return dbc.Alert(f"not silenced: {_why(exc)}", color="warning", className="sw-al-fail"), no_update
    text = f"✔ silence #{s.id} by {s.created_by} until {fm.fmt_time(s.ends_at)}: " + \
        ", ".join(f"{k}={x}" for k, x in s.matchers.items())
    return dbc.Alert(text, color="secondary", className="sw-al-done", id="al-silence-created"), (done or 0) + 1


@callback(Output(v.AL_ACK_RESULT, "children"), Output(v.AL_DONE_ACK, "data"),
          Input({"type": v.AL_ACK, "index": ALL}, "n_clicks"), State(v.AL_DONE_ACK, "data"),
          prevent_initial_call=True)
def submit_ack(clicks, done):
    if not ctx.triggered_id or not any(clicks or []):
        return no_update, no_update
    return acknowledge(get_client(), auth.current_user(), auth.mode(), int(ctx.triggered_id["index"]), done)


def acknowledge(client: ApiClient, user, mode: str, alert_id: int, done) -> tuple:
    allowed, why = v.permission(user, mode)
    if not allowed:
        return dbc.Alert(why, color="info"), no_update
    try:
        ac.acknowledge(client, alert_id)
    except (ApiError, ApiUnavailable) as exc:
        return dbc.Alert(f"not acknowledged: {_why(exc)}", color="warning"), no_update
    return dbc.Alert(f"✔ alert #{alert_id} acknowledged by {user.name}", color="secondary"), (done or 0) + 1


# --- the overview's banner ------------------------------------------------------------------------------

@callback(Output(v.OV_ALERTS, "children"), Input(ids.OV_QUERY, "data"), Input(ids.REFRESH_INTERVAL, "n_intervals"))
def overview_banner(query, _tick):
    return banner(get_client(), state.as_dict(state.from_params(query or {})), auth.mode())


def banner(client: ApiClient, query: dict, mode: str = "token"):
    """Firing alerts for the overview; the overview's own banner already reports an unreachable backend."""
    try:
        return v.firing_banner(ac.alerts(client), query)
    except ApiUnavailable:
        return None
    except ApiError as exc:
        if ac.needs_token(exc):
            return html.Div([c.info_icon(), v.NEEDS_TOKEN, " · ", _how_to_log_in(mode)],
                            className="sw-muted sw-al-needs-token")
        return html.Div(f"alerts: {c.refusal(exc)}", className="sw-muted")


def _how_to_log_in(mode: str):
    """The way to a token: the login page, or the dashboard's own settings when it has no login."""
    return html.A("log in", href="/login") if mode == "token" else \
        "set SPECWATCH_DASHBOARD_API_TOKEN (a viewer token) or run the dashboard with --auth token"


def _why(exc: Exception) -> str:
    """Why a silence or an acknowledgement did not happen, as a sentence."""
    return c.refusal(exc) if isinstance(exc, ApiError) else "the backend did not answer; try again in a moment"
