"""Rollout status: the 5-step recipe per model x scope (stage, gate and latency results, counters), the
audit log (who, when, why, the numbers), and a manual transition form for operators (API token)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, State, callback, dcc, html

from backend.domain import wording
from dashboard import components as c
from dashboard import formatting as fm
from dashboard import ids
from dashboard.api_client import (
    ApiClient,
    ApiError,
    ApiUnavailable,
    get_client,
    rollout_events,
    rollout_tracks,
    rollout_transition,
)

dash.register_page(__name__, path="/rollout", name="Rollout", order=4, title="specwatch · rollout")

ACTIONS = {"sign_off": "sign off", "disable": "disable speculation", "domain_drafter": "domain drafter in training",
           "hold": "hold for a human", "resume": "resume (new gate run)"}
KINDS = {"derived": "from the data", "manual": "by an operator", "snapshot": "baseline snapshot"}
STEP_NAMES = {0: "no data", 1: "baseline", 2: "drafter on", 3: "measuring alpha", 4: "gate", 5: "latency / rolled out"}


def layout(**kwargs: str) -> html.Div:
    form = dbc.Card(dbc.CardBody([
        html.H6("Manual transition (operator)", className="mb-2"),
        dbc.Row([
            dbc.Col(dcc.Dropdown(id=ids.RO_FORM_SCOPE, placeholder="model / scope"), md=3),
            dbc.Col(dcc.Dropdown(id=ids.RO_FORM_ACTION, options=[{"label": v, "value": k} for k, v in ACTIONS.items()],
                                 placeholder="action"), md=3),
            dbc.Col(dbc.Input(id=ids.RO_FORM_REASON, placeholder="reason (required)"), md=3),
            dbc.Col(dbc.Input(id=ids.RO_FORM_TOKEN, type="password", placeholder="operator API token"), md=2),
            dbc.Col(dbc.Button("apply", id=ids.RO_FORM_SUBMIT, color="primary"), md=1),
        ], className="g-2"),
        html.Div(id=ids.RO_FORM_RESULT, className="mt-2"),
    ]), className="mb-3")
    return html.Div([
        dcc.Interval(id=ids.RO_RETRY, interval=5000, disabled=True),
        html.Div([html.H4("Rollout status", className="mb-0 me-3"),
                  c.select(ids.RO_MODEL, "model", [kwargs["model"]] if kwargs.get("model") else [], kwargs.get("model"))],
                 className="d-flex align-items-center flex-wrap gap-2 mb-1"),
        html.Div("1 baseline → 2 drafter on → 3 measure alpha → 4 gate (alpha ≥ threshold on the mix) → 5 P99 "
                 "not worse → rolled out. Failed evaluations count cumulatively; Inconclusive holds for a human; "
                 "“cannot measure” (no data) is not a fail.", className="sw-muted mb-2"),
        html.Div(id=ids.RO_STATUS),
        dcc.Loading([html.Div(id=ids.RO_TRACKS), form, html.H6("Audit log"), html.Div(id=ids.RO_EVENTS)],
                    type="dot", delay_show=300),
    ])


@callback(Output(ids.RO_STATUS, "children"), Output(ids.RO_RETRY, "disabled"), Output(ids.RO_MODEL, "options"),
          Output(ids.RO_TRACKS, "children"), Output(ids.RO_EVENTS, "children"), Output(ids.RO_FORM_SCOPE, "options"),
          Input(ids.RO_MODEL, "value"), Input(ids.REFRESH_INTERVAL, "n_intervals"), Input(ids.RO_RETRY, "n_intervals"),
          Input(ids.RO_FORM_RESULT, "children"))
def update(model, _tick, _retry, _result):
    return c.guarded(lambda: render(get_client(), model), n_outputs=6)


def render(client: ApiClient, model: str | None) -> tuple:
    data = rollout_tracks(client)
    models = sorted({t["model_name"] for t in data["tracks"]})
    tracks = [t for t in data["tracks"] if not model or t["model_name"] == model]
    events = rollout_events(client, model) if model else rollout_events(client)
    scopes = [{"label": f"{t['model_name']} / {t['scope']} ({wording.stage_text(t['stage'])})",
               "value": f"{t['model_name']}|{t['scope']}"} for t in tracks]
    return (None, True, models, tracks_table(tracks, data["threshold"], every=data.get("eval_interval_seconds"),
                                             window=data.get("window_seconds")),
            events_table(events), scopes)


def _when(iso: str | None) -> str:
    return fm.fmt_time(datetime.fromisoformat(iso)) if iso else fm.NO_DATA


def _alpha_vs(values: dict[str, Any], default: float) -> str:
    """The last decision's alpha and the threshold it was compared with (recorded with it)."""
    limit = values.get("threshold")
    return f"{fm.fmt_rate(values.get('alpha'))} vs {fm.fmt(default if limit is None else limit, '.2f')}"


def _instant(iso: str | None) -> datetime | None:
    return datetime.fromisoformat(iso) if iso else None


def stamp(t: dict[str, Any], every: float | None = None) -> str:
    """'over 6 h to 20:15 UTC, evaluated 20:15 UTC (every 15 min)': the window and time of the track's
    last evaluation, the evidence every value in its row rests on."""
    if not t.get("last_eval_at"):
        return "not evaluated yet"
    return wording.stamp(_instant(t.get("window_start")), _instant(t.get("window_end")), _instant(t["last_eval_at"]),
                         now=datetime.now(UTC), every_seconds=every)


