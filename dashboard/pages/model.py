"""Model drill-down: per-position acceptance (drift), acceptance vs concurrency, latency quantiles spec vs
baseline over time (ITL per engine step, TPOT per token), measured vs estimated speedup. A model that runs
several spec modes shows one at a time (the spec-mode picker; by default the mode with the most drafts)."""

from __future__ import annotations

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, State, callback, ctx, dcc, html

from backend.domain import money
from backend.domain.engines import wording
from backend.schemas import MIXED, ClassSummaryRead, SummaryRead
from dashboard import (
    alerts_client,
    context_view,
    figures,
    ids,
    in_place,
    k_advice_view,
    load_view,
    replica_table,
    state,
)
from dashboard import components as c
from dashboard.api_client import ApiClient, ApiError, get_client, request_acceptance, summary_slices

dash.register_page(__name__, path="/model", name="Model drill-down", order=2, title="specwatch · model")

SLICES = 12
MD_LOAD = "md-load"
MD_ENGINES = "md-engines"  # the model's pools: engine, and each figure exact, estimated or not exposed


def layout(**kwargs: str) -> html.Div:
    view = state.from_params(kwargs)
    return html.Div([
        dcc.Store(id=ids.MD_QUERY, data=state.as_dict(view)),
        dcc.Interval(id=ids.MD_RETRY, interval=5000, disabled=True),
        html.Div([html.H4("Model drill-down", className="mb-0 me-3"),
                  c.select(ids.MD_MODEL, "model", [view.model] if view.model else [], view.model),
                  c.select(ids.MD_CLASS, "class", [view.cls] if view.cls else [], view.cls, width="10rem"),
                  c.select(ids.MD_MODE, "spec mode", [view.mode] if view.mode else [], view.mode, width="11rem")],
                 className="d-flex align-items-center flex-wrap gap-2 mb-1"),
        html.Div(id=ids.MD_STATUS),
        # the cards and the summary's charts come from one callback, the charts over time slices (12 more
        # summaries) from another in the same round: the cards never wait for the slowest figure
        dcc.Loading(html.Div(id=ids.MD_KPIS), type="dot", delay_show=300),
        dbc.Row([dbc.Col(c.chart(ids.MD_POSITION, "Per-position acceptance (decay of p_i with depth = drift)"), lg=6),
                 dbc.Col(c.chart(ids.MD_BAND, "Acceptance rate vs concurrency (mean running requests)"), lg=6)]),
        dbc.Row([dbc.Col(c.chart(ids.MD_ITL, "P99 / P50 ITL per engine step (chunk): spec vs baseline",
                                 figures.ITL_HINT), lg=6),
                 dbc.Col(c.chart(ids.MD_TPOT, "P99 / P50 TPOT per token: spec vs baseline", figures.TPOT_HINT),
                         lg=6)]),
        c.chart(ids.MD_SPEEDUP, "Speedup per class: measured (TPOT) vs estimated τ/(1+ε_step) from step times"),
        html.Section([html.H5("Per-request acceptance by concurrency", className="sw-chart-title", id="md-load-title"),
                      dcc.Loading(html.Div(id=MD_LOAD), type="dot", delay_show=300)],
                     className="sw-section", **{"aria-labelledby": "md-load-title"}),
        html.Section([html.H5("Draft length K advisor", className="sw-chart-title", id="md-kadvice-title"),
                      dcc.Loading(html.Div(id=ids.MD_KADVICE), type="dot", delay_show=300)],
                     className="sw-section", **{"aria-labelledby": "md-kadvice-title"}),
        html.Section([html.H5("Pools and engines", className="sw-chart-title", id="md-engines-title"),
                      dcc.Loading(html.Div(id=MD_ENGINES), type="dot", delay_show=300)],
                     className="sw-section", **{"aria-labelledby": "md-engines-title"}),
        html.Section([html.H5(context_view.cv.SECTION, className="sw-chart-title", id="md-context-title"),
                      dcc.Loading(html.Div(id=context_view.MD_CONTEXT), type="dot", delay_show=300)],
                     className="sw-section", **{"aria-labelledby": "md-context-title"}),
        html.H5("Capacity and money", className="mt-3"),
        dcc.Loading(html.Div(id=ids.MD_CAPACITY), type="dot", delay_show=300),
        html.Div(id=ids.MD_REPLICAS),
    ])


