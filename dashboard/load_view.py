"""α and τ by concurrency band per class from per-request records (the API's by_concurrency of GET
/requests/acceptance), with the load-stability finding (its load_stability: the same function as the
load_instability alert). Shown on the model page next to the engine's α-vs-concurrency chart."""

from __future__ import annotations

from typing import Any

import dash_bootstrap_components as dbc
from dash import html

from dashboard import components as c
from dashboard import formatting as fm

BASIS = {"record": "record", "pool": "pool band", "record and pool": "record + pool band"}


def _tau(v: float | None) -> str:
    return fm.fmt(v, ".2f")


def finding(k: dict[str, Any]) -> dbc.Alert | None:
    """The finding when acceptance falls or becomes unstable above the boundary band (status breached)."""
    s = k.get("load_stability") or {}
    if not s.get("finding"):
        return None
    what = " and ".join(w for w, on in (("falls", s.get("falls")), ("becomes unstable", s.get("unstable"))) if on)
    return dbc.Alert([html.Strong(f"Finding: {k['traffic_class']} acceptance {what} above "
                                  f"{s['boundary_running_requests']} running requests. "), s.get("text", "")],
                     color="warning", className="py-1", id=f"md-load-finding-{k['traffic_class']}")


def table(classes: list[dict[str, Any]]) -> html.Div | None:
    """One row per class and band; None when no record has a concurrency (no running_requests, no engine
    pool band)."""
    rows = [html.Tr([html.Th(k["traffic_class"], scope="row"), html.Td(b["band"]),
                     html.Td(fm.fmt_count(b["requests"])), html.Td(fm.fmt_count(b["drafts"])),
                     html.Td(fm.fmt_with_interval(b["draft_token_weighted_alpha"], b["draft_token_weighted_alpha_interval"])),
                     html.Td(fm.fmt_with_interval(b["request_weighted_alpha"], b["request_weighted_alpha_interval"])),
                     html.Td(fm.fmt_with_interval(b["mean_acceptance_length"], b["mean_acceptance_length_interval"], _tau)),
                     html.Td(fm.fmt(b["dispersion"], ".2f")), html.Td(BASIS.get(b["basis"], fm.NO_DATA))])
            for k in classes for b in k.get("by_concurrency") or []]
    if not rows:
        return None
    head = ["class", "band (running requests)", "requests", "drafts", "α draft-token-weighted (95 %)",
            "α request-weighted (95 %)", "τ (95 %)", "dispersion", "basis"]
    caption = html.Caption("Per-request α and τ by concurrency band (running requests at finish: the record's "
                           "own, else the engine pool's band of that minute); dispersion: the bucket-to-bucket "
                           "spread of α over the spread sampling alone gives independent tokens (compare bands: "
                           "higher is less stable)")
    return c.stacked(html.Table([caption, html.Thead(html.Tr([html.Th(h, scope="col") for h in head])),
                                 html.Tbody(rows)], className="table table-sm sw-table sw-load-bands",
                                **{"data-field": "by-concurrency"}))


def section(dist: dict[str, Any] | None, mode: str | None = None) -> html.Div:
    """The section's content: findings first, then the table; a line saying why when there is nothing."""
    classes = [k for k in (dist or {}).get("classes", []) if mode in (None, k.get("spec_mode"))]
    shown = table(classes)
    if shown is None:
        return html.Div("no per-request records with a concurrency in this window (records' running_requests, "
                        "or an engine pool's running requests)", className="sw-muted")
    return html.Div([*(f for f in map(finding, classes) if f is not None), shown])