def _check(check: str, result: str | None, reason: str | None, explanation: str | None, id: str) -> html.Div:
    """A check's result in words (its recorded reason on hover), and when it could not judge, what went
    wrong and what to do (in text: readable on a phone and by a screen reader, not only on hover)."""
    out: list = [html.Span(wording.check_text(check, result, reason), title=reason or None)]
    if explanation:
        out.append(html.Div(explanation, className="sw-muted small sw-explain", id=id))
    return html.Div(out)  # one child: a phone's stacked cell lays its children out in a row


def tracks_table(tracks: list[dict[str, Any]], threshold: float, *, every: float | None = None,
                 window: float | None = None) -> html.Div:
    if not tracks:
        return c.request_error("no rollout tracks yet: the worker's periodic evaluation creates them")
    head = ["model", "scope", "step", "stage", "since", "gate", "last gate check", "latency check",
            "alpha vs threshold", "drafts", "measured", "reason"]
    rows = []
    for t in tracks:
        v = t.get("last_values") or {}
        key = f"{t['model_name']}-{t['scope']}"
        stage = [html.Span(wording.stage_text(t["stage"]), title=t["stage"])]
        if t["manual"]:
            stage.append(" (set by hand)")
        if t["needs_human"]:
            stage.append(html.Span(" ⚑", title="waiting for a person", **{"aria-label": "waiting for a person"}))
        rows.append(html.Tr([html.Td(t["model_name"]), html.Td(t["scope"]),
                             html.Td(f"{t['step']} · {STEP_NAMES.get(t['step'], '')}"), html.Td(stage),
                             html.Td(_when(t["stage_since"])), html.Td(wording.phase_text(t["gate_phase"])),
                             html.Td(_check("gate", t["gate_result"], t.get("gate_reason"), t.get("gate_explanation"),
                                            f"ro-gate-why-{key}")),
                             html.Td(_check("latency", t["latency_result"], t.get("latency_reason"),
                                            t.get("latency_explanation"), f"ro-latency-why-{key}")),
                             html.Td(_alpha_vs(v, threshold)), html.Td(fm.fmt_count(v.get("drafts"))),
                             html.Td(stamp(t), id=f"ro-stamp-{key}"),
                             html.Td(t["reason"], className="sw-muted")], id=f"ro-row-{key}"))
    how = (f"each evaluation measures the last {wording.span_text(window)}" if window else "each evaluation measures "
           "a trailing window") + (f", every {wording.span_text(every)}" if every else "")
    return html.Div([html.Div("gate: alpha ≥ the scope's alpha_low threshold of the alert rules (per class, as the "
                              f"alerts and the overview; {threshold:.2f} where no rule applies); {how}: a value is as "
                              "of its evaluation, not now; ⚑ = waiting for a person", className="sw-muted"),
                     c.stacked(dbc.Table([html.Thead(html.Tr([html.Th(h) for h in head])), html.Tbody(rows)],
                                         size="sm", hover=True, responsive=True))])


def events_table(events: list[dict[str, Any]]) -> html.Div:
    if not events:
        return html.Div("no stage changes recorded yet", className="sw-muted")
    rows = [html.Tr([html.Td(_when(e["at"])), html.Td(KINDS.get(e["kind"], e["kind"])),
                     html.Td(f"{wording.stage_text(e['from_stage']) if e['from_stage'] else '—'} → "
                             f"{wording.stage_text(e['to_stage'])}"),
                     html.Td(e["actor"]), html.Td(e["reason"]),
                     html.Td(fm.fmt_rate((e.get("values") or {}).get("alpha")))]) for e in events]
    head = ["when", "kind", "change", "who", "why", "alpha then"]
    return c.stacked(dbc.Table([html.Thead(html.Tr([html.Th(h) for h in head])), html.Tbody(rows)], size="sm",
                               responsive=True))


@callback(Output(ids.RO_FORM_RESULT, "children"), Input(ids.RO_FORM_SUBMIT, "n_clicks"),
          State(ids.RO_FORM_SCOPE, "value"), State(ids.RO_FORM_ACTION, "value"), State(ids.RO_FORM_REASON, "value"),
          State(ids.RO_FORM_TOKEN, "value"), prevent_initial_call=True)
def submit(_n, scope, action, reason, token):
    return apply_transition(get_client(), scope, action, reason, token)


def apply_transition(client: ApiClient, scope: str | None, action: str | None, reason: str | None,
                     token: str | None) -> dbc.Alert:
    if not scope or not action or not (reason or "").strip() or not token:
        return dbc.Alert("choose a scope and an action, give a reason and an operator token", color="secondary")
    model, _, sc = scope.partition("|")
    try:
        ev = rollout_transition(client, token=token, model=model, scope=sc, action=action, reason=reason)
    except ApiError as exc:
        return dbc.Alert(f"refused ({exc.status}): {exc.detail}", color="warning")
    except ApiUnavailable as exc:
        return c.error_state(str(exc), retrying=False)
    frm = wording.stage_text(ev["from_stage"]) if ev["from_stage"] else "—"
    return dbc.Alert(f"{model}/{sc}: {frm} → {wording.stage_text(ev['to_stage'])} by {ev['actor']}", color="success")