INPUTS = (Input(ids.MD_QUERY, "data"), Input(ids.REFRESH_INTERVAL, "n_intervals"), Input(ids.MD_RETRY, "n_intervals"),
          Input(ids.THEME_STORE, "data"))


@callback(Output(ids.MD_STATUS, "children"), Output(ids.MD_RETRY, "disabled"), Output(ids.MD_MODEL, "options"),
          Output(ids.MD_MODEL, "value"), Output(ids.MD_CLASS, "options"), Output(ids.MD_CLASS, "value"),
          Output(ids.MD_KPIS, "children"), Output(ids.MD_POSITION, "figure"), Output(ids.MD_SPEEDUP, "figure"),
          Output(ids.MD_MODE, "options"), Output(ids.MD_MODE, "value"), *INPUTS)
def update(query, _tick, _retry, theme):
    theme, view = theme or "light", state.from_params(query or {})
    return c.guarded(lambda: render_cards(get_client(), view, theme), n_outputs=11,
                     blank=lambda why: {**c.models_anyway(get_client(), view.model), 7: figures.empty(why, theme),
                                        8: figures.empty(why, theme)})


@callback(Output(ids.MD_BAND, "figure"), Output(ids.MD_ITL, "figure"), Output(ids.MD_TPOT, "figure"), *INPUTS)
def update_slices(query, _tick, _retry, theme):
    theme = theme or "light"
    out = c.guarded(lambda: (None, True, *render_slices(get_client(), state.from_params(query or {}), theme)),
                    n_outputs=5, blank=lambda why: {i: figures.empty(why, theme) for i in (2, 3, 4)})
    return out[2:]  # on an error the cards' callback shows the banner; the charts say why (or keep their last)


@callback(Output(ids.MD_KADVICE, "children"), *INPUTS[:3])  # tables only: a theme change does not refetch
def update_k_advice(query, _tick, _retry):
    out = c.guarded(lambda: (None, True, render_k_advice(get_client(), state.from_params(query or {}))),
                    n_outputs=3)
    return out[2]  # on an error the cards' callback shows the banner; the tables keep their last content


def render_k_advice(client: ApiClient, view: state.View) -> html.Div:
    models = c.spec_models(client.pools())
    model = c.pick(models, view.model)
    return k_advice_view.section(client.k_advice(model, view) if model else None)


@callback(Output(MD_LOAD, "children"), *INPUTS[:3])  # a table: a theme change does not refetch
def update_load(query, _tick, _retry):
    out = c.guarded(lambda: (None, True, render_load(get_client(), state.from_params(query or {}))), n_outputs=3)
    return out[2]  # on an error the cards' callback shows the banner; the table keeps its last content


def render_load(client: ApiClient, view: state.View):
    """α and τ by concurrency band per class from the model's per-request records, with the load finding."""
    pools = client.pools()
    model = c.pick(c.spec_models(pools), view.model)
    if model is None or not any(p.model_name == model and p.origin == "requests" for p in pools.pools):
        return load_view.section(None)
    dist = request_acceptance(client, model, view)
    return load_view.section(dist, view.mode)


@callback(Output(MD_ENGINES, "children"), *INPUTS[:3])  # a table: a theme change does not refetch
def update_engines(query, _tick, _retry):
    out = c.guarded(lambda: (None, True, render_engines(get_client(), state.from_params(query or {}))), n_outputs=3)
    return out[2]


POOL_FIGURES = (("acceptance_rate", "acceptance rate r", c.fmt_rate), ("accept_length", "τ (tokens / step)", c.fmt_tau),
                ("drafts", "drafts", c.fmt_count), ("draft_tokens", "draft tokens", c.fmt_count),
                ("accepted_tokens", "accepted tokens", c.fmt_count))


