"""Small building blocks: number formatting (null -> "—" with a "no data" tooltip, never 0), state and
verdict badges (icon + text + a colour-blind-safe colour), KPI cards, and the error / empty / loading states."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import UTC, datetime

import dash_bootstrap_components as dbc
from dash import html, no_update

from backend.schemas import PoolsRead

log = logging.getLogger(__name__)

# Okabe-Ito, safe for the common colour-vision deficiencies
OKABE_ITO = {"orange": "#E69F00", "sky": "#56B4E9", "green": "#009E73", "yellow": "#F0E442", "blue": "#0072B2",
             "vermillion": "#D55E00", "purple": "#CC79A7", "grey": "#999999", "black": "#000000"}
SERIES_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
NO_DATA = "—"
NO_DATA_HINT = "no data"

# Text colours: the Okabe-Ito hues above are too light for text on white (orange 2.2:1), so text and
# badges use a "tone" (CSS class sw-tone-<name>, dashboard/assets/specwatch.css) with a darker shade in
# the light theme and a lighter one in the dark theme, each >= 4.5:1 on the page, card and row colours.
TONES = {OKABE_ITO["green"]: "green", OKABE_ITO["orange"]: "orange", OKABE_ITO["vermillion"]: "vermillion",
         OKABE_ITO["purple"]: "purple", OKABE_ITO["sky"]: "sky", OKABE_ITO["blue"]: "blue", OKABE_ITO["grey"]: "grey"}


def tone(colour: str) -> str:
    """The CSS tone class for an Okabe-Ito colour (grey for any other)."""
    return f"sw-tone-{TONES.get(colour, 'grey')}"


# The one place for state and verdict labels: key -> (icon, text, colour); the text always says it, the
# colour only repeats it. Icons are glyphs DejaVu Sans has (Debian's Chromium falls back to it).
STATES = {
    "healthy": ("✔", "healthy", OKABE_ITO["green"]),
    "below-threshold": ("▼", "below threshold", OKABE_ITO["orange"]),
    "negative-margin": ("✖", "negative margin", OKABE_ITO["vermillion"]),
    "stale": ("◷", "stale", OKABE_ITO["purple"]),
    "no-data": ("∅", "no data", OKABE_ITO["grey"]),
    "low-volume": ("◔", "low volume", OKABE_ITO["sky"]),
}
VERDICTS = {
    "better": ("✔", "better", OKABE_ITO["green"]),
    "worse": ("✖", "worse", OKABE_ITO["vermillion"]),
    "no-significant-change": ("=", "no significant change", OKABE_ITO["grey"]),
    # both quantiles in one histogram bucket: the order is below the resolution (neither better nor no change)
    "unresolved": ("⇅", "unresolved", OKABE_ITO["blue"]),
    "inconclusive": ("?", "inconclusive", OKABE_ITO["sky"]),
}


# --- numbers ------------------------------------------------------------------------------------------

def fmt(value: float | None, spec: str = ".3f", suffix: str = "") -> str:
    """`value` formatted with `spec` (a true minus sign, as the grid's d3-format writes it), or "—" when
    undefined (None / NaN)."""
    if value is None or math.isnan(value):
        return NO_DATA
    text = f"{value:{spec}}"
    return ("−" + text[1:] if text.startswith("-") else text) + suffix


def fmt_rate(v: float | None) -> str:
    return fmt(v, ".3f")


def fmt_tau(v: float | None) -> str:
    return fmt(v, ".2f")


def fmt_speedup(v: float | None) -> str:
    return fmt(v, ".2f", "×")


EPS_SOURCES = {"measured": "measured from ITL vs baseline", "default-for-band": "band default"}


def fmt_eps_step(value: float | None, source: str | None, band: str | None = None) -> str:
    """The step overhead with where it comes from: "ε_step 0.25 (measured from ITL vs baseline)" or
    "ε_step 0.10 (band default, 1-8)"."""
    where = EPS_SOURCES.get(source or "", source or "source unknown")
    if source == "default-for-band" and band:
        where += f", {band}"
    return f"ε_step {fmt(value, '.2f')} ({where})"


def fmt_ms(seconds: float | None, signed: bool = False) -> str:
    return fmt(None if seconds is None else seconds * 1000, "+.1f" if signed else ".1f", " ms")


def _ms_text(seconds: float, signed: bool) -> str:
    """Milliseconds as bucket edges are written: 25, 7.5, 79975; a signed zero is plain "0"."""
    ms = seconds * 1000
    if abs(ms) < 5e-7:
        return "0"
    text = f"{ms:{'+' if signed else ''}.6g}"
    return "−" + text[1:] if text.startswith("-") else text


def fmt_interval(low: float | None, high: float | None) -> str:
    """Where spec − baseline lies, from the verdict's bucket edges: "0 to +25 ms", "≥ +79975 ms"."""
    if low is None and high is None:
        return NO_DATA
    if high is None:
        return f"≥ {_ms_text(low, True)} ms"
    if low is None:
        return f"≤ {_ms_text(high, True)} ms"
    return f"{_ms_text(low, True)} to {_ms_text(high, True)} ms"


def fmt_bucket(low: float | None, high: float | None) -> str:
    """A histogram bucket (low, high] in ms; (low, +Inf) for the overflow bucket."""
    lo = "−Inf" if low is None else _ms_text(low, False)
    return f"({lo} ms, +Inf)" if high is None else f"({lo}, {_ms_text(high, False)}] ms"


def fmt_pct(rel: float | None) -> str:
    return fmt(None if rel is None else rel * 100, "+.0f", " %")


def fmt_count(v: float | None) -> str:
    return fmt(v, ",.0f")


def fmt_duration(seconds: float | None) -> str:
    """'3h05m', as the report's exports write time in alert."""
    if seconds is None:
        return NO_DATA
    h, rem = divmod(round(seconds), 3600)
    return f"{h}h{rem // 60:02d}m"


def fmt_time(dt: datetime | None, now: datetime | None = None) -> str:
    """'10:42 UTC' today, 'Nov 29 10:42 UTC' on another day."""
    if dt is None:
        return NO_DATA
    dt = dt.astimezone(UTC)
    now = (now or datetime.now(UTC)).astimezone(UTC)
    return dt.strftime("%H:%M UTC" if dt.date() == now.date() else "%b %d %H:%M UTC")


def value(text: str, *, id: str | None = None, hint: str | None = None, cls: str = "") -> html.Span:
    """A displayed value; "—" carries the tooltip "no data"."""
    kw = {"id": id} if id else {}
    if text == NO_DATA:
        return html.Span(NO_DATA, title=NO_DATA_HINT, className=f"sw-nodata {cls}".strip(), **kw)
    return html.Span(text, title=hint, className=cls or None, **kw)


# --- badges -------------------------------------------------------------------------------------------

def badge(icon: str, text: str, colour: str) -> html.Span:
    """Icon + text in a pill; the tone gives the text a colour with AA contrast in both themes."""
    return html.Span([html.Span(icon, **{"aria-hidden": "true"}), f" {text}"], className=f"sw-badge {tone(colour)}",
                     title=text)


def _badge(table: dict, key: str | None, extra: str = "") -> html.Span:
    icon, text, colour = table.get(key or "", ("∅", key or NO_DATA_HINT, OKABE_ITO["grey"]))
    return badge(icon, f"{text}{extra}", colour)


def label(table: dict, key: str | None) -> str:
    """'icon text' of a state or verdict ("—" for none), as the grids show it."""
    if key is None:
        return NO_DATA
    icon, text, _ = table.get(key, ("∅", key, OKABE_ITO["grey"]))
    return f"{icon} {text}"


def tone_rules(table: dict, condition: Callable[[str, str], str]) -> dict[str, str]:
    """AG Grid cellClassRules giving each cell the tone of its state/verdict: {class: JS condition}, the
    conditions of keys sharing a tone joined with ||. `condition(key, text)` writes one key's test."""
    rules: dict[str, list[str]] = {}
    for key, (_, text, colour) in table.items():
        rules.setdefault(tone(colour), []).append(f"({condition(key, text)})")
    return {cls: " || ".join(conds) for cls, conds in rules.items()}


def info_icon() -> html.Span:
    """An (i) drawn in CSS (.sw-info): the circled-i character is missing from the fonts of Debian's Chromium."""
    return html.Span("i", className="sw-info", **{"aria-hidden": "true"})


def state_badge(state: str | None, threshold: float | None = None) -> html.Span:
    return _badge(STATES, state, f" {threshold:.2f}" if state == "below-threshold" and threshold else "")


def verdict_badge(verdict: str | None, reason: str | None = None) -> html.Span:
    """The verdict's icon and text; its one-line reason (when given) as the tooltip."""
    badge = _badge(VERDICTS, verdict)
    if reason:
        badge.title = reason
    return badge


# --- cards and states ---------------------------------------------------------------------------------

def kpi(label: str, text: str, *, id: str | None = None, hint: str | None = None,
        sub: str | list | None = None) -> dbc.Card:
    body = [html.Div(label, className="sw-kpi-label", title=hint), html.Div(value(text, id=id, hint=hint),
                                                                            className="sw-kpi-value")]
    if sub:
        body.append(html.Div(sub, className="sw-kpi-sub"))
    return dbc.Card(dbc.CardBody(body), className="sw-kpi")


def kpi_row(cards: list[dbc.Card]) -> dbc.Row:
    return dbc.Row([dbc.Col(c, xs=6, md=4, lg=2) for c in cards], className="g-2 mb-3")


def error_state(message: str, *, retrying: bool = True) -> dbc.Alert:
    """The backend is unreachable: say so, plainly, never with a traceback."""
    text = "backend unreachable — retrying" if retrying else "backend unreachable"
    return dbc.Alert([html.Span("⚠ ", **{"aria-hidden": "true"}), html.Strong(text),
                      html.Span(f" ({message})", className="sw-muted")],
                     color="warning", className="sw-error", id="sw-error-banner")


def request_error(detail: str) -> dbc.Alert:
    """The API refused the request (unknown model, bad window)."""
    return dbc.Alert([info_icon(), detail], color="info", className="sw-refused")


def empty_state(what: str, last_seen: datetime | None, *, window_label: str | None = None) -> dbc.Alert:
    """'no data for <what> since 10:42' (or 'never reported')."""
    since = f"since {fmt_time(last_seen)}" if last_seen else "— it never reported"
    extra = f" (window: {window_label})" if window_label else ""
    return dbc.Alert([html.Span("∅ ", **{"aria-hidden": "true"}), f"no data for {what} {since}{extra}"],
                     color="secondary", className="sw-empty")


def updated(generated_at: datetime | None, window_label: str, reads=None) -> html.Span:
    """The window and when its numbers were computed; with a read replica (`reads`, backend.schemas.ReadsRead),
    how far behind the primary the standby that served them is, or that the primary served them instead."""
    text = f"{window_label} · updated {fmt_time(generated_at)}"
    if reads is not None and reads.reads_from == "standby":
        lag = "lag unknown" if reads.lag_seconds is None else f"{reads.lag_seconds:.0f} s behind the primary"
        text += f" · read from the standby, {lag}"
    elif reads is not None:
        text += " · standby unavailable, read from the primary"
    return html.Span(text, className="sw-muted sw-updated")


def guarded(render: Callable[[], tuple], *, n_outputs: int) -> tuple:
    """Run a page's render, which returns (status, retry_disabled, *outputs). On ApiUnavailable: the error
    banner, the retry timer on, and the outputs left as they were (the last numbers stay visible under the
    banner); on ApiError (4xx): its message; on a bug: a short message, the traceback only in the log."""
    from dashboard.api_client import ApiError, ApiUnavailable

    try:
        return render()
    except ApiUnavailable as exc:
        return (error_state(str(exc)), False, *([no_update] * (n_outputs - 2)))
    except ApiError as exc:
        return (request_error(exc.detail), True, *([no_update] * (n_outputs - 2)))
    except Exception as exc:
        log.exception("dashboard render failed")
        return (dbc.Alert(f"dashboard error ({type(exc).__name__}); see the dashboard log", color="danger"), True,
                *([no_update] * (n_outputs - 2)))


# --- model choice (acceptance and model pages) ----------------------------------------------------------

def spec_models(pools: PoolsRead) -> list[str]:
    """Models with at least one speculative (non-baseline) pool: those still reporting first, then by name."""
    fresh: dict[str, bool] = {}
    for p in pools.pools:
        if not p.is_baseline:
            fresh[p.model_name] = fresh.get(p.model_name, False) or not p.stale
    return sorted(fresh, key=lambda m: (not fresh[m], m))


def pick(options: list[str], wanted: str | None) -> str | None:
    return wanted if wanted in options else (options[0] if options else None)


def search_with(search: str | None, **changes: str | None):
    """The URL query with `changes` applied, or no_update when nothing changes (no needless re-render)."""
    from dashboard import state

    view = state.parse_search(search)
    new = view.with_(**changes)
    return no_update if new == view or not any(changes.values()) else state.to_search(new)


def chart(id: str, title: str, hint: str | None = None, figure=None) -> html.Div:
    """A graph under an HTML heading (it wraps on a phone; a plotly title is clipped there)."""
    from dash import dcc

    from dashboard import figures

    heading = html.Span(title, title=hint, className="sw-help") if hint else title
    return html.Div([html.H6(heading, className="sw-chart-title"),
                     dcc.Graph(id=id, figure=figure or figures.empty("loading…"), config={"displaylogo": False})],
                    className="sw-section sw-chart")


def select(id: str, label: str, options: list[str], value: str | None, width: str = "16rem") -> html.Div:
    from dash import dcc

    return html.Div([html.Label(label, htmlFor=id, className="sw-nav-label"),
                     dcc.Dropdown(id=id, options=options, value=value, clearable=False,
                                  style={"width": width})], className="d-flex align-items-center gap-1")


# --- tables that stack on a phone -----------------------------------------------------------------------

def text_of(node) -> str:
    """The visible text of a component tree (a header cell's label)."""
    if node is None:
        return ""
    if isinstance(node, str | int | float):
        return str(node)
    if isinstance(node, list | tuple):
        return "".join(text_of(n) for n in node)
    return text_of(getattr(node, "children", None))


def _parts(node, kind: type) -> list:
    children = getattr(node, "children", None)
    children = children if isinstance(children, list | tuple) else [children]
    return [ch for ch in children if isinstance(ch, kind)]


def stacked(table):
    """`table` (an html.Table or dbc.Table with a Thead and a Tbody) made to stack on a phone: below 768 px
    (CSS .sw-stack) each row is a card and each cell shows its column's name (data-label, from the header)
    beside its value, so no column needs sideways scrolling; at desktop widths it stays a table."""
    heads = [text_of(th) for thead in _parts(table, html.Thead) for tr in _parts(thead, html.Tr)
             for th in _parts(tr, html.Th)]
    for tbody in _parts(table, html.Tbody):
        for tr in _parts(tbody, html.Tr):
            for i, td in enumerate(_parts(tr, html.Td)):
                if i < len(heads) and heads[i]:
                    setattr(td, "data-label", heads[i])
    table.className = f"{getattr(table, 'className', None) or ''} sw-stack".strip()
    return table
