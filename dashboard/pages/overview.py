"""Fleet overview: one row per model x traffic class (GET /api/v1/fleet), coloured by state with icon + text."""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlencode

import dash
import dash_ag_grid as dag
import dash_bootstrap_components as dbc
from dash import Input, Output, State, callback, clientside_callback, ctx, dcc, html

from backend.domain import money
from backend.domain.engines import ENGINE_NAMES, wording
from backend.schemas.fleet import FLEET_STATE_ORDER, FleetPageRead, FleetRead, FleetRowRead
from dashboard import components as c
from dashboard import fleet_grid, ids, in_place, state
from dashboard import formatting as fm
from dashboard.alerts_view import OV_ALERTS
from dashboard.api_client import ApiClient, get_client
from dashboard.security import md_text

dash.register_page(__name__, path="/", name="Fleet overview", order=0, title="specwatch · fleet")

# The grid (and the phone's cards) hold at most this many rows: a larger fleet is paged by the API (GET /fleet?offset=&limit=,
# most urgent state first), the filter box then filters on the server (q=) and a pager steps the pages.
PAGE_ROWS = 200
URGENT_FIRST = "state"
# The phone's cards are Dash components (~25 a card) and Dash's renderer spends ~10 ms of browser CPU on
# each: they are rendered only where CSS shows them (a narrow screen), at most CARD_ROWS, most urgent first.
CARD_ROWS = 30
URGENCY = {s: i for i, s in enumerate(FLEET_STATE_ORDER)}  # most urgent first, as the API's sort=state
NARROW = "(max-width: 767.98px)"  # the CSS breakpoint below which the cards replace the grid



def layout(**kwargs: str) -> html.Div:
    view = state.from_params(kwargs)
    return html.Div([
        dcc.Store(id=ids.OV_QUERY, data=state.as_dict(view)),
        dcc.Interval(id=ids.OV_RETRY, interval=5000, disabled=True),
        html.Div(id=OV_ALERTS),  # firing alerts (filled by pages/alerts.py)
        html.H4("Fleet overview", className="mb-1"),
        html.Div(id=ids.OV_STATUS),
        dcc.Loading(html.Div(id=ids.OV_KPIS), type="dot", delay_show=300),
        dcc.Store(id=ids.OV_PAGE, data={"offset": 0, "q": None}),
        dcc.Store(id=ids.OV_NARROW, data=False),
        html.Div([dbc.Input(id=ids.OV_FILTER, placeholder="filter rows (model, class, state…)", size="sm",
                            debounce=False, style={"maxWidth": "22rem"}),
                  c.select(ids.OV_ENGINE, "engine", ENGINE_OPTIONS,
                           kwargs.get("engine") if kwargs.get("engine") in ENGINE_NAMES else "all", width="10rem")],
                 className="d-flex align-items-center flex-wrap gap-2 mb-2"),
        html.Div([dbc.Button("‹ previous", id=ids.OV_PREV, size="sm", color="secondary", outline=True),
                  html.Span(id=ids.OV_PAGER_TEXT, className="sw-muted", **{"aria-live": "polite"}),
                  dbc.Button("next ›", id=ids.OV_NEXT, size="sm", color="secondary", outline=True)],
                 # no Bootstrap d-flex here: its `display: flex !important` would beat the hidden style
                 id=ids.OV_PAGER, className="align-items-center gap-2 mb-2", style={"display": "none"}),
        html.Div(id=ids.OV_CARDS, className="sw-ov-cards"),
        dag.AgGrid(id=ids.OV_GRID, columnDefs=fleet_grid.COLUMNS, rowData=[], className="sw-grid",
                   getRowId="params.data.row_id", style=grid_style(10),
                   defaultColDef={"sortable": True, "resizable": True, "filter": False, "wrapHeaderText": True,
                                  "autoHeaderHeight": True},
                   # every column rendered (at most PAGE_ROWS rows, ~20 columns): a wide state column must not
                   # leave the detail columns to be drawn only once scrolled to
                   dashGridOptions={"tooltipShowDelay": 300, "animateRows": False,
                                    "suppressColumnVirtualisation": True}),
    ])