def render_engines(client: ApiClient, view: state.View):
    """GET /pools/figures of the model shown: a line per engine pool with its engine and each figure in the
    one wording (backend.domain.engines.wording): "not exposed by <engine>", "(estimated)" with its basis
    as a footnote; then which engines the model's mixed row leaves out (its counts are exact only)."""
    model = c.pick(c.spec_models(client.pools()), view.model)
    if model is None:
        return None
    got = client.pool_figures(model, view)
    notes: dict[str, int] = {}

    def cell(engine: str, f) -> html.Td:
        fmt = next(x[2] for x in POOL_FIGURES if x[0] == f.figure)
        text = wording.figure_text(engine, f.figure, None if f.value is None else fmt(f.value), none=c.NO_DATA)
        basis = f.estimate_basis or f.note
        if basis is None:
            return html.Td(text)
        mark = notes.setdefault(basis, len(notes) + 1)
        return html.Td([text, html.Sup(f"[{mark}]", title=basis)], title=basis)

    body = []
    for row in got.pools:
        by = {f.figure: f for f in row.figures}
        body.append(html.Tr([html.Td(row.pool.traffic_class), html.Td(row.pool.spec_mode),
                             html.Td(wording.engine_label(row.engine), **{"data-engine": row.engine}),
                             *[cell(row.engine, by[f]) for f, _, _ in POOL_FIGURES if f in by]]))
    table = c.stacked(dbc.Table([html.Thead(html.Tr([html.Th(h) for h in
                                                     ["class", "mode", "engine", *(x[1] for x in POOL_FIGURES)]])),
                                 html.Tbody(body)], size="sm", responsive=True, id="md-engine-pools"))
    by_mode: dict[str, set[str]] = {}
    for r in got.pools:  # a mixed row is per spec mode: it mixes engines only where one mode runs on several
        by_mode.setdefault(r.pool.spec_mode, set()).add(r.engine)
    excluded = [f"mixed row ({mode}): {wording.excluded_text(names)}" for mode, names in sorted(by_mode.items())
                if wording.excluded_text(names) and not wording.estimate_only(names, "acceptance_rate")]
    foot = [html.Li([f"[{n}] ", text]) for text, n in notes.items()]
    return html.Div([table,
                     *([html.P("; ".join(excluded), className="sw-muted mb-1", id="md-mixed-excluded")]
                       if excluded else []),
                     html.Ol(foot, className="sw-muted small", style={"listStyle": "none", "paddingLeft": 0},
                             id="md-engine-notes") if foot else None])


@callback(Output(context_view.MD_CONTEXT, "children"), *INPUTS)
def update_context(query, _tick, _retry, theme):
    out = c.guarded(lambda: (None, True, render_context(get_client(), state.from_params(query or {}),
                                                         theme or "light")), n_outputs=3)
    return out[2]  # on an error the cards' callback shows the banner; the section keeps its last content


def render_context(client: ApiClient, view: state.View, theme: str) -> list | None:
    """α by context length of the model shown (GET /requests/acceptance, every class of its records) and its
    classes' context_drift alerts (GET /alerts)."""
    pools = client.pools()
    model = c.pick(c.spec_models(pools), view.model)
    if model is None:
        return None
    has_records = any(p.model_name == model and p.origin == "requests" for p in pools.pools)
    classes, alerts = None, None
    if has_records:
        try:
            classes = request_acceptance(client, model, view)["classes"]
        except ApiError as exc:  # per-request data needs a viewer token (never anonymous): say why, not blank
            return [html.P(f"{context_view.cv.SECTION} unavailable: {c.refusal(exc)}", className="sw-muted",
                           **{"data-field": "context-empty"})]
        try:
            alerts = alerts_client.alerts(client)
        except ApiError:  # a token that may not read alerts: the bands still show, the state says unavailable
            alerts = None
    return context_view.model_section(has_records=has_records, classes=classes, alerts=alerts, model=model,
                                      window_label=view.label(), theme=theme)


@callback(Output(ids.MD_CAPACITY, "children"), *INPUTS)
def update_capacity(query, _tick, _retry, _theme):
    out = c.guarded(lambda: (None, True, render_capacity(get_client(), state.from_params(query or {}))),
                    n_outputs=3)
    return out[2]


@callback(Output(ids.MD_REPLICAS, "children"), *INPUTS)
def update_replicas(query, _tick, _retry, _theme):
    out = c.guarded(lambda: (None, True, render_replicas(get_client(), state.from_params(query or {}))), n_outputs=3)
    return out[2]


def render_replicas(client: ApiClient, view: state.View):
    """The replica table of the model shown (its own request: the cards never wait for it)."""
    model = c.pick(c.spec_models(client.pools()), view.model)
    if model is None:
        return None
    return replica_table.table(client.replicas(model, replica_table.replica_window(view.window)))


