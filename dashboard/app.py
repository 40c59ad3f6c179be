"""The Dash app: `create_app(api_base_url)` builds a multi-page app (dashboard/pages); `serve()` runs it.

Shared state lives in the URL (window, model, class: a link reproduces the view) and in two stores
(auto-refresh settings, theme) kept in the browser's localStorage. The app talks to the backend only
through dashboard.api_client (HTTP).
"""

from __future__ import annotations

import logging
from pathlib import Path

import dash
import dash_bootstrap_components as dbc
from dash import Input, Output, State, clientside_callback, ctx, dcc, html, no_update

from dashboard import auth, compression, ids, in_place, security, server, state  # noqa: F401  (in_place: the window control's browser callbacks)
from dashboard.api_client import configure
from dashboard.settings import DashboardSettings, secure_cookie

log = logging.getLogger(__name__)

PAGES = Path(__file__).resolve().parent / "pages"
# the pages whose numbers depend on the window (the others: rollout, report, plan, calculator, alerts,
# ignore it, so the control is hidden there)
WINDOW_PAGES = ("overview", "acceptance", "model", "requests")
REFRESH_CHOICES = (("off", "off"), ("15", "15 s"), ("30", "30 s"), ("60", "1 min"), ("300", "5 min"))
DEFAULT_REFRESH = "60"


def window_options(current: str | None = None) -> list[dict]:
    """The standard windows, the URL's own duration when it is another one (e.g. 3h), and custom."""
    extra = [current] if current and current not in state.WINDOWS and current != state.CUSTOM else []
    return [{"label": w, "value": w} for w in (*state.WINDOWS, *extra)] + [{"label": "custom…", "value": state.CUSTOM}]


def _navbar() -> dbc.Navbar:
    return dbc.Navbar(dbc.Container([
        dbc.NavbarBrand("specwatch", href="/", className="me-3 fw-bold"),
        html.Nav(id=ids.NAV_LINKS, className="d-flex flex-wrap gap-1 me-auto sw-nav-links", children=_nav_links(""),
                 **{"aria-label": "pages"}),
        # on a phone the page links fold into this menu (CSS shows one or the other)
        html.Details([html.Summary("☰ pages", className="btn btn-sm"),
                      html.Nav(id=ids.NAV_MENU_LINKS, children=_nav_links("", "navm"), className="sw-nav-menu-links",
                               **{"aria-label": "pages (menu)"})], id=ids.NAV_MENU, className="sw-nav-menu me-auto"),
        html.Div([
            html.Div([
                html.Label("window", htmlFor=ids.WINDOW_SELECT, className="sw-nav-label"),
                dbc.Select(id=ids.WINDOW_SELECT, options=window_options(), value=state.DEFAULT_WINDOW, size="sm",
                           style={"width": "7.5rem"}),
                html.Div(id=ids.CUSTOM_BOX, style={"display": "none"}, className="sw-custom", children=[
                    html.Label("from (UTC)", htmlFor=ids.CUSTOM_START, className="sw-nav-label"),
                    dcc.Input(id=ids.CUSTOM_START, type="datetime-local", debounce=True, className="form-control-sm"),
                    html.Label("to", htmlFor=ids.CUSTOM_END, className="sw-nav-label"),
                    dcc.Input(id=ids.CUSTOM_END, type="datetime-local", debounce=True, className="form-control-sm"),
                    dbc.Button("apply", id=ids.CUSTOM_APPLY, size="sm", color="secondary"),
                ]),
            ], id=ids.WINDOW_BOX, className="sw-window-box"),  # not d-flex: its !important beats display none
            html.Label("refresh", htmlFor=ids.REFRESH_SELECT, className="sw-nav-label ms-2"),
            dbc.Select(id=ids.REFRESH_SELECT, options=[{"label": t, "value": v} for v, t in REFRESH_CHOICES],
                       value=DEFAULT_REFRESH, size="sm", style={"width": "6rem"}, persistence=True),
            dbc.Button("❚❚ pause", id=ids.REFRESH_PAUSE, size="sm", color="secondary", outline=True,
                       title="pause / resume auto-refresh"),
            dbc.Switch(id=ids.THEME_SWITCH, label="dark", value=False, persistence=True,
                       className="ms-2 mb-0 sw-theme-switch"),
            html.Div(auth.nav_user(), id="nav-user"),
        ], className="d-flex align-items-center gap-1 flex-wrap"),
    ], fluid=True), className="mb-3 sw-navbar", color="body-tertiary")


