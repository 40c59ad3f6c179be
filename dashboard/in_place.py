"""Window changes in place: on these pages the window control moves the browser's URL through ids.URL_SOFT
(`dcc.Location(refresh=False)`) instead of navigating, and the page's query store follows that URL in the
browser. Dash pages then neither re-renders the page nor remounts its grid and charts; the page's own data
callback is the one server round trip. Back/forward move ids.URL_SOFT too, so they work the same way."""

from __future__ import annotations

import json

from dash import Input, Output, State, clientside_callback

from dashboard import ids, state

PATHS = ("/", "/acceptance", "/model")

# The window control's choice: on an in-place page a duration moves the browser's URL itself (no round trip to
# the server; the same rule as dashboard.app.window_sync's for a selected duration: drop start/end, keep model,
# class and spec mode); anything else ("custom", which waits for "apply", and any choice on the other pages) goes
# to the server's window sync through ids.WINDOW_PICK. The control never feeds a server callback directly: Dash holds
# back every callback downstream of one in flight, so a server callback on the control would delay the page's
# data callback by a round trip.
clientside_callback(
    """function(selected, search, pathname) {
        const skip = window.dash_clientside.no_update;
        const p = new URLSearchParams(search || '');
        const current = (p.get('start') && p.get('end')) ? CUSTOM : (p.get('window') || DEFAULT);
        if (!selected || selected === current) return [skip, skip];
        if (!IN_PLACE.includes(pathname || '/') || selected === CUSTOM) return [skip, {window: selected, at: Date.now()}];
        const out = new URLSearchParams({window: selected});
        for (const k of ['model', 'cls', 'mode']) { if (p.get(k)) out.set(k, p.get(k)); }
        return ['?' + out.toString(), skip];
    }""".replace("IN_PLACE", json.dumps(list(PATHS))).replace("CUSTOM", json.dumps(state.CUSTOM))
    .replace("DEFAULT", json.dumps(state.DEFAULT_WINDOW)),
    Output(ids.URL_SOFT, "search"), Output(ids.WINDOW_PICK, "data"), Input(ids.WINDOW_SELECT, "value"),
    State(ids.URL_SOFT, "search"), State(ids.URL_SOFT, "pathname"), prevent_initial_call=True,
)

# The control follows the browser's URL when ids.URL_SOFT moves (an in-place change, back/forward), in the
# browser: dashboard.state.from_params's rule (start < end: custom; else a duration, or the default). A load
# or a navigation also moves ids.URL, whose server sync (dashboard.app.sync_window) sets the same values.
clientside_callback(
    """function(search, selected) {
        const skip = window.dash_clientside.no_update;
        const iso = (v) => {  // dashboard.state._iso: ISO-8601, naive = UTC -> 'YYYY-MM-DDTHH:MM:SSZ'; null if invalid
            const m = /^(\\d{4})-(\\d{2})-(\\d{2})(?:[T ](\\d{2}):(\\d{2})(?::(\\d{2})(?:\\.\\d{1,6})?)?)?(Z|[+-]\\d{2}:\\d{2})?$/.exec(v || '');
            if (!m) return null;
            const f = [+m[1], +m[2] - 1, +m[3], +(m[4] || 0), +(m[5] || 0), +(m[6] || 0)];
            const d = new Date(Date.UTC(...f));
            const back = [d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes(),
                          d.getUTCSeconds()];
            if (m[4] === undefined && m[7]) return null;
            if (back.some((x, i) => x !== f[i])) return null;
            let t = d.getTime();
            if (m[7] && m[7] !== 'Z') {
                const sign = m[7][0] === '-' ? -1 : 1;
                t -= sign * (+m[7].slice(1, 3) * 60 + +m[7].slice(4, 6)) * 60000;
            }
            return new Date(t).toISOString().slice(0, 19) + 'Z';
        };
        const p = new URLSearchParams(search || '');
        const start = iso(p.get('start')), end = iso(p.get('end'));
        const custom = !!(start && end && start < end);
        let shown = custom ? CUSTOM : (p.get('window') || DEFAULT);
        if (!custom && !/^\\d+[smhd]$/.test(shown)) shown = DEFAULT;
        if (selected === CUSTOM && !custom) return [skip, {display: 'flex'}, skip, skip];
        return [shown === selected ? skip : shown, {display: custom ? 'flex' : 'none'},
                custom ? start.slice(0, 16) : skip, custom ? end.slice(0, 16) : skip];
    }""".replace("CUSTOM", json.dumps(state.CUSTOM)).replace("DEFAULT", json.dumps(state.DEFAULT_WINDOW)),
    Output(ids.WINDOW_SELECT, "value", allow_duplicate=True), Output(ids.CUSTOM_BOX, "style", allow_duplicate=True),
    Output(ids.CUSTOM_START, "value", allow_duplicate=True), Output(ids.CUSTOM_END, "value", allow_duplicate=True),
    Input(ids.URL_SOFT, "search"), State(ids.WINDOW_SELECT, "value"), prevent_initial_call=True,
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