in_place.follow_url(ids.MD_QUERY, "/model")  # a window change keeps this page and its charts


@callback(Output(ids.URL, "search", allow_duplicate=True), Input(ids.MD_MODEL, "value"), Input(ids.MD_CLASS, "value"),
          Input(ids.MD_MODE, "value"), State(ids.MD_MODE, "options"), State(ids.URL, "search"),
          prevent_initial_call=True)
def choose(model, cls, mode, modes, search):
    picked = ctx.triggered_prop_ids.values()
    return c.search_with_mode(search, model, mode, model_changed=ids.MD_MODEL in picked,
                              mode_changed=ids.MD_MODE in picked, options=modes, cls=cls)


def _choose(client: ApiClient, view: state.View):
    """(spec models, the model shown, its summary for the spec mode shown, that mode's classes, the class
    shown, the model's spec modes, the mode shown); model None: no pools. Without a mode asked for, the
    mode is the busiest one that serves the class asked for."""
    models = c.spec_models(client.pools())
    model = c.pick(models, view.model)
    if model is None:
        return models, None, None, [], None, [], None
    full = client.summary(model, view)
    modes = c.spec_modes(full)
    serving = [k.spec_mode for k in full.classes if k.traffic_class == view.cls]
    mode = c.pick(modes, view.mode if view.mode in modes else next((m for m in modes if m in serving), None))
    summary = c.for_mode(full, mode)
    classes = [k.traffic_class for k in summary.classes]
    cls = c.pick(classes, view.cls if view.cls in classes else (MIXED if MIXED in classes else None))
    return models, model, summary, classes, cls, modes, mode


def render_cards(client: ApiClient, view: state.View, theme: str) -> tuple:
    models, model, summary, classes, cls, modes, mode = _choose(client, view)
    if model is None:
        blank = figures.empty("no speculative pools reported yet", theme)
        return c.empty_state("any model", None), True, models, None, [], None, None, blank, blank, [], None
    row = next(k for k in summary.classes if k.traffic_class == cls)
    engines = row_engines(client, model, cls, mode)
    excluded = None if wording.estimate_only(engines, "acceptance_rate") else wording.excluded_text(engines)
    est = estimates(client, model, view, cls, mode) if wording.estimate_only(engines, "acceptance_rate") else {}
    status = [c.updated(summary.generated_at, view.label()), c.mode_note(modes, mode), c.source_note(row),
              html.Div(f"{cls}: {excluded}", className="sw-muted", id="md-excluded") if excluded else None]
    if not row.volume.drafts and not (wording.estimate_only(engines, "acceptance_rate") and est):
        label = f"{model} · {cls}" + (f" · {mode}" if len(modes) > 1 else "")
        status.append(c.empty_state(label, row.freshness.last_seen, window_label=view.label()))
    return (html.Div(status), True, models, model, classes, cls, kpis(row, summary, engines, est),
            figures.per_position(row, theme), figures.speedup_bars(summary, theme), modes, mode)


def render_slices(client: ApiClient, view: state.View, theme: str) -> tuple:
    _models, model, summary, _classes, cls, _modes, mode = _choose(client, view)
    if model is None:
        blank = figures.empty("no speculative pools reported yet", theme)
        return blank, blank, blank
    slices = [c.for_mode(s, mode) for s in summary_slices(client, model, summary.window.start, summary.window.end,
                                                           SLICES)]
    return (figures.acceptance_vs_concurrency(slices, theme), figures.latency_over_time(slices, cls, "itl", theme),
            figures.latency_over_time(slices, cls, "tpot", theme))


def render(client: ApiClient, view: state.View, theme: str) -> tuple:
    """Everything the page shows, in the order of the old single callback (status, retry, model options,
    model, class options, class, cards, per-position, band, ITL, TPOT, speedup), then the spec-mode options
    and the mode shown."""
    cards = render_cards(client, view, theme)
    band, itl, tpot = render_slices(client, view, theme)
    return (*cards[:8], band, itl, tpot, cards[8], *cards[9:])


def _money(v: float | None, currency: str) -> str:
    return money.money_text(v, currency, none=c.NO_DATA)