def _nav_links(search: str, prefix: str = "nav") -> list:
    pages = sorted(dash.page_registry.values(), key=lambda p: p.get("order", 99))
    return [dbc.NavLink(p["name"], href=p["relative_path"] + (search or ""), active="exact",
                        id=f"{prefix}-{p['module'].rsplit('.', 1)[-1]}") for p in pages]


def window_paths() -> list[str]:
    """The paths of the pages that read the window (with the app's path prefix)."""
    return sorted(p["relative_path"] for p in dash.page_registry.values()
                  if p["module"].rsplit(".", 1)[-1] in WINDOW_PAGES)


def window_box_style(path: str | None, paths: list[str]) -> dict:
    """Python twin of the browser callback below (for tests): shown on the window's pages only."""
    return {} if (path or "/").rstrip("/") in {p.rstrip("/") for p in paths} else {"display": "none"}


def _layout() -> html.Div:
    return html.Div([
        dcc.Store(id=ids.WINDOW_PATHS, data=window_paths()),
        dcc.Location(id=ids.URL, refresh="callback-nav"),
        dcc.Location(id=ids.URL_SOFT, refresh=False),
        dcc.Store(id=ids.WINDOW_PICK),
        dcc.Interval(id=ids.REFRESH_INTERVAL, interval=int(DEFAULT_REFRESH) * 1000, disabled=False),
        dcc.Store(id=ids.REFRESH_STATE, storage_type="local", data={"paused": False}),
        dcc.Store(id=ids.THEME_STORE, data="light"),
        _navbar(),
        dbc.Container(dash.page_container, fluid=True, className="sw-page"),
    ])


def create_app(api_base_url: str, settings: DashboardSettings | None = None) -> dash.Dash:
    configure(api_base_url)
    app = dash.Dash("dashboard", use_pages=True, pages_folder=str(PAGES), title="specwatch",
                    suppress_callback_exceptions=True,
                    update_title=None)
    app.layout = _layout
    app.index_string = app.index_string.replace("<html>", '<html lang="en">', 1)
    auth.install(app.server, settings or DashboardSettings())
    security.install(app)
    compression.install(app.server)
    return app


# --- shared callbacks (window <-> URL, nav links, refresh, theme) -----------------------------------------

@dash.callback(Output(ids.URL, "search"), Output(ids.WINDOW_SELECT, "value"), Output(ids.CUSTOM_BOX, "style"),
               Output(ids.CUSTOM_START, "value"), Output(ids.CUSTOM_END, "value"),
               Input(ids.URL, "search"), Input(ids.WINDOW_PICK, "data"), Input(ids.CUSTOM_APPLY, "n_clicks"),
               State(ids.URL_SOFT, "search"), State(ids.WINDOW_SELECT, "value"), State(ids.CUSTOM_START, "value"),
               State(ids.CUSTOM_END, "value"))
def sync_window(search, _pick, _apply, soft_search, selected, start, end):
    """Load or navigation (ids.URL), a pick the browser passed on (ids.WINDOW_PICK: any pick off the in-place
    pages, and "custom" on them) and "apply". On the in-place pages a picked duration and back/forward
    (ids.URL_SOFT) are handled in the browser (dashboard.in_place), so no server round trip sits in front of
    the page's data callback."""
    trigger = ctx.triggered_id
    # after an in-place change ids.URL still holds the previous query; ids.URL_SOFT holds the browser's
    current = search if trigger == ids.URL or soft_search is None else soft_search
    return window_sync(ids.WINDOW_SELECT if trigger == ids.WINDOW_PICK else trigger, current, selected, start, end)


def window_sync(trigger: str | None, search: str | None, selected: str | None, start: str | None,
                end: str | None) -> tuple:
    """URL -> window control on load/navigation; control -> URL on a change (one callback: no cycle)."""
    view = state.parse_search(search)
    shown = {"display": "flex"} if view.window == state.CUSTOM else {"display": "none"}
    if trigger == ids.WINDOW_SELECT and selected and selected != view.window:
        if selected == state.CUSTOM:
            return no_update, no_update, {"display": "flex"}, no_update, no_update
        return state.to_search(view.with_(window=selected, start=None, end=None)), no_update, shown, no_update, \
            no_update
    if trigger == ids.CUSTOM_APPLY:
        custom = state.from_params({"start": start or "", "end": end or "", "window": state.CUSTOM})
        if custom.window == state.CUSTOM:
            return state.to_search(view.with_(window=state.CUSTOM, start=custom.start, end=custom.end)), \
                no_update, {"display": "flex"}, no_update, no_update
        return no_update, no_update, {"display": "flex"}, no_update, no_update
    if selected == state.CUSTOM and view.window != state.CUSTOM:
        return no_update, no_update, {"display": "flex"}, no_update, no_update
    return (no_update, view.window, shown, (view.start or "")[:16] or no_update, (view.end or "")[:16] or no_update)