@callback(Output(ids.OV_STATUS, "children"), Output(ids.OV_RETRY, "disabled"), Output(ids.OV_KPIS, "children"),
          Output(ids.OV_GRID, "rowData"), Output(ids.OV_GRID, "style"), Output(ids.OV_CARDS, "children"),
          Output(ids.OV_PAGER, "style"), Output(ids.OV_PAGER_TEXT, "children"),
          Input(ids.OV_QUERY, "data"), Input(ids.REFRESH_INTERVAL, "n_intervals"), Input(ids.OV_RETRY, "n_intervals"),
          Input(ids.OV_PAGE, "data"), Input(ids.OV_NARROW, "data"), Input(ids.OV_ENGINE, "value"))
def update(query, _tick, _retry, page, narrow, engine=None):
    return c.guarded(lambda: render(get_client(), state.from_params(query or {}), page, narrow=bool(narrow),
                                    engine=engine), n_outputs=8)


# a narrow screen says so once per page view (no update on a wide one: one render, no cards)
clientside_callback(
    f"function (_q) {{ return window.matchMedia('{NARROW}').matches ? true : window.dash_clientside.no_update; }}",
    Output(ids.OV_NARROW, "data"), Input(ids.OV_QUERY, "data"))


@callback(Output(ids.OV_PAGE, "data"), Input(ids.OV_PREV, "n_clicks"), Input(ids.OV_NEXT, "n_clicks"),
          Input(ids.OV_FILTER, "value"), State(ids.OV_PAGE, "data"), State(ids.OV_PAGER, "style"),
          prevent_initial_call=True)
def step(_prev, _next, text, page, pager_style):
    """Pager clicks move by PAGE_ROWS; while the fleet is paged, the filter text goes to the server (q)."""
    page = page or {"offset": 0, "q": None}
    paged = (pager_style or {}).get("display") != "none"
    if ctx.triggered_id == ids.OV_FILTER:
        q = (text or "").strip()[:200] or None
        return {"offset": 0, "q": q} if paged and q != page.get("q") else dash.no_update
    delta = PAGE_ROWS if ctx.triggered_id == ids.OV_NEXT else -PAGE_ROWS
    return {**page, "offset": max(0, page.get("offset", 0) + delta)}


in_place.follow_url(ids.OV_QUERY, "/")  # a window change keeps this page and its grid


@callback(Output(ids.OV_GRID, "dashGridOptions"), Input(ids.OV_FILTER, "value"), prevent_initial_call=True)
def quick_filter(text):
    patch = dash.Patch()
    patch["quickFilterText"] = text or ""
    return patch


def render(client: ApiClient, view: state.View, page: dict | None = None, *, narrow: bool = True,
           engine: str | None = None) -> tuple:
    """One request: the first PAGE_ROWS rows (all of them on a fleet that fits, in the API's order, and the
    grid sorts and filters them in the browser), or a page of a larger fleet, most urgent first. The phone's
    cards only when `narrow`."""
    page = page or {}
    offset, q = max(0, int(page.get("offset") or 0)), page.get("q") or None

    fleet = client.fleet(view, offset=offset, limit=PAGE_ROWS, q=q, sort=URGENT_FIRST if offset or q else None)
    if fleet.total_rows > PAGE_ROWS and not (offset or q):  # too many for one page: most urgent first
        fleet = client.fleet(view, offset=0, limit=PAGE_ROWS, sort=URGENT_FIRST)
    status = c.updated(fleet.generated_at, view.label(), reads=fleet.reads)
    paged = fleet.total_rows > PAGE_ROWS
    counted = fleet
    fleet = of_engine(fleet, engine)
    pager = {"display": "flex"} if paged else {"display": "none"}
    return (status, True, kpis(counted), rows(fleet, view), grid_style(len(fleet.rows)),
            cards(fleet, view) if narrow else [], pager, pager_text(fleet) if paged else None)