def _between(low: float | None, high: float | None, currency: str) -> str:
    return money.interval_text(low, high, currency, none=c.NO_DATA)


def _table(head: list[str], rows: list[list], id: str) -> dbc.Table:
    return c.stacked(dbc.Table([html.Thead(html.Tr([html.Th(h) for h in head])),
                                html.Tbody([html.Tr([html.Td(x) for x in row]) for row in rows])], size="sm",
                               responsive=True, id=id))


def render_capacity(client: ApiClient, view: state.View) -> html.Div:
    """GET /capacity of the model shown: a line per spec pool, then the selected class's concurrency bands."""
    models = c.spec_models(client.pools())
    model = c.pick(models, view.model)
    if model is None:
        return html.Div("no speculative pools reported yet", className="sw-muted")
    cap = client.capacity(model, view)
    cur = cap.currency
    if not cap.classes:
        return html.Div("no output-token counters (vllm:generation_tokens_total) in this window", className="sw-muted")
    lines = _table(
        ["class", "mode", "operating band", "tokens/s per replica (spec / baseline)", "per running request",
         "cost per 1M tokens",
         money.SAVED_IN_WINDOW, "95 % interval", money.PER_WEEK_AT_WINDOW_RATE, "stops paying from"],
        [[k.traffic_class, k.spec_mode, k.operating_band or c.NO_DATA,
          f"{c.fmt(k.spec.per_replica, ',.1f')} / {c.fmt(k.baseline.per_replica if k.baseline else None, ',.1f')}",
          f"{c.fmt(k.spec.per_request, ',.2f')} / {c.fmt(k.baseline.per_request if k.baseline else None, ',.2f')}",
          f"{_money(k.money.cost_per_mtok_spec, cur)} / {_money(k.money.cost_per_mtok_baseline, cur)}",
          _money(k.money.saved_in_window, cur),
          _between(k.money.saved_in_window_low, k.money.saved_in_window_high, cur),
          _money(k.money.per_week_at_window_rate, cur), k.stops_paying_band or "never"] for k in cap.classes],
        "md-capacity-lines")
    mode_rows = [k for k in cap.classes if view.mode in (None, k.spec_mode)] or cap.classes
    chosen = next((k for k in mode_rows if k.traffic_class == view.cls), mode_rows[0])
    bands = _table(
        ["band (running requests)", "tokens/s per replica spec", "baseline", "ratio (95 %)", "per running request",
         "cost per 1M spec", "baseline", money.SAVED_IN_WINDOW, "pays"],
        [[b.band, c.fmt(b.spec.per_replica, ",.1f"), c.fmt(b.baseline.per_replica if b.baseline else None, ",.1f"),
          f"{c.fmt(b.ratio_per_replica, '.2f')} ({c.fmt(b.ratio_low, '.2f')}–{c.fmt(b.ratio_high, '.2f')})",
          f"{c.fmt(b.spec.per_request, ',.2f')} / {c.fmt(b.baseline.per_request if b.baseline else None, ',.2f')}",
          _money(b.spec.cost_per_mtok, cur), _money(b.baseline.cost_per_mtok if b.baseline else None, cur),
          _money(b.saved_in_window, cur),
          b.pays or c.NO_DATA] for b in chosen.bands], "md-capacity-bands")
    notes = [html.Li(f"{k.traffic_class} {k.spec_mode}: {k.note}") for k in cap.classes]
    total = cap.total
    return html.Div([
        html.Div(f"{model}: {money.SAVED_IN_WINDOW} {_money(total.saved_in_window, cur)} (95 %: "
                 f"{_between(total.saved_in_window_low, total.saved_in_window_high, cur)}); "
                 f"{money.PER_WEEK_AT_WINDOW_RATE} {_money(total.per_week_at_window_rate, cur)}. "
                 f"Interval: {cap.method}.", className="mb-1",
                 id="md-capacity-total"),
        lines, html.H6(f"{chosen.traffic_class} {chosen.spec_mode} per concurrency band"), bands, html.Ul(notes)])


def row_engines(client: ApiClient, model: str, cls: str | None, mode: str | None) -> list[str]:
    """The engines of the spec pools the shown class row sums (every class for `mixed`)."""
    return sorted({p.engine for p in client.pools().pools if p.model_name == model and p.spec_mode == mode
                   and p.origin == "engine" and (cls == MIXED or p.traffic_class == cls)}) or ["vllm"]


