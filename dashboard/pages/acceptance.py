"""Per-domain acceptance: acceptance rate over time per traffic class of one model and the pooled mix, with
the alpha threshold, the break-even line and restart / version-change markers. A model that runs several spec
modes shows one at a time (the spec-mode picker; by default the mode with the most drafts)."""

from __future__ import annotations

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, State, callback, ctx, dcc, html

from backend.schemas.fleet import FleetRowRead
from backend.schemas.pools import PoolsRead
from backend.schemas.summary import MIXED, SummaryRead
from dashboard import components as c
from dashboard import figures, ids, in_place, state
from dashboard import formatting as fm
from dashboard.api_client import ApiClient, get_client, parallel

dash.register_page(__name__, path="/acceptance", name="Per-domain acceptance", order=1,
                   title="specwatch · acceptance")

FIELDS = (("acceptance_rate", "acceptance rate r", fm.fmt_rate, "A/D over the window; depends on K"),
          ("num_spec_tokens", "K", lambda v: fm.fmt(v, "d"), "num_speculative_tokens"),
          ("mean_acceptance_length", "τ", fm.fmt_tau, "1 + A/N: tokens per verify step"),
          ("break_even_alpha", "break-even α", fm.fmt_rate,
           "ε_step/K; ε_step: mean ITL spec/baseline − 1 in the same band, else the band default"),
          ("margin", "margin", lambda v: fm.fmt(v, "+.3f"), "seed alpha − ε_step/K"),
          ("estimated_speedup", "est. speedup", fm.fmt_speedup, "τ/(1+ε_step), from step times"))
VERDICT_FIELDS = (("p99_itl", "P99 ITL", "P99 inter-token latency per engine step, spec vs baseline (as the overview)"),
                  ("p99_tpot", "P99 TPOT", "P99 time per output token, spec vs baseline (as the overview)"))


def layout(**kwargs: str) -> html.Div:
    view = state.from_params(kwargs)
    return html.Div([
        *c.page_head("Per-domain acceptance",
                     c.select(ids.AC_MODEL, "model", [view.model] if view.model else [], view.model),
                     c.select(ids.AC_MODE, "spec mode", [view.mode] if view.mode else [], view.mode, width="11rem"),
                     query=(ids.AC_QUERY, state.as_dict(view)), retry=ids.AC_RETRY),
        html.Div(id=ids.AC_STATUS),
        dcc.Loading([html.Div(id=ids.AC_KPIS),
                     figures.chart(ids.AC_CHART, "Draft acceptance rate r = A/D per traffic class"),
                     figures.chart(ids.AC_TAU_CHART, "Mean acceptance length τ = 1 + A/N (tokens per verify step)")],
                    type="dot", delay_show=300),
    ])


@callback(Output(ids.AC_STATUS, "children"), Output(ids.AC_RETRY, "disabled"), Output(ids.AC_MODEL, "options"),
          Output(ids.AC_MODEL, "value"), Output(ids.AC_KPIS, "children"), Output(ids.AC_CHART, "figure"),
          Output(ids.AC_TAU_CHART, "figure"), Output(ids.AC_MODE, "options"), Output(ids.AC_MODE, "value"),
          Input(ids.AC_QUERY, "data"), Input(ids.REFRESH_INTERVAL, "n_intervals"), Input(ids.AC_RETRY, "n_intervals"),
          Input(ids.THEME_STORE, "data"))
def update(query, _tick, _retry, theme):
    theme, view = theme or "light", state.from_params(query or {})
    return c.guarded(lambda: render(get_client(), view, theme), n_outputs=9,
                     blank=lambda why: {**c.models_anyway(get_client(), view.model), 5: figures.empty(why, theme),
                                        6: figures.empty("", theme)})


in_place.follow_url(ids.AC_QUERY, "/acceptance")  # a window change keeps this page and its charts


@callback(Output(ids.URL, "search", allow_duplicate=True), Input(ids.AC_MODEL, "value"), Input(ids.AC_MODE, "value"),
          State(ids.AC_MODE, "options"), State(ids.URL, "search"), prevent_initial_call=True)
def choose_model(model, mode, modes, search):
    return c.search_with_mode(search, model, mode, model_changed=ids.AC_MODEL in ctx.triggered_prop_ids.values(),
                              mode_changed=ids.AC_MODE in ctx.triggered_prop_ids.values(), options=modes)