ENGINE_OPTIONS = [{"label": "all engines", "value": "all"},
                  *({"label": wording.engine_label(n), "value": n} for n in ENGINE_NAMES)]


def of_engine(fleet: FleetRead, engine: str | None) -> FleetRead:
    """The rows with a pool of `engine` (None / "all": every row); the counts stay the fleet's."""
    if not engine or engine == "all":
        return fleet
    return fleet.model_copy(update={"rows": [r for r in fleet.rows if engine in r.engines]})


def engine_texts(r: FleetRowRead) -> dict:
    """The row's engine, and in place of each figure its engines do not expose (or only estimate) the one
    wording (backend.domain.engines.wording): `<field>_text` and its basis as `<field>_tip`."""
    names = r.engines or ["vllm"]
    out: dict = {"engine_text": wording.engines_text(names),
                 "engine_tip": wording.excluded_text(names) or r.estimate_basis}
    alpha = r.acceptance_rate if r.acceptance_rate is not None else r.acceptance_rate_estimate
    tau = r.mean_acceptance_length if r.mean_acceptance_length is not None else r.mean_acceptance_length_estimate
    for field, figure, value, fmt in (("acceptance_rate", "acceptance_rate", alpha, fm.fmt_rate),
                                      ("mean_acceptance_length", "accept_length", tau, fm.fmt_tau),
                                      ("margin", "margin", r.margin, lambda v: fm.fmt(v, "+.3f")),
                                      ("drafts", "drafts", r.drafts, fm.fmt_count)):
        if all(wording.exposed(n, figure) and not wording.estimated(n, figure) for n in names):
            continue  # exact for every engine of the row: the number as it is
        out[f"{field}_text"] = wording.row_figure_text(names, figure, None if value is None else fmt(value),
                                                       none=fm.NO_DATA)
        out[f"{field}_tip"] = (wording.basis_text(next(n for n in names if wording.estimated(n, figure)), figure)
                               if any(wording.estimated(n, figure) for n in names) else None)
    if r.estimated_excluded:
        note = wording.excluded_text(r.estimated_excluded)
        out["acceptance_rate_tip"] = note
        out["engine_tip"] = note
    for family in ("itl", "tpot"):
        if not any(wording.exposed(n, family) for n in names):
            out[f"{family}_verdict"] = wording.row_figure_text(names, family, None)
    return out


def pager_text(fleet: FleetPageRead) -> str:
    if not fleet.rows:
        return f"no rows of {fleet.matched_rows:,} match"
    first = fleet.offset + 1
    return (f"rows {first:,}–{fleet.offset + len(fleet.rows):,} of {fleet.matched_rows:,}"
            + (f" matching (of {fleet.total_rows:,})" if fleet.matched_rows != fleet.total_rows else "")
            + " · most urgent first")


def grid_style(n_rows: int) -> dict:
    """Tall enough for the rows (no empty block under a small fleet), scrolling past ~70 % of the screen."""
    return {"height": f"min({n_rows * 42 + 80}px, 72vh)", "minHeight": "200px"}


def kpis(fleet: FleetRead) -> dbc.Row:
    """Counts over the whole fleet (a page's answer carries them for every row, not only the page's)."""
    paged = isinstance(fleet, FleetPageRead)
    counts = Counter(fleet.state_counts) if paged else Counter(r.state for r in fleet.rows)
    total = fleet.total_rows if paged else len(fleet.rows)
    cards = [c.kpi("rows", str(total), id="ov-kpi-rows", hint="model × traffic class rows")]
    limits = {r.alpha_threshold for r in fleet.rows if r.alpha_threshold is not None}
    below = f" {next(iter(limits)):.2f}" if len(limits) == 1 and not paged else ""  # else: the hint says per class
    hints = {"below-threshold": "rows whose acceptance rate is below their class's alpha_low threshold (the alert "
                                "rules' threshold after per-class overrides)",
             "firing": "rows with a firing alert", "pending": "rows with a pending alert (not firing yet)"}
    for key, (icon, text, _) in fm.STATES.items():
        label = f"{icon} {text}" + (below if key == "below-threshold" else "")
        cards.append(c.kpi(label, str(counts.get(key, 0)), id=f"ov-kpi-{key}", hint=hints.get(key)))
    return dbc.Row([dbc.Col(x, xs=6, md=3, xl=True) for x in cards], className="g-2 mb-3")


