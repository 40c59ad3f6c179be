"""Per-request acceptance: per traffic class of a model's per-request records, the distribution of α over
requests (histogram, share below the threshold, P10/P50/P90), request- vs draft-token-weighted α, α by output
length and by context length (with 95 % intervals), and how much of the engine's drafts the records cover (GET /api/v1/requests/*)."""

from __future__ import annotations

from typing import Any

import dash
import plotly.graph_objects as go
from dash import Input, Output, State, callback, dcc, html

from dashboard import components as c
from dashboard import figures, ids, state
from dashboard import formatting as fm
from dashboard.api_client import ApiClient, _window, get_client

dash.register_page(__name__, path="/requests", name="Per-request", order=6, title="specwatch · per-request")

RQ_QUERY, RQ_MODEL, RQ_STATUS, RQ_RETRY = "rq-query", "rq-model", "rq-status", "rq-retry"
RQ_TABLE, RQ_HIST, RQ_LENGTH = "rq-table", "rq-hist", "rq-length"


def layout(**kwargs: str) -> html.Div:
    view = state.from_params(kwargs)
    return html.Div([
        dcc.Store(id=RQ_QUERY, data=state.as_dict(view)),
        dcc.Interval(id=RQ_RETRY, interval=5000, disabled=True),
        html.Div([html.H4("Per-request acceptance", className="mb-0 me-3"),
                  c.select(RQ_MODEL, "model", [view.model] if view.model else [], view.model)],
                 className="d-flex align-items-center flex-wrap gap-2 mb-1"),
        html.Div(id=RQ_STATUS),
        dcc.Loading([
            html.Div(id=RQ_TABLE),
            figures.chart(RQ_HIST, "Requests by α (share of each class's requests)"),
            figures.chart(RQ_LENGTH, "α by output length (solid: draft-token-weighted, dotted: request-weighted)"),
        ], type="dot", delay_show=300),
    ])


@callback(Output(RQ_STATUS, "children"), Output(RQ_RETRY, "disabled"), Output(RQ_MODEL, "options"),
          Output(RQ_MODEL, "value"), Output(RQ_TABLE, "children"), Output(RQ_HIST, "figure"),
          Output(RQ_LENGTH, "figure"), Input(RQ_QUERY, "data"), Input(ids.REFRESH_INTERVAL, "n_intervals"),
          Input(RQ_RETRY, "n_intervals"), Input(ids.THEME_STORE, "data"))
def update(query, _tick, _retry, theme):
    return c.guarded(lambda: render(get_client(), state.from_params(query or {}), theme or "light"), n_outputs=7)


@callback(Output(ids.URL, "search", allow_duplicate=True), Input(RQ_MODEL, "value"), State(ids.URL, "search"),
          prevent_initial_call=True)
def choose(model, search):
    return c.search_with(search, model=model)


def request_models(pools) -> list[str]:
    return sorted({p.model_name for p in pools.pools if p.origin == "requests"})


def render(client: ApiClient, view: state.View, theme: str) -> tuple:
    models = request_models(client.pools())
    model = c.pick(models, view.model)
    if model is None:
        blank = figures.empty("no per-request records yet (POST /api/v1/requests)", theme)
        return c.empty_state("per-request records", None), True, models, None, None, blank, blank
    params = {"model": model, **_window(view, "window")}
    dist = client._request("GET", "/requests/acceptance", params=params)
    rec = client._request("GET", "/requests/reconciliation", params=params)
    classes = dist["classes"]
    if not classes:
        blank = figures.empty("no requests finished in this window", theme)
        return (c.empty_state(f"per-request records of {model}", None, window_label=view.label()), True, models,
                model, coverage_line(rec), blank, blank)
    return (None, True, models, model, html.Div([coverage_line(rec), table(classes, dist["threshold"]),
                                                  context_table(classes)]),
            histogram(classes, dist["threshold"], theme), by_length(classes, theme))


COVERAGE_NAMES = {"drafts": "drafts", "draft_tokens": "draft tokens", "accepted_tokens": "accepted tokens"}
FLAG_TEXT = {"partial_coverage": ("below {low} %: some requests are not reported (partial rollout of the flag, "
                                  "n > 1, or dropped records): per-class numbers describe the reported ones only"),
             "per_request_exceeds_engine": ("above {high} %: more than the engine counted: check for duplicated "
                                            "ids or a wrong model name")}


