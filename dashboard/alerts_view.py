"""Alerts rendered for the Alerts page and the overview banner: phase badges (icon + text + an Okabe-Ito
colour, never colour alone), the alert / history / silence tables, and who may act.

Ids of the alerts page and of the overview banner live here (not in the shared ids.py).
"""

from __future__ import annotations

from urllib.parse import urlencode

import dash_bootstrap_components as dbc
from dash import dcc, html

from dashboard import components as c
from dashboard import formatting as fm
from dashboard.alerts_client import Alert, Silence, Transition
from dashboard.auth import User

AL_STATUS, AL_RETRY, AL_KPIS, AL_DATA = "al-status", "al-retry", "al-kpis", "al-data"
AL_FIRING, AL_PENDING, AL_SILENCED, AL_HISTORY, AL_SILENCES = ("al-firing", "al-pending", "al-silenced",
                                                               "al-history", "al-silences")
AL_MODEL, AL_CLASS, AL_RULE = "al-form-model", "al-form-class", "al-form-rule"
AL_DURATION, AL_REASON, AL_SUBMIT = "al-form-duration", "al-form-reason", "al-form-submit"
AL_WHY, AL_RESULT, AL_ACK_RESULT = "al-form-why", "al-form-result", "al-ack-result"
AL_DONE_SILENCE, AL_DONE_ACK = "al-done-silence", "al-done-ack"
AL_RECEIVER = "al-receiver"  # link to the Slack-compatible receiver's page (demo)
AL_ACK, AL_PREFILL = "al-ack", "al-prefill"  # pattern-matching button types ({"type": ..., "index": alert id})
OV_ALERTS = "ov-alerts"

PHASES = {  # phase -> (icon, text, colour)
    "firing": ("▲", "firing", fm.OKABE_ITO["vermillion"]),
    "pending": ("◎", "pending", fm.OKABE_ITO["orange"]),  # as a fleet row says it (◷ is a stale row's)
    "silenced": ("⊘", "silenced", fm.OKABE_ITO["purple"]),
    "resolved": ("✔", "resolved", fm.OKABE_ITO["green"]),
    "inactive": ("·", "inactive", fm.OKABE_ITO["grey"]),
}
NEEDS_TOKEN = "alerts need a token (log in)"
BANNER_MAX = 8  # firing alerts listed on the overview


def badge(phase: str) -> html.Span:
    return c.badge(*PHASES.get(phase, ("?", phase, fm.OKABE_ITO["grey"])))


def shown_phase(a: Alert) -> str:
    return "silenced" if a.silenced_by is not None and a.phase in ("pending", "firing") else a.phase


UNITS = {"margin_negative": "×"}  # rule kind -> unit of its value and threshold (margin_negative: speedup)


def number(v: float | None, kind: str | None = None) -> str:
    return fm.fmt(v, ".3f" if v is None or abs(v) < 100 else ",.0f", UNITS.get(kind or "", ""))


def pool_link(labels: dict[str, str], query: dict | None = None) -> html.Span | dcc.Link:
    model, cls = labels.get("model"), labels.get("traffic_class")
    if not model:
        return html.Span(labels.get("channel", fm.NO_DATA))
    keep = {k: v for k, v in (query or {}).items() if v and k in ("window", "start", "end")}
    mode = labels.get("spec_mode")  # the alert's own spec mode, for a model that runs several
    params = {**keep, "model": model, **({"cls": cls} if cls else {}),
              **({"mode": mode} if mode and mode != "all" else {})}
    return dcc.Link(f"{model} · {cls}" if cls else model, href=f"/model?{urlencode(params)}")


def permission(user: User | None, mode: str) -> tuple[bool, str]:
    """(may silence and acknowledge, the reason shown next to the form)."""
    if user is None:
        if mode == "none":
            return False, "silencing and acknowledging need a login: the dashboard runs without auth (--auth token)"
        return False, "log in with an operator token to silence or acknowledge"
    if not user.can("operator"):
        return False, f"operators only: you are {user.name} ({user.role})"
    return True, f"as {user.name} ({user.role})"