def estimates(client: ApiClient, model: str, view: state.View, cls: str | None, mode: str | None) -> dict:
    """A class row whose pools give only estimates: the estimate of its one pool (GET /pools/figures, never
    summed with exact counts); {} when it sums several (their estimates are each pool's, in the pools table)."""
    rows = [r for r in client.pool_figures(model, view).pools if r.pool.spec_mode == mode
            and (cls == MIXED or r.pool.traffic_class == cls)]
    if len(rows) != 1:
        return {}
    return {f.figure: f.value for f in rows[0].figures if f.exact is False}


def kpis(k: ClassSummaryRead, summary: SummaryRead, engines: list[str] | None = None,
         est: dict | None = None) -> html.Div:
    engines, est = engines or ["vllm"], est or {}
    fmts = {"acceptance_rate": c.fmt_rate, "accept_length": c.fmt_tau}

    def shown(figure: str, text: str) -> str:
        """The one wording of an engine's figure; an estimate-only row shows its pool's estimate."""
        if text == c.NO_DATA and est.get(figure) is not None:
            text = fmts[figure](est[figure])
        return wording.row_figure_text(engines, figure, None if text == c.NO_DATA else text, none=c.NO_DATA)
    eps_src = c.fmt_eps_step(k.eps_step, k.eps_step_source, k.concurrency_band)
    drift = k.drift.last_to_first_ratio if k.drift else None
    itl_q = next((q for q in (k.itl.quantiles if k.itl else []) if q.q == 0.99), None)
    tpot_q = next((q for q in (k.tpot.quantiles if k.tpot else []) if q.q == 0.99), None)
    cards = [
        c.kpi("acceptance rate r", shown("acceptance_rate", c.fmt_rate(k.acceptance_rate)), id="md-kpi-acceptance_rate",
              hint="A/D over the window; depends on K", sub=f"K = {c.fmt(k.num_spec_tokens, 'd')}"),
        c.kpi("τ (tokens / step)", shown("accept_length", c.fmt_tau(k.mean_acceptance_length)), id="md-kpi-mean_acceptance_length",
              hint="1 + A/N"),
        c.kpi("per-token a (i.i.d. fit)", c.fmt_rate(k.per_token_acceptance), id="md-kpi-per_token_acceptance",
              hint="model value: assumes position-independent acceptance",
              sub=f"drift p_last/p_0 = {c.fmt(drift, '.2f')}"),
        c.kpi("break-even α", c.fmt_rate(k.break_even_alpha), id="md-kpi-break_even_alpha",
              hint="ε_step/K: the step overhead (mean ITL spec/baseline − 1, same band, else the band default)",
              sub=eps_src),
        c.kpi("margin", shown("margin", c.fmt(k.margin, "+.3f")), id="md-kpi-margin", hint="seed alpha − ε_step/K",
              sub=f"band {k.concurrency_band or '—'} · business: S − 1 = {c.fmt(k.speedup_margin, '+.2f')}"),
        c.kpi("speedup measured / est.", f"{c.fmt_speedup(k.measured_speedup)} / {c.fmt_speedup(k.estimated_speedup)}",
              id="md-kpi-speedup", hint="measured: TPOT mean baseline/spec in the same band; estimated: "
              "τ/(1+ε_step) from step times (ITL)", sub=_check_word(k)),
        c.kpi("P99 ITL Δ (per step)", shown("itl", _delta(itl_q)), id="md-kpi-p99-itl", hint=figures.ITL_HINT,
              sub=_verdict(itl_q, "itl")),
        c.kpi("P99 TPOT Δ (per token)", shown("tpot", _delta(tpot_q)), id="md-kpi-p99-tpot", hint=figures.TPOT_HINT,
              sub=_verdict(tpot_q, "tpot")),
        c.kpi("drafts", shown("drafts", c.fmt_count(k.volume.drafts)), id="md-kpi-drafts", hint="verify steps with drafts",
              sub="enough volume" if k.volume.sufficient else f"below {k.volume.min_drafts} (low volume)"),
    ]
    flags = k.data_quality + k.incomplete_reasons
    extra = [dbc.Alert("data quality: " + ", ".join(flags), color="light", className="py-1")] if flags else []
    extra += speedup_finding(k)
    extra += advice(summary)
    return html.Div([dbc.Row([dbc.Col(x, xs=6, md=4, xl=True) for x in cards], className="g-2 mb-2"), *extra])