def coverage_line(rec: dict[str, Any]) -> html.P:
    """The three coverages (drafts, draft tokens, accepted tokens), each with its own flag named."""
    cov = rec["coverage"]
    if cov.get("drafts") is None:
        return html.P("coverage: no engine counters for this model in the window", className="sw-muted")
    parts = [f"{fm.fmt(cov[k] * 100, '.1f') if cov.get(k) is not None else fm.NO_DATA} % of the engine's {name}"
             for k, name in COVERAGE_NAMES.items()]
    text = "coverage: the records account for " + ", ".join(parts)
    flags = rec.get("coverage_flags") or {}
    low, high = (f"{b * 100:g}" for b in rec.get("coverage_band", (0.98, 1.02)))
    for flag, words in FLAG_TEXT.items():
        names = [COVERAGE_NAMES[k] for k in COVERAGE_NAMES if flags.get(k) == flag]
        if names:
            text += f" — {' and '.join(names)} {words.format(low=low, high=high)}"
    return html.P(text, className="sw-muted", **{"data-field": "coverage"})


def table(classes: list[dict], threshold: float) -> html.Div:
    head = ["class", "requests", "α draft-token-weighted", "α request-weighted", f"share below {threshold:g}",
            "P10", "P50", "P90"]
    rows = [html.Tr([html.Td(k["traffic_class"]), html.Td(fm.fmt_count(k["requests"])),
                     html.Td(fm.fmt_rate(k["draft_token_weighted_alpha"])),
                     html.Td(fm.fmt_rate(k["request_weighted_alpha"])),
                     html.Td(fm.fmt(None if k["share_below_threshold"] is None else k["share_below_threshold"] * 100,
                                   ".1f", " %")),
                     html.Td(fm.fmt_rate(k["p10"])), html.Td(fm.fmt_rate(k["p50"])), html.Td(fm.fmt_rate(k["p90"]))])
            for k in classes]
    caption = html.Caption("Per-request α by class (pooled α weights long completions more)")
    return c.stacked(html.Table([caption, html.Thead(html.Tr([html.Th(h, scope="col") for h in head])),
                                 html.Tbody(rows)], className="table table-sm sw-table sw-rq-table"))


def _band(b: dict) -> str:
    hi = b["prompt_tokens_to"]
    return f"{fm.fmt_count(b['prompt_tokens_from'])}+" if hi is None else \
        f"{fm.fmt_count(b['prompt_tokens_from'])}–{fm.fmt_count(hi)}"


def context_table(classes: list[dict]) -> html.Div | None:
    """α by context-length band per class (the API's by_context_length), each α with its 95 % interval;
    None when no record carries prompt_tokens."""
    rows = [html.Tr([html.Th(k["traffic_class"], scope="row"), html.Td(_band(b)), html.Td(fm.fmt_count(b["requests"])),
                     html.Td(fm.fmt_with_interval(b["draft_token_weighted_alpha"], b["draft_token_weighted_alpha_interval"])),
                     html.Td(fm.fmt_with_interval(b["request_weighted_alpha"], b["request_weighted_alpha_interval"]))])
            for k in classes for b in k.get("by_context_length") or []]
    if not rows:
        return None
    head = ["class", "prompt tokens", "requests", "α draft-token-weighted (95 %)", "α request-weighted (95 %)"]
    caption = html.Caption("α by context length (prompt tokens, powers of two; requests that sent prompt_tokens)")
    return c.stacked(html.Table([caption, html.Thead(html.Tr([html.Th(h, scope="col") for h in head])),
                                 html.Tbody(rows)], className="table table-sm sw-table sw-rq-context",
                                **{"data-field": "by-context"}))


def histogram(classes: list[dict], threshold: float, theme: str) -> go.Figure:
    fig = figures._base(theme, hovermode="closest",
                        xaxis={"title": "per-request α", "range": [0, 1]}, yaxis={"title": "share of requests"})
    for i, k in enumerate(classes):
        counts = k["histogram"]["counts"]
        width = k["histogram"]["bin_width"]
        total = sum(counts) or 1
        fig.add_bar(x=[(j + 0.5) * width for j in range(len(counts))], y=[n / total for n in counts], width=width,
                    name=k["traffic_class"], marker_color=fm.SERIES_COLOURS[i % len(fm.SERIES_COLOURS)], opacity=0.75)
    fig.update_layout(barmode="overlay")
    fig.add_vline(x=threshold, line={"dash": "dash", "width": 1.5}, annotation_text=f"α {threshold:g}")
    return fig


def by_length(classes: list[dict], theme: str) -> go.Figure:
    fig = figures._base(theme, xaxis={"title": "output tokens (from)", "type": "log"}, yaxis={"title": "α", "range": [0, 1]})
    for i, k in enumerate(classes):
        bands = k["by_output_length"]
        colour = fm.SERIES_COLOURS[i % len(fm.SERIES_COLOURS)]
        x = [b["output_tokens_from"] for b in bands]
        fig.add_scatter(x=x, y=[b["draft_token_weighted_alpha"] for b in bands], mode="lines+markers",
                        name=k["traffic_class"], line={"color": colour})
        fig.add_scatter(x=x, y=[b["request_weighted_alpha"] for b in bands], mode="lines", showlegend=False,
                        name=f"{k['traffic_class']} (request-weighted)", line={"color": colour, "dash": "dot"})
    return fig
