"""α by context length on the model page and the weekly report page: per class (x spec mode) of a model's
per-request records, per context-length band, the pooled and the request-weighted α with their 95 %
intervals, requests and drafts (the API's `by_context_length`, worded by backend.domain.context_view as
every surface words it), a small chart of both α against prompt length, and on the model page the state
of the `context_drift` alert of each class: the alert's own stored evaluation (the long-vs-short
comparison of backend.domain.context_drift), so the page never says otherwise than the alert.

A model with no records, or records without prompt_tokens, gets a sentence saying so, never a blank."""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
import plotly.graph_objects as go
from dash import html

from backend.domain import context_view as cv
from dashboard import components as c
from dashboard import figures
from dashboard import formatting as fm

MD_CONTEXT = "md-context"  # the model page's section (its own callback)
ACTIVE = ("pending", "firing")


def has_bands(sections: list[dict[str, Any]]) -> bool:
    return any(x["bands"] for x in sections)


def sections_of(classes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The API's /requests/acceptance classes as the report's sections: scope, spec mode, bands."""
    return [{"scope": k["traffic_class"], "spec_mode": k["spec_mode"], "bands": k.get("by_context_length") or []}
            for k in classes]


def table(sections: list[dict[str, Any]], id: str) -> html.Div:
    """The bands of every section (a row each, the class as the row header), then a sentence per class whose
    records carry no prompt_tokens."""
    rows = []
    for x in sections:
        for b in x["bands"]:
            cells = cv.band_row(x["scope"], x["spec_mode"], b, none=fm.NO_DATA)
            rows.append(html.Tr([html.Th(cells[0], scope="row"), *(html.Td(v) for v in cells[1:])],
                                **{"data-band": str(b["prompt_tokens_from"]), "data-class": x["scope"]}))
    missing = [html.Li(f"{x['scope']} ({x['spec_mode']}): {cv.NO_PROMPT_TOKENS}") for x in sections if not x["bands"]]
    parts: list = []
    if rows:
        parts.append(c.stacked(html.Table(
            [html.Caption(cv.NOTE), html.Thead(html.Tr([html.Th(h, scope="col") for h in cv.HEAD])),
             html.Tbody(rows)], className="table table-sm sw-table", id=id)))
    if missing:
        parts.append(html.Ul(missing, className="sw-muted", **{"data-field": "no-prompt-tokens"}))
    return html.Div(parts)


def _mid(b: dict[str, Any]) -> float:
    """Where a band sits on the log axis: its geometric middle (the open last band: twice its start)."""
    lo, hi = max(b["prompt_tokens_from"], 1), b["prompt_tokens_to"]
    return (lo * (hi + 1)) ** 0.5 if hi is not None else 2.0 * lo


def figure(sections: list[dict[str, Any]], theme: str) -> go.Figure:
    """Both α per band against prompt length (log axis), with their 95 % intervals as error bars: pooled
    solid, request-weighted dotted, a colour per class."""
    fig = figures._base(theme, height=300, hovermode="closest",
                        xaxis={"title": "prompt tokens (band middle)", "type": "log"},
                        yaxis={"title": "α", "range": [0, 1]})
    for i, x in enumerate(s for s in sections if s["bands"]):
        colour = fm.SERIES_COLOURS[i % len(fm.SERIES_COLOURS)]
        xs = [_mid(b) for b in x["bands"]]
        labels = [cv.band_text(b) for b in x["bands"]]
        for key, name, dash in (("draft_token_weighted_alpha", "pooled", "solid"),
                                ("request_weighted_alpha", "request-weighted", "dot")):
            ys = [b[key] for b in x["bands"]]
            iv = [b[f"{key}_interval"] or [None, None] for b in x["bands"]]
            plus = [(h - y) if h is not None and y is not None else None for y, (_, h) in zip(ys, iv, strict=True)]
            minus = [(y - lo) if lo is not None and y is not None else None for y, (lo, _) in zip(ys, iv, strict=True)]
            fig.add_scatter(x=xs, y=ys, mode="lines+markers", name=f"{x['scope']} {name}", customdata=labels,
                            line={"color": colour, "dash": dash},
                            error_y={"type": "data", "array": plus, "arrayminus": minus, "visible": True,
                                     "thickness": 1},
                            hovertemplate=f"{x['scope']} {name} α %{{y:.3f}}<br>prompt tokens %{{customdata}}"
                                          "<extra></extra>")
    return fig


def _window(w: Any) -> str:
    """The alert's window as it stores it ('1h'), or seconds written as a duration."""
    return fm.fmt_duration(float(w)) if isinstance(w, (int, float)) else str(w or fm.NO_DATA)


def drift_state(alerts: list, model: str) -> list:
    """A line per class whose `context_drift` alert is pending or firing: the alert's own last evaluation
    (α long vs α short, the difference and its 95 % interval, over the rule's window), never recomputed."""
    out = []
    for a in alerts:
        if a.kind != "context_drift" or a.labels.get("model") != model or a.phase not in ACTIVE:
            continue
        v = a.last_values or {}
        diff, iv = v.get("difference"), v.get("difference_interval") or [None, None]
        bound = v.get("boundary_prompt_tokens")
        text = (f"long-context α {fm.fmt_rate(v.get('alpha_long'))} (prompts of "
                f"{fm.fmt_count(bound)}+ tokens) vs {fm.fmt_rate(v.get('alpha_short'))} below: difference "
                f"{fm.fmt_rate(diff)}, 95 % interval {fm.fmt_rate(iv[0])} to {fm.fmt_rate(iv[1])}, margin "
                f"{fm.fmt(v.get('margin'), 'g')}, over the last {_window(v.get('window'))}")
        since = a.firing_since if a.phase == "firing" else a.pending_since
        when = f" since {fm.fmt_time(since)}" if since is not None else ""
        cls = a.labels.get("traffic_class", "")
        line = dbc.Alert([html.Strong(f"context_drift {a.phase}{when} · {cls} {a.labels.get('spec_mode', '')}: "),
                          text], color="warning" if a.phase == "firing" else "light", className="py-1")
        out.append(html.Div(line, **{"data-field": "context-drift", "data-class": cls}))
    return out


def model_section(*, has_records: bool, classes: list[dict[str, Any]] | None, alerts: list | None, model: str,
                  window_label: str, theme: str) -> list:
    """The model page's section body: the alert lines, then the table and the chart, or the sentence why
    there is nothing to show."""
    if not has_records:
        return [html.P(cv.NO_RECORDS, className="sw-muted", **{"data-field": "context-empty"})]
    head = drift_state(alerts, model) if alerts is not None else [
        html.P("context_drift alert state unavailable (the alerts could not be read)", className="sw-muted")]
    if not classes:
        return [*head, html.P(f"no per-request records of {model} finished in {window_label}", className="sw-muted",
                              **{"data-field": "context-empty"})]
    sections = sections_of(classes)
    body = [*head, table(sections, "md-context-table")]
    if has_bands(sections):
        body.append(figures.chart("md-context-chart", f"{cv.SECTION}: pooled (solid) and request-weighted (dotted), "
                                                "95 % intervals", figure=figure(sections, theme)))
    return body