CHECK_WORDS = {"agree": "estimate agrees with measured", "disagree": "⚠ estimate ≠ measured (finding)",
               "undetermined": "agreement not determined"}


def _check_word(k: ClassSummaryRead) -> str:
    if k.speedup_check is None:
        return "no measured ε_step: nothing to check" if k.measured_speedup is not None else "no baseline"
    return CHECK_WORDS[k.speedup_check.verdict]


def speedup_finding(k: ClassSummaryRead) -> list:
    """The estimate from step time against the measured speedup, named as a finding when they disagree
    beyond their uncertainty; also says what the effective overhead τ/S − 1 is."""
    chk = k.speedup_check
    if chk is None or chk.verdict != "disagree":
        return []
    return [dbc.Alert([html.Strong("Finding: speedup estimate ≠ measured. "),
                       (f"τ/(1+ε_step) = {c.fmt_speedup(chk.estimated)} against {c.fmt_speedup(chk.measured)} "
                       f"measured (TPOT), ratio {c.fmt(chk.ratio, '.3f')}, 2 SE {c.fmt(chk.ratio_low, '.3f')}–"
                       f"{c.fmt(chk.ratio_high, '.3f')} over {chk.bins} time bins: {chk.reason.split(': ', 1)[-1]}. "
                       f"Effective overhead τ/S − 1 = {c.fmt(k.eps_effective, '.2f')}; "
                       f"{c.fmt_eps_step(k.eps_step, k.eps_step_source, k.concurrency_band)}.")],
                      color="warning", className="py-1", id="md-speedup-finding")]


def advice(summary: SummaryRead) -> list:
    """Once per model: latency verdicts the buckets cannot resolve, and the vLLM setting that would."""
    return [dbc.Alert([html.Strong("⇅ below the histogram's resolution: "), a.text.split(a.flag)[0],
                       html.Code(a.flag, className="sw-wrap"), a.text.split(a.flag)[1]],
                      color="light", className="py-1", id=f"md-resolution-{a.family_key}")
            for a in summary.resolution_advice]


def _delta(q) -> str:
    """The P99 delta spec − baseline: the overview's "P99 … Δ" figure (the same API value, formatted alike)."""
    return c.fmt_delta_ms(q.delta if q is not None else None)


def _interval(q) -> str:
    """Where spec − baseline lies by the verdict's bucket edges (what the verdict rests on), named apart."""
    v = q.verdict if q is not None else None
    return c.NO_DATA if v is None else c.fmt_interval(v.delta_low, v.delta_high)


def _side(name: str, value, low: float | None, high: float | None) -> str:
    point = c.fmt_ms(value.value) if value is not None else c.NO_DATA
    return f"{name} {'> ' if value is not None and value.lower_bound else ''}{point} in {c.fmt_bucket(low, high)}"


def _verdict(q, family: str) -> list | None:
    """The verdict badge, the interval it rests on, its one-line reason and each side's point value next to
    its bucket bounds."""
    if q is None or q.verdict is None:
        return None
    v = q.verdict
    icon, text, colour = c.VERDICTS[v.verdict]
    lines = [html.Span(f"{icon} {text}", id=f"md-verdict-{family}", title=c.verdict_reason(v.verdict),
                       className=f"sw-verdict-line {c.tone(colour)}"),
             html.Span(f"interval {_interval(q)}", id=f"md-interval-{family}", className="sw-verdict-line",
                       title="where spec − baseline lies by the histogram's bucket edges (the verdict rests on it)")]
    if v.reason:
        lines.append(html.Span(v.reason, id=f"md-reason-{family}", className="sw-verdict-line"))
    if v.spec_bucket_low is not None or v.spec_bucket_high is not None:
        lines.append(html.Span(f"{_side('spec', q.spec, v.spec_bucket_low, v.spec_bucket_high)} · "
                               f"{_side('baseline', q.baseline, v.base_bucket_low, v.base_bucket_high)}",
                               id=f"md-buckets-{family}", className="sw-verdict-line"))
    return lines
