"""The K advisor on the model page: per spec mode, a table per traffic class and for the mix (K', tokens per
step tau, step overhead eps(K'), speedup S, extrapolated rows marked, the best K in bold and named in words),
from GET /api/v1/k-advice (docs/k-advisor.md). Each class has its own eps(K) from its own eps_step; the mix
pools the classes' steps and step time."""

from __future__ import annotations

import re

import dash_bootstrap_components as dbc
from dash import html

from backend.schemas.calc import KAdviceModeRead, KAdviceRead, KAdviceSetRead
from dashboard import formatting as fm


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
        rows.append(html.Tr([html.Td(str(r.k)), html.Td(fm.fmt_tau(r.tau)), html.Td(fm.fmt(r.eps, ".3f")),
                             html.Td(fm.fmt_speedup(r.speedup), id=f"{tid}-{r.k}-speedup"),
                             html.Td([x for n in notes for x in (html.Span(n), html.Br())][:-1])],
                            className="fw-bold table-active sw-k-best" if best else None))
    fit = ""
    own = a.overhead  # each class its own eps(K); the mix has none (it pools the classes' step time)
    if a.fit is not None:
        decay = a.fit.decay_per_position
        fit = f"fit: {a.fit.method}" + ("" if decay is None else f", p_j+1/p_j = {decay:.3f}")
    return html.Div([
        html.Table([html.Caption(f"{a.name} · measured K = {a.current_k}"), head, html.Tbody(rows)],
                   className="table table-sm sw-table sw-k-table mb-1 small", id=tid),
        html.Div(_gain(a), className="small", id=f"{tid}-best"),
        html.Div(fit, className="small sw-muted") if fit else None,
        html.Div(f"ε(K) = {own.eps0:.3f} + K × {own.eps_tok:.4f} ({own.source}"
                 + (f"; {own.note}" if own.note else "") + f") · at K = {a.current_k}: "
                 f"{fm.fmt_eps_step(a.eps_step, a.eps_step_source, mode.concurrency_band)}",
                 className="small sw-muted", id=f"{tid}-overhead") if own else
        html.Div(f"ε at K = {a.current_k}: {fm.fmt(a.eps_step, '.3f')}, the classes' step time pooled "
                 "(tokens / τ_c steps, each 1 + ε_c)", className="small sw-muted", id=f"{tid}-overhead"),
    ], className="mb-3")


def mode_block(mode: KAdviceModeRead) -> html.Div:
    lines = [html.H6(f"{mode.spec_mode} · drafter {mode.drafter or '—'}", className="sw-chart-title")]
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
                            "S = τ / (1 + ε(K′)), each class with its own step overhead ε(K′) = ε₀ + K′·ε_tok "
                            "calibrated from its ε_step. The best K per table is in bold and marked \u201cbest\u201d.",
                            className="small"),
                     *[mode_block(m) for m in advice.modes]])