def row_id(r: FleetRowRead) -> str:
    return f"{r.model_name}|{r.traffic_class}|{r.spec_mode}"


def _verdict(v: str | None) -> str:
    return fm.label(fm.VERDICTS, v)


def _links(r: FleetRowRead, view: state.View) -> tuple[str, str]:
    """The row's model drill-down (model and class) and per-domain (model) pages, keeping the window; both
    open on the row's spec mode."""
    q = {**{k: v for k, v in state.as_dict(view).items() if v and k in ("window", "start", "end")},
         "model": r.model_name}
    return (f"/model?{urlencode({**q, 'cls': r.traffic_class, 'mode': r.spec_mode})}",
            f"/acceptance?{urlencode({**q, 'mode': r.spec_mode})}")


def _freshness(r: FleetRowRead) -> str:
    last = r.freshness.last_seen
    return f"no data since {fm.fmt_time(last)}" if r.state in ("stale", "no-data") else fm.fmt_time(last)


def _fine_index(r: FleetRowRead) -> int | None:
    """The first sparkline point in the fine steps (the recent end), for the renderer's mark."""
    since = r.sparkline.fine_since
    return None if since is None else next((i for i, t in enumerate(r.sparkline.t) if t > since), None)


def _spark_hours(r: FleetRowRead) -> float | None:
    """Hours the sparkline covers from its first point with data to its end (None: no data)."""
    line = r.sparkline
    first = next((i for i, v in enumerate(line.acceptance_rate) if v is not None), None)
    if first is None:
        return None
    fine = line.fine_since is not None and line.t[first] > line.fine_since
    step = (line.fine_step_seconds if fine else None) or line.step_seconds
    return (line.t[-1] - line.t[first]).total_seconds() / 3600 + step / 3600


def alerts_first(rows: list[FleetRowRead]) -> list[FleetRowRead]:
    """Rows with a firing alert, then a pending one, then the rest, each in the order given."""
    rank = {"firing": 0, "pending": 1}
    return sorted(rows, key=lambda r: rank.get(r.state, 2))


def rows(fleet: FleetRead, view: state.View) -> list[dict]:
    out = []
    for r in alerts_first(fleet.rows):
        model_href, class_href = _links(r, view)
        alert_alpha, alert_window = c.row_alert_alpha(r)
        out.append({
            "row_id": row_id(r), "state": r.state, "state_text": fm.row_state_label(r),
            "state_title": fm.row_state_title(r), "alert_alpha": alert_alpha,
            "alert_window": fm.fmt_window(alert_window), "alpha_threshold": r.alpha_threshold,
            "spark_fine": _fine_index(r), "spark_hours": _spark_hours(r),
            "model_link": f"[{md_text(r.model_name)}]({model_href})",
            "class_link": f"[{md_text(r.traffic_class)}]({class_href})",
            "model_name": r.model_name, "traffic_class": r.traffic_class, "spec_mode": r.spec_mode,
            "num_spec_tokens": r.num_spec_tokens, "acceptance_rate": r.acceptance_rate,
            "spark": r.sparkline.acceptance_rate, "mean_acceptance_length": r.mean_acceptance_length,
            "break_even_alpha": r.break_even_alpha, "margin": r.margin, "estimated_speedup": r.estimated_speedup,
            "p99_itl_delta": r.p99_itl_delta, "itl_verdict": _verdict(r.p99_itl_verdict),
            "itl_reason": c.verdict_reason(r.p99_itl_verdict, r.p99_itl_reason) or None,
            "p99_tpot_delta": r.p99_tpot_delta, "tpot_verdict": _verdict(r.p99_tpot_verdict),
            "tpot_reason": c.verdict_reason(r.p99_tpot_verdict, r.p99_tpot_reason) or None,
            "concurrency_band": r.concurrency_band, "drafts": r.drafts, "freshness_text": _freshness(r),
            **{f: getattr(r, f) for f in ("saved_in_window", "per_week_at_window_rate")},
            **{f"{f}_text": money.money_text(getattr(r, f), r.currency or money.DEFAULT_CURRENCY)
               for f in ("saved_in_window", "per_week_at_window_rate")},
            **engine_texts(r),
        })
    return out


