"""The model page's replica table: per pool and replica, alpha next to the other replicas' pooled alpha,
tau, drafts, P99 TPOT / ITL, last seen and version labels (from GET /models/{model}/replicas)."""

from __future__ import annotations

import re

import dash_bootstrap_components as dbc
from dash import html

from backend.schemas.pools import ReplicasRead
from dashboard import components as c
from dashboard import formatting as fm

OUTLIER_GAP = 0.10  # the example rules' replica-outlier gap: a row this far below the others is marked
MAX_WINDOW_SECONDS = 7 * 86400  # replica rows are kept a week (SPECWATCH_REPLICA_RETENTION_DAYS)
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}


def replica_window(window: str) -> str:
    """The page's window for the replica table: a duration within the replica retention, else 1h / 7d."""
    m = re.fullmatch(r"(\d+)([mhdw])", window or "")
    if not m:
        return "1h"
    seconds = int(m.group(1)) * _UNITS[m.group(2)]
    return window if 0 < seconds <= MAX_WINDOW_SECONDS else "7d"  # the API rounds up to whole replica buckets


def _label_text(labels: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or fm.NO_DATA


COLUMNS = ("class · mode", "replica", "α (A/D)", "α others (pooled)", "τ", "drafts", "P99 TPOT", "P99 ITL",
           "last seen", "labels")


def replica_name(instance: str, engine: str) -> str:
    """How a replica is named on the page and in the `replica` alert label: instance, /engine when set."""
    return f"{instance}/{engine}" if engine else instance


def _cells(pairs: list[tuple[str, object, dict]]) -> list:
    """A row from (label, value, attributes) pairs, in the header's order: each cell carries its own label
    (data-label, shown beside the value when the row stacks into a card on a phone), so a label never
    depends on the order of the cells; the replica's name is the row header."""
    by_label = {label: (value, attrs) for label, value, attrs in pairs}
    return [(html.Th if label == "replica" else html.Td)(by_label[label][0],
                                                         **{"data-label": label, **by_label[label][1]})
            for label in COLUMNS]


def table(data: ReplicasRead) -> html.Div:
    """One table for the model's pools with replicas; a note when none reported any."""
    pools = [p for p in data.pools if p.replicas]
    title = html.H5("Replicas", className="mt-3 mb-1", id="md-replicas-title")
    if not pools:
        return html.Div([title, html.P("No replica data in this window (replica rows are "
                                       f"{data.bucket_seconds // 60}-minute buckets).", className="sw-muted")])
    head = html.Thead(html.Tr([html.Th(h, scope="col") for h in COLUMNS]))
    rows = []
    for p in pools:
        for r in p.replicas:
            name = replica_name(r.instance, r.engine)
            low = (r.acceptance_rate is not None and r.others_acceptance_rate is not None
                   and r.others_acceptance_rate - r.acceptance_rate > OUTLIER_GAP)
            alpha = fm.fmt_rate(r.acceptance_rate)
            rows.append(html.Tr(_cells([
                ("class · mode", f"{p.traffic_class} · {p.spec_mode}", {}),
                ("replica", name, {"scope": "row", "className": "sw-wrap"}),
                ("α (A/D)", html.Span([alpha, html.Strong(" ▼ below the others") if low else None]),
                 {"id": f"md-rep-{name}-alpha", "className": fm.tone(fm.OKABE_ITO["vermillion"]) if low else None}),
                ("α others (pooled)", fm.fmt_rate(r.others_acceptance_rate), {"id": f"md-rep-{name}-others"}),
                ("τ", fm.fmt_tau(r.mean_acceptance_length), {"id": f"md-rep-{name}-tau"}),
                ("drafts", fm.fmt_count(r.drafts), {"id": f"md-rep-{name}-drafts"}),
                ("P99 TPOT", fm.fmt_ms(r.tpot_p99), {"id": f"md-rep-{name}-tpot"}),
                ("P99 ITL", fm.fmt_ms(r.itl_p99), {"id": f"md-rep-{name}-itl"}),
                ("last seen", f"{r.last_seen:%Y-%m-%d %H:%M} UTC", {"id": f"md-rep-{name}-last_seen"}),
                ("labels", _label_text(r.labels), {"className": "sw-wrap", "id": f"md-rep-{name}-labels"}),
            ])))
    window = f"{data.window_start:%H:%M}–{data.window_end:%H:%M} UTC" if data.window_start and data.window_end else ""
    caption = html.Caption(f"α per replica over {int(data.window_seconds) // 60} min ({window}), "
                           "summed counters; ▼ marks a replica more than 0.10 below its pool's other replicas.")
    return html.Div([title, c.stacked(dbc.Table([caption, head, html.Tbody(rows)], size="sm", bordered=False,
                                                hover=True, responsive=True, className="mb-2 sw-replica-table",
                                                id="md-replica-table"))])
