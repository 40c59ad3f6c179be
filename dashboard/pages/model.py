"""Model drill-down: per-position acceptance (drift), acceptance vs concurrency, latency quantiles spec vs
baseline over time (ITL per engine step, TPOT per token), measured vs estimated speedup. A model that runs
several spec modes shows one at a time (the spec-mode picker; by default the mode with the most drafts)."""

from __future__ import annotations

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, State, callback, ctx, dcc, html

from backend.domain.engines import wording
from backend.schemas.summary import MIXED
from dashboard import (
    alerts_client,
    capacity_view,
    context_view,
    figures,
    ids,
    in_place,
    k_advice_view,
    load_view,
    model_kpis,
    replica_table,
    state,
)
from dashboard import components as c
from dashboard import formatting as fm
from dashboard.api_client import ApiClient, ApiError, get_client, request_acceptance, summary_slices

dash.register_page(__name__, path="/model", name="Model drill-down", order=2, title="specwatch · model")

SLICES = 12
MD_LOAD = "md-load"
MD_ENGINES = "md-engines"  # the model's pools: engine, and each figure exact, estimated or not exposed


def layout(**kwargs: str) -> html.Div:
    view = state.from_params(kwargs)
    return html.Div([
        *c.page_head("Model drill-down",
                     c.select(ids.MD_MODEL, "model", [view.model] if view.model else [], view.model),
                     c.select(ids.MD_CLASS, "class", [view.cls] if view.cls else [], view.cls, width="10rem"),
                     c.select(ids.MD_MODE, "spec mode", [view.mode] if view.mode else [], view.mode, width="11rem"),
                     query=(ids.MD_QUERY, state.as_dict(view)), retry=ids.MD_RETRY),
        html.Div(id=ids.MD_STATUS),
        # the cards and the summary's charts come from one callback, the charts over time slices (12 more
        # summaries) from another in the same round: the cards never wait for the slowest figure
        dcc.Loading(html.Div(id=ids.MD_KPIS), type="dot", delay_show=300),
        dbc.Row([dbc.Col(figures.chart(ids.MD_POSITION, "Per-position acceptance (decay of p_i with depth = drift)"), lg=6),
                 dbc.Col(figures.chart(ids.MD_BAND, "Acceptance rate vs concurrency (mean running requests)"), lg=6)]),
        dbc.Row([dbc.Col(figures.chart(ids.MD_ITL, "P99 / P50 ITL per engine step (chunk): spec vs baseline",
                                 figures.ITL_HINT), lg=6),
                 dbc.Col(figures.chart(ids.MD_TPOT, "P99 / P50 TPOT per token: spec vs baseline", figures.TPOT_HINT),
                         lg=6)]),
        figures.chart(ids.MD_SPEEDUP, "Speedup per class: measured (TPOT) vs estimated τ/(1+ε_step) from step times"),
        c.section("Per-request acceptance by concurrency", "md-load-title", MD_LOAD),
        c.section("Draft length K advisor", "md-kadvice-title", ids.MD_KADVICE),
        c.section("Pools and engines", "md-engines-title", MD_ENGINES),
        c.section(context_view.cv.SECTION, "md-context-title", context_view.MD_CONTEXT),
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


def _fill(output: str, render, inputs=INPUTS[:3], *, themed: bool = False) -> None:
    """A section filled by its own request (the cards never wait for it). On an error the cards' callback
    shows the banner and the section keeps its last content. Tables take no theme: a change does not refetch."""
    def update(query, _tick, _retry, theme=None):
        extra = (theme or "light",) if themed else ()
        return c.guarded(lambda: (None, True, render(get_client(), state.from_params(query or {}), *extra)),
                         n_outputs=3)[2]
    callback(Output(output, "children"), *inputs)(update)


def render_k_advice(client: ApiClient, view: state.View) -> html.Div:
    models = c.spec_models(client.pools())
    model = c.pick(models, view.model)
    return k_advice_view.section(client.k_advice(model, view) if model else None)


_fill(ids.MD_KADVICE, render_k_advice)


def render_load(client: ApiClient, view: state.View):
    """α and τ by concurrency band per class from the model's per-request records, with the load finding."""
    pools = client.pools()
    model = c.pick(c.spec_models(pools), view.model)
    if model is None or not any(p.model_name == model and p.origin == "requests" for p in pools.pools):
        return load_view.section(None)
    dist = request_acceptance(client, model, view)
    return load_view.section(dist, view.mode)


_fill(MD_LOAD, render_load)


POOL_FIGURES = (("acceptance_rate", "acceptance rate r", fm.fmt_rate), ("accept_length", "τ (tokens / step)", fm.fmt_tau),
                ("drafts", "drafts", fm.fmt_count), ("draft_tokens", "draft tokens", fm.fmt_count),
                ("accepted_tokens", "accepted tokens", fm.fmt_count))


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
        text = wording.figure_text(engine, f.figure, None if f.value is None else fmt(f.value), none=fm.NO_DATA)
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


_fill(MD_ENGINES, render_engines)


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


_fill(context_view.MD_CONTEXT, render_context, INPUTS, themed=True)
_fill(ids.MD_CAPACITY, capacity_view.render_capacity, INPUTS)


def render_replicas(client: ApiClient, view: state.View):
    """The replica table of the model shown (its own request: the cards never wait for it)."""
    model = c.pick(c.spec_models(client.pools()), view.model)
    if model is None:
        return None
    return replica_table.table(client.replicas(model, replica_table.replica_window(view.window)))


_fill(ids.MD_REPLICAS, render_replicas, INPUTS)


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
    return (html.Div(status), True, models, model, classes, cls, model_kpis.kpis(row, summary, engines, est),
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
