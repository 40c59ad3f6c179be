"""Window changes in place: on these pages the window control moves the browser's URL through ids.URL_SOFT
(`dcc.Location(refresh=False)`) instead of navigating, and the page's query store follows that URL in the
browser. Dash pages then neither re-renders the page nor remounts its grid and charts; the page's own data
callback is the one server round trip. Back/forward move ids.URL_SOFT too, so they work the same way."""

from __future__ import annotations

import json

from dash import Input, Output, State, clientside_callback

from dashboard import ids, state

PATHS = ("/", "/acceptance", "/model")

# On an in-place page the window control moves the browser's URL itself (no round trip to the server): the
# same rule as dashboard.app.window_sync's for a selected duration (drop start/end, keep model and class);
# "custom" waits for "apply", which navigates.
clientside_callback(
    """function(selected, search, pathname) {
        const skip = window.dash_clientside.no_update;
        if (!IN_PLACE.includes(pathname || '/') || !selected || selected === CUSTOM) return skip;
        const p = new URLSearchParams(search || '');
        const current = (p.get('start') && p.get('end')) ? CUSTOM : (p.get('window') || DEFAULT);
        if (selected === current) return skip;
        const out = new URLSearchParams({window: selected});
        for (const k of ['model', 'cls']) { if (p.get(k)) out.set(k, p.get(k)); }
        return '?' + out.toString();
    }""".replace("IN_PLACE", json.dumps(list(PATHS))).replace("CUSTOM", json.dumps(state.CUSTOM))
    .replace("DEFAULT", json.dumps(state.DEFAULT_WINDOW)),
    Output(ids.URL_SOFT, "search"), Input(ids.WINDOW_SELECT, "value"), State(ids.URL_SOFT, "search"),
    State(ids.URL_SOFT, "pathname"), prevent_initial_call=True,
)


def follow_url(store_id: str, path: str) -> None:
    """Register: the query store `store_id` of the page at `path` takes the browser's query (values as
    the URL has them; the page's data callback validates them with state.from_params, as on a load)."""
    if path not in PATHS:
        raise ValueError(f"{path!r} is not an in-place page: add it to PATHS")
    clientside_callback(
        """function(search, pathname) {
            if ((pathname || '/') !== PATH) return window.dash_clientside.no_update;
            const p = new URLSearchParams(search || '');
            const query = {};
            for (const k of KEYS) { query[k] = p.get(k); }
            return query;
        }""".replace("PATH", json.dumps(path)).replace("KEYS", json.dumps(list(state.KEYS))),
        Output(store_id, "data"), Input(ids.URL_SOFT, "search"), State(ids.URL_SOFT, "pathname"),
        prevent_initial_call=True,
    )