def _table(head: list[str], rows: list[list], empty: str, table_id: str) -> html.Div:
    if not rows:
        return html.Div(f"∅ {empty}", className="sw-muted sw-al-empty", id=f"{table_id}-empty")
    return html.Div(c.stacked(html.Table([html.Thead(html.Tr([html.Th(h) for h in head])),
                                          html.Tbody([html.Tr([html.Td(x) for x in r]) for r in rows])],
                                         className="table table-hover sw-al-table", id=f"{table_id}-table")),
                    className="table-responsive")


def alert_table(alerts: list[Alert], table_id: str, empty: str, allowed: bool, why: str, query: dict) -> html.Div:
    head = ["state", "model · class", "rule", "value", "threshold", "window", "since", "incident", "ack", ""]
    rows = []
    for a in alerts:
        ack = f"{a.acked_by} {fm.fmt_time(a.acked_at)}" if a.acked_by else fm.NO_DATA
        actions = html.Span([
            dbc.Button("silence…", id={"type": AL_PREFILL, "index": a.id}, size="sm", color="secondary",
                       outline=True, disabled=not allowed, title=why if not allowed else "fill the silence form"),
            dbc.Button("ack", id={"type": AL_ACK, "index": a.id}, size="sm", color="secondary", outline=True,
                       disabled=not allowed or bool(a.acked_by), title=why if not allowed else "acknowledge"),
        ], className="d-flex gap-1")
        rows.append([badge(shown_phase(a)), pool_link(a.labels, query), html.Span(a.rule, title=a.kind),
                     c.value(number(a.last_value, a.kind)), c.value(number(a.threshold, a.kind)), a.window or fm.NO_DATA,
                     fm.fmt_time(a.since), f"#{a.incident_id}" if a.incident_id else fm.NO_DATA, ack, actions])
    return _table(head, rows, empty, table_id)


def history_table(items: list[Transition], query: dict) -> html.Div:
    head = ["at", "model · class", "rule", "transition", "status", "value", "threshold", "window", "reason",
            "notice"]
    rows = [[fm.fmt_time(t.at), pool_link(t.labels, query), t.rule,
             html.Span([badge(t.from_phase), " → ", badge(t.to_phase)], className="text-nowrap"), t.status,
             c.value(number(t.value)), c.value(number(t.threshold)), (t.values or {}).get("window") or fm.NO_DATA,
             html.Span(t.reason, className="sw-al-reason"),
             t.notification or ("silenced" if t.silence_id else fm.NO_DATA)] for t in items]
    return _table(head, rows, "no transitions recorded yet", "al-history")


def silences_table(items: list[Silence]) -> html.Div:
    head = ["#", "matchers", "from", "until", "by", "reason", "state"]
    rows = [[f"#{s.id}", ", ".join(f"{k}={v}" for k, v in s.matchers.items()), fm.fmt_time(s.starts_at),
             fm.fmt_time(s.ends_at), s.created_by, s.reason,
             "active" if s.active else (f"expired by {s.expired_by}" if s.expired_by else "ended")] for s in items]
    return _table(head, rows, "no silences", "al-silences")


def firing_banner(alerts: list[Alert], query: dict) -> html.Div:
    """Firing alerts at the top of the overview: each links to its pool's page; the whole to /alerts."""
    firing = [a for a in alerts if a.phase == "firing" and a.silenced_by is None]
    silenced = sum(1 for a in alerts if a.phase == "firing" and a.silenced_by is not None)
    more = f" (+{silenced} silenced)" if silenced else ""
    if not firing:
        return html.Div([html.Span("✔ no firing alerts" + more + " · "), dcc.Link("alerts", href="/alerts")],
                        className="sw-muted sw-al-banner-quiet")
    items = [html.Li([badge("firing"), " ", pool_link(a.labels, query),
                      (f" · {a.rule}: {number(a.last_value, a.kind)} vs {number(a.threshold, a.kind)}"
                       f" ({a.window or 'window n/a'}) since {fm.fmt_time(a.since)}")])
             for a in firing[:BANNER_MAX]]
    if len(firing) > BANNER_MAX:
        items.append(html.Li(dcc.Link(f"and {len(firing) - BANNER_MAX} more…", href="/alerts")))
    head = f"{len(firing)} firing alert{'s' if len(firing) != 1 else ''}{more}"
    return dbc.Alert([html.Div([html.Strong(["▲ ", head]), " · ", dcc.Link("all alerts →", href="/alerts")]),
                      html.Ul(items, className="mb-0 sw-al-list")], color="danger", className="sw-al-banner")