def render(client: ApiClient, view: state.View, theme: str) -> tuple:
    pools = client.pools()
    models = c.spec_models(pools)
    model = c.pick(models, view.model)
    if model is None:
        return (c.empty_state("any model", None), True, models, None, None,
                figures.empty("no speculative pools reported yet", theme), figures.empty("", theme), [], None)
    full, fleet = parallel([lambda: client.summary(model, view),
                            lambda: client.fleet(view, model=model, limit=1000)])  # this model's rows only
    modes = c.spec_modes(full)
    mode = c.pick(modes, view.mode)
    summary = c.for_mode(full, mode)  # one mode's classes and its mix: one line per class name
    classes = [k.traffic_class for k in summary.classes]
    calls = [lambda cls=cls: client.acceptance(model, view, traffic_class=cls, spec_mode=mode) for cls in classes]
    *series, notes = parallel([*calls, lambda: client.annotations(model, view)])
    rows = {(r.traffic_class, r.spec_mode): r for r in fleet.rows if r.model_name == model}
    status = [c.updated(summary.generated_at, view.label()), _provenance(pools, model, mode), c.mode_note(modes, mode)]
    label = f"{model} · {mode}" if len(modes) > 1 else model
    if figures.last_time(series) is None:
        last = max((p.last_seen for p in pools.pools if p.model_name == model and p.spec_mode == mode), default=None)
        status.append(c.empty_state(f"{label} ({', '.join(classes)})" if classes else label, last,
                                    window_label=view.label()))
        why = f"no acceptance data for {label} in this window ({view.label()}): pick a longer window above"
        chart, tau = figures.empty(why, theme), figures.empty(why, theme)
    else:
        limits = {cls: r.alpha_threshold for (cls, m), r in rows.items() if m == mode and r.alpha_threshold is not None}
        chart = figures.acceptance_over_time(series, threshold=summary.alpha_threshold,
                                             break_even=break_even(summary), annotations=notes, theme=theme,
                                             thresholds=limits)
        tau = figures.tau_over_time(series, theme)
    return (html.Div(status), True, models, model, class_table(summary, rows), chart, tau, modes, mode)


def break_even(summary: SummaryRead) -> list[tuple[str, float | None, str | None]]:
    """Every class's break-even line, and the mix's when it has one (one K)."""
    return [(k.traffic_class, k.break_even_alpha, fm.fmt_eps_step(k.eps_step, k.eps_step_source, k.concurrency_band))
            for k in summary.classes
            if k.break_even_alpha is not None]


def _provenance(pools: PoolsRead, model: str, mode: str | None = None) -> html.Div:
    spec = [p for p in pools.pools if p.model_name == model and not p.is_baseline
            and (mode is None or p.spec_mode == mode)]
    drafters = sorted({p.drafter for p in spec if p.drafter})
    versions = sorted({p.vllm_version for p in spec if p.vllm_version})
    text = f"drafter: {', '.join(drafters) or '—'} · vLLM {', '.join(versions) or '—'}"
    return html.Div(text, className="sw-muted mb-1", style={"fontSize": "0.8rem"})


def class_table(summary: SummaryRead, rows: dict[tuple[str, str], FleetRowRead] | None = None) -> dbc.Table:
    """One row per class (and the pooled mix) with the window's numbers, each cell id'd for tests, and the
    overview's state (icon + text + tone, the row's edge in the state's colour: a pending or firing alert
    with its rule and value vs threshold, or the class's own threshold) and P99 latency verdicts from the
    fleet rows, and an alpha alert's short-window rate under the window's. On a phone the rows stack into cards (components.stacked): nothing scrolls sideways."""
    head = html.Thead(html.Tr([html.Th("class"), html.Th("state")] + [
        html.Th(html.Span(label, title=tip, className="sw-help")) for _, label, _, tip in FIELDS] + [
        html.Th(html.Span(label, title=tip, className="sw-help")) for _, label, tip in VERDICT_FIELDS]))
    body = []
    for k in summary.classes:
        fr = (rows or {}).get((k.traffic_class, k.spec_mode))
        st = fr.state if fr else None
        _, _, colour = fm.STATES.get(st or "", ("", "", fm.OKABE_ITO["grey"]))
        name = html.Strong(k.traffic_class) if k.traffic_class == MIXED else k.traffic_class
        if k.source == "records":  # a class the engine does not label: its counts come from per-request records
            name = [name, html.Span(" · from per-request records", className="sw-muted small")]
        cells = [html.Td(name, id=f"ac-{k.traffic_class}-class"),
                 html.Td(c.row_state_badge(fr) if fr else c.value(fm.NO_DATA), id=f"ac-{k.traffic_class}-state")]
        alert_alpha, alert_window = c.row_alert_alpha(fr) if fr else (None, None)
        for field, _, fmt, _ in FIELDS:
            shown = c.value(fmt(getattr(k, field)), id=f"ac-{k.traffic_class}-{field}")
            if field == "acceptance_rate" and alert_alpha is not None:
                shown = html.Span([shown, html.Span(f" · {fm.fmt_window(alert_window)} {fm.fmt_rate(alert_alpha)}",
                                                    id=f"ac-{k.traffic_class}-alert-alpha", className="sw-muted",
                                                    title="the alert's short-window acceptance rate now")])
            cells.append(html.Td(shown))
        for field, _, _ in VERDICT_FIELDS:
            verdict = getattr(fr, f"{field}_verdict") if fr else None
            badge = c.verdict_badge(verdict, getattr(fr, f"{field}_reason")) if verdict else c.value(fm.NO_DATA)
            cells.append(html.Td(badge, id=f"ac-{k.traffic_class}-{field}"))
        body.append(html.Tr(cells, className=f"sw-state-row {fm.tone(colour)}-edge"))
    return c.stacked(dbc.Table([head, html.Tbody(body)], size="sm", bordered=False, hover=True, responsive=True,
                               className="mb-2 sw-class-table"))
