"""The K advisor on the model page: per spec mode, a table per traffic class and for the mix (K', tokens per
step tau, overhead eps(K'), speedup S, extrapolated rows marked, the best K in bold and named in words), from
GET /api/v1/k-advice (docs/k-advisor.md)."""

from __future__ import annotations

import re

import dash_bootstrap_components as dbc
from dash import html

from backend.schemas import KAdviceModeRead, KAdviceRead, KAdviceSetRead
from dashboard import components as c


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text)


def _gain(a: KAdviceRead) -> str:
    if a.best_k is None:
        return "best K: undefined (no tokens-per-step curve)"
    words = f"best K = {a.best_k}"
    if a.best_k == a.current_k:
        words += " (the current K)"
    elif a.gain is not None:
        words += f" ({a.gain * 100:+.1f} % speedup vs K = {a.current_k})"
    return words + (", extrapolated" if a.best_is_extrapolated else "")


def table(mode: KAdviceModeRead, a: KAdviceRead) -> html.Div:
    tid = f"md-k-{slug(mode.spec_mode)}-{slug(a.name)}"
    head = html.Thead(html.Tr([html.Th("K′", scope="col"), html.Th("τ tokens / step", scope="col"),
                               html.Th("ε(K′)", scope="col"), html.Th("speedup S", scope="col"),
                               html.Th("note", scope="col")]))
    rows = []
    for r in a.rows:
        best = r.k == a.best_k
        notes = [n for n, on in (("best", best), ("extrapolated", r.extrapolated), ("current", r.k == a.current_k))
                 if on]
        rows.append(html.Tr([html.Td(str(r.k)), html.Td(c.fmt_tau(r.tau)), html.Td(c.fmt(r.eps, ".3f")),
                             html.Td(c.fmt_speedup(r.speedup), id=f"{tid}-{r.k}-speedup"),
                             html.Td([x for n in notes for x in (html.Span(n), html.Br())][:-1])],
                            className="fw-bold table-active sw-k-best" if best else None))
    fit = ""
    own = a.overhead if mode.overhead is None else None  # classes at different K: each has its own eps(K)
    if a.fit is not None:
        decay = a.fit.decay_per_position
        fit = f"fit: {a.fit.method}" + ("" if decay is None else f", p_j+1/p_j = {decay:.3f}")
    return html.Div([
        html.Table([html.Caption(f"{a.name} · measured K = {a.current_k}"), head, html.Tbody(rows)],
                   className="table table-sm sw-table sw-k-table mb-1 small", id=tid),
        html.Div(_gain(a), className="small", id=f"{tid}-best"),
        html.Div(fit, className="small sw-muted") if fit else None,
        html.Div(f"ε(K) = {own.eps0:.3f} + K × {own.eps_tok:.4f} ({own.source}; ε at K = {a.current_k}: "
                 f"{c.fmt(a.eps, '.3f')}, {a.eps_source or 'unknown'})", className="small sw-muted",
                 id=f"{tid}-overhead") if own else None,
    ], className="mb-3")


def mode_block(mode: KAdviceModeRead) -> html.Div:
    ov = mode.overhead
    src = f"ε at K = {c.fmt(mode.k, 'd')}: {c.fmt(mode.eps, '.3f')} ({mode.eps_source or 'unknown'})"
    lines = [html.H6(f"{mode.spec_mode} · drafter {mode.drafter or '—'}", className="sw-chart-title")]
    if ov is not None:
        lines.append(html.Div(f"ε(K) = {ov.eps0:.3f} + K × {ov.eps_tok:.4f} ({ov.source}) · {src}"
                              + (f" · {ov.note}" if ov.note else ""), className="small mb-2",
                              id=f"md-k-{slug(mode.spec_mode)}-overhead"))
    tables = [*mode.classes, *([mode.mix] if mode.mix else [])]
    lines.append(dbc.Row([dbc.Col(table(mode, a), xs=12, md=6, xl=4) for a in tables], className="g-3"))
    for cls, why in mode.unavailable.items():
        lines.append(html.Div(f"{cls}: {why}", className="small sw-muted"))
    if mode.incomplete and mode.mix is not None:
        lines.append(html.Div("mix leaves out the classes above", className="small sw-muted"))
    return html.Div(lines, className="mb-2")


def section(advice: KAdviceSetRead | None) -> html.Div:
    if advice is None or not advice.modes:
        return html.Div("no speculative pools with a known K in this window", className="sw-muted")
    return html.Div([html.P("Rows above the measured K are extrapolated from a fitted decay of p_j; "
                            "S = τ / (1 + ε(K′)). The best K per table is in bold and marked \u201cbest\u201d.",
                            className="small"),
                     *[mode_block(m) for m in advice.modes]])