@dash.callback(Output(ids.NAV_LINKS, "children"), Output(ids.WINDOW_SELECT, "options"),
               Output(ids.NAV_MENU_LINKS, "children"), Output(ids.NAV_MENU, "open"), Input(ids.URL, "search"),
               Input(ids.URL_SOFT, "search"), Input(ids.URL, "pathname"))
def nav_links(url_search, soft_search, _path):
    search = soft_search if ctx.triggered_id == ids.URL_SOFT else url_search
    return (_nav_links(search or ""), window_options(state.parse_search(search).window),
            _nav_links(search or "", "navm"), False)


@dash.callback(Output(ids.REFRESH_INTERVAL, "interval"), Output(ids.REFRESH_INTERVAL, "disabled"),
               Output(ids.REFRESH_PAUSE, "children"), Output(ids.REFRESH_STATE, "data"),
               Input(ids.REFRESH_SELECT, "value"), Input(ids.REFRESH_PAUSE, "n_clicks"),
               State(ids.REFRESH_STATE, "data"))
def refresh_control(period, _clicks, data):
    return refresh_settings(period, (data or {}).get("paused", False), ctx.triggered_id == ids.REFRESH_PAUSE)


def refresh_settings(period: str | None, paused: bool, toggled: bool) -> tuple:
    paused = (not paused) if toggled else paused
    seconds = int(period) if period and period.isdigit() else 0
    label = "▶ resume" if paused else "❚❚ pause"
    return max(seconds, 5) * 1000, paused or seconds == 0, label, {"paused": paused}


clientside_callback(
    # the window control shows on the pages that read the window only (no server round trip)
    r"""function(path, paths) {
        const norm = p => (p || '/').replace(/\/+$/, '');
        return (paths || []).map(norm).includes(norm(path)) ? {} : {display: 'none'};
    }""",
    Output(ids.WINDOW_BOX, "style"), Input(ids.URL, "pathname"), State(ids.WINDOW_PATHS, "data"),
)


clientside_callback(
    # the store changes only when the theme does: the initial call leaves it alone, so the pages' data
    # callbacks (which take the theme as an input) run once on load, not twice
    """function(dark, current) {
        const mode = dark ? 'dark' : 'light';
        document.documentElement.setAttribute('data-bs-theme', mode);
        document.documentElement.setAttribute('data-ag-theme-mode', mode);
        return mode === current ? window.dash_clientside.no_update : mode;
    }""",
    Output(ids.THEME_STORE, "data"), Input(ids.THEME_SWITCH, "value"), State(ids.THEME_STORE, "data"),
)


def serve(host: str = "127.0.0.1", port: int = 8050, api: str = "http://127.0.0.1:8000", debug: bool = False,
          settings: DashboardSettings | None = None, threads: int = server.DEFAULT_THREADS) -> None:
    """gunicorn (dashboard.server); Flask's development server with `debug` or where gunicorn is missing."""
    settings = settings or DashboardSettings()
    if settings.secure_cookie is None:  # not set: Secure unless served on loopback only
        settings = settings.with_(secure_cookie=secure_cookie(settings, host))
        if settings.secure_cookie:
            log.warning("dashboard on %s: the session cookie is Secure (serve it over HTTPS, or set "
                        "SPECWATCH_DASHBOARD_SECURE_COOKIE=false)", host)
    if settings.auth == "none" and not settings.api_token:
        log.warning("no login and no SPECWATCH_DASHBOARD_API_TOKEN: the API answers anonymous reads only with "
                    "SPECWATCH_ANONYMOUS_READ=true, and never the per-request pages")
    app = create_app(api, settings)
    if debug or not server.available():
        app.run(host=host, port=port, debug=debug)
    else:
        server.run(app.server, host=host, port=port, threads=threads)