def _verdict_badge(v: str | None, reason: str | None = None):
    return c.verdict_badge(v, reason) if v else c.value(fm.NO_DATA)


def _field(name: str, label: str, content) -> html.Span:
    return html.Span([html.Span(label, className="sw-ov-card-label"), content], className="sw-ov-card-field",
                     **{"data-field": name})


def cards(fleet: FleetRead, view: state.View) -> list[html.Article]:
    """The phone layout of the grid (CSS shows one or the other): a card per row with what the grid shows
    first; the class is on every card (the model name alone repeats). At most CARD_ROWS, most urgent first,
    then a line saying how many more the grid (a wider screen) or the filter shows."""
    out = []
    urgent = sorted(fleet.rows, key=lambda r: URGENCY.get(r.state, len(URGENCY)))  # stable: the API's order
    for r in urgent[:CARD_ROWS]:
        model_href, class_href = _links(r, view)
        alert_alpha, alert_window = c.row_alert_alpha(r)
        _, _, colour = fm.STATES[r.state]
        head = html.Div([
            html.Span(c.row_state_badge(r), **{"data-field": "state"}),
            html.Span(r.spec_mode, className="sw-muted"),
        ], className="sw-ov-card-head")
        title = html.Div([html.Span(dcc.Link(r.model_name, href=model_href), **{"data-field": "model"}), " · ",
                          html.Span(dcc.Link(r.traffic_class, href=class_href), **{"data-field": "class"})],
                         className="sw-ov-card-title")
        texts = engine_texts(r)
        shown = lambda f, text, texts=texts: texts.get(f"{f}_text", text)
        body = html.Div([
            _field("engine", "engine", texts["engine_text"]),
            _field("alpha", "r", c.value(shown("acceptance_rate", fm.fmt_rate(r.acceptance_rate)))),
            *([_field("alert-alpha", f"r {fm.fmt_window(alert_window)}", c.value(fm.fmt_rate(alert_alpha)))]
              if alert_alpha is not None else []),
            _field("margin", "margin", c.value(shown("margin", fm.fmt(r.margin, "+.3f")))),
            _field("speedup", "est.", c.value(fm.fmt_speedup(r.estimated_speedup))),
            _field("itl", "P99 ITL", texts.get("itl_verdict") or _verdict_badge(r.p99_itl_verdict, r.p99_itl_reason)),
            _field("tpot", "P99 TPOT", texts.get("tpot_verdict") or _verdict_badge(r.p99_tpot_verdict,
                                                                                    r.p99_tpot_reason)),
            _field("fresh", "data", _freshness(r)),
        ], className="sw-ov-card-body")
        out.append(html.Article([head, title, body], className=f"sw-ov-card {fm.tone(colour)}-edge",
                                id=f"ov-card-{row_id(r)}"))
    if len(fleet.rows) > CARD_ROWS:
        out.append(html.P(f"{CARD_ROWS} of {len(fleet.rows):,} rows shown, most urgent first: filter, or open a "
                          "model, for the others", className="sw-muted sw-ov-cards-more"))
    return out
