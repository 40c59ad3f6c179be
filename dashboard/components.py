"""Small building blocks: values ("—" with a "no data" tooltip), state and verdict badges (icon + text + a
colour-blind-safe colour), KPI cards, charts and selects, the error / empty / loading states, and the
model / mode selection a page's URL carries. How values read as text: dashboard.formatting."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

import dash_bootstrap_components as dbc
from dash import dcc, html, no_update

from backend.domain import wording
from backend.domain.engines.wording import is_words
from backend.schemas.fleet import FleetRowRead
from backend.schemas.pools import PoolsRead
from backend.schemas.summary import MIXED, SummaryRead
from dashboard import state
from dashboard.api_client import ApiError, ApiUnavailable
from dashboard.formatting import (
    NO_DATA,
    NO_DATA_HINT,
    OKABE_ITO,
    STATES,
    VERDICTS,
    fmt_time,
    row_state_text,
    row_state_title,
    tone,
)

log = logging.getLogger(__name__)


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


def info_icon() -> html.Span:
    """An (i) drawn in CSS (.sw-info): the circled-i character is missing from the fonts of Debian's Chromium."""
    return html.Span("i", className="sw-info", **{"aria-hidden": "true"})


def state_badge(state: str | None, threshold: float | None = None) -> html.Span:
    return _badge(STATES, state, f" {threshold:.2f}" if state == "below-threshold" and threshold else "")


def row_state_badge(row: FleetRowRead) -> html.Span:
    """A fleet row's state badge: icon, colour and text naming the alert (or the class's threshold)."""
    out = _badge(STATES, row.state, row_state_text(row))
    out.title = row_state_title(row)
    return out


def row_alert_alpha(row: FleetRowRead) -> tuple[float | None, float | None]:
    """The short-window alpha of the row's first alert that has one (alpha_low), and that window's seconds."""
    a = next((a for a in row.alerts if a.alpha_short is not None), None)
    return (a.alpha_short, a.short_window_seconds) if a else (None, None)


def verdict_reason(verdict: str | None, reason: str | None = None) -> str:
    """What the verdict means, then its own one-line reason: the text behind a verdict on hover and tap."""
    return wording.verdict_meaning(verdict, reason)


def verdict_badge(verdict: str | None, reason: str | None = None, *, id: str | None = None):
    """The verdict's icon and words in a native disclosure: the meaning and the one-line reason are the
    tooltip on hover and open in text on a tap, Enter or Space (a title alone never shows on a phone)."""
    badge = _badge(VERDICTS, verdict)
    why = verdict_reason(verdict, reason)
    if not why:
        return badge
    badge.title = why
    kw = {"id": id} if id else {}
    return html.Details([html.Summary(badge, title=why, className="sw-why-summary"),
                         html.Div(why, className="sw-why-text")], className="sw-why", **kw)


# --- cards and states ---------------------------------------------------------------------------------

def kpi(label: str, text: str, *, id: str | None = None, hint: str | None = None,
        sub: str | list | None = None) -> dbc.Card:
    words = isinstance(text, str) and is_words(text)  # "not exposed by SGLang": wraps on a phone
    body = [html.Div(label, className="sw-kpi-label", title=hint),
            html.Div(value(text, id=id, hint=hint), className="sw-kpi-value" + (" sw-kpi-words" if words else ""))]
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
    """The API refused the request (unknown model, bad window): `detail` is a sentence for the user (for an
    ApiError, `refusal(exc)`)."""
    return dbc.Alert([info_icon(), detail], color="info", className="sw-refused")


def _names(known: list[str], limit: int = 8) -> str:
    shown = ", ".join(known[:limit])
    return shown + (f" and {len(known) - limit} more" if len(known) > limit else "")


def refusal(exc) -> str:
    """An API refusal (dashboard.api_client.ApiError) as a sentence with a way forward. The API's `code` says
    what was refused; its message, written for API callers ("pass spec_mode"), is shown only where it is the
    reason itself (a window or a value the API cannot take)."""
    known = list(getattr(exc, "known", None) or [])
    code, status, detail = getattr(exc, "code", None), getattr(exc, "status", 0), getattr(exc, "detail", "")
    if code == "spec_mode_required":
        modes = f" ({_names(known)})" if known else ""
        count = f"{len(known)} spec modes" if known else "several spec modes"
        return f"This model runs {count}{modes}: pick one above to see its numbers."
    if code == "unknown_spec_mode":
        return "The model does not run that spec mode" + (f"; it runs {_names(known)}" if known else "") + \
            ": pick one above."
    if code == "unknown_traffic_class":
        return "The model has no traffic class of that name" + \
            (f"; its classes are {_names(known)}" if known else "") + ": pick one above."
    if code == "unknown_model":
        return "specwatch has no model of that name" + (f"; it knows {_names(known)}" if known else "") + \
            ": pick one above."
    if code == "no_spec_pool":
        return "This model has only baseline pools (no speculative decoding to show): pick another model above."
    if code == "invalid_window":
        return f"This window cannot be shown ({detail}): pick another window above."
    if status == 401:
        return "This needs you to log in (or a viewer token for the dashboard)."
    if status == 403:
        return "Your role may not see this: ask an admin for a token with the viewer role or above."
    if status == 404:
        return "The API has no answer at this address: the backend may be older than the dashboard."
    if status == 413:
        return "That is more than the API takes in one request: ask for less."
    if status == 422 and detail:
        return f"The API cannot answer this: {detail}."
    return f"The API refused this request (HTTP {status}): try another window or model."


def empty_state(what: str, last_seen: datetime | None, *, window_label: str | None = None) -> dbc.Alert:
    """'no data for <what> since 10:42' (or 'never reported')."""
    since = f"since {fmt_time(last_seen)}" if last_seen else "— it never reported"
    extra = f" (window: {window_label})" if window_label else ""
    return dbc.Alert([html.Span("∅ ", **{"aria-hidden": "true"}), f"no data for {what} {since}{extra}"],
                     color="secondary", className="sw-empty")


def data_age(generated_at: datetime | None, now: datetime | None = None) -> str:
    """'just now', '4 min ago', '2 h 5 min ago': how old the numbers shown are."""
    if generated_at is None:
        return "age unknown"
    secs = ((now or datetime.now(UTC)) - generated_at).total_seconds()
    if secs < 60:
        return "just now"
    minutes = round(secs / 60)
    h, m = divmod(minutes, 60)
    return (f"{h} h {m} min" if h and m else f"{h} h" if h else f"{m} min") + " ago"


def updated(generated_at: datetime | None, window_label: str, reads=None, now: datetime | None = None) -> html.Span:
    """The window and when its numbers were computed, with their age (a precomputed snapshot can be
    minutes older than the page: 'computed 20:21 UTC, 4 min ago' at 20:25); with a read replica (`reads`,
    backend.schemas.common.ReadsRead), how far behind the primary the standby that served them is, or that the
    primary served them instead."""
    text = f"{window_label} · computed {fmt_time(generated_at)}, {data_age(generated_at, now)}"
    if reads is not None and reads.reads_from == "standby":
        lag = "lag unknown" if reads.lag_seconds is None else f"{reads.lag_seconds:.0f} s behind the primary"
        text += f" · read from the standby, {lag}"
    elif reads is not None:
        text += " · standby unavailable, read from the primary"
    return html.Span(text, className="sw-muted sw-updated", title="when the API computed these numbers; the page "
                     "asks again at each auto-refresh")


def guarded(render: Callable[[], tuple], *, n_outputs: int,
            blank: Callable[[str], dict[int, object]] | None = None) -> tuple:
    """Run a page's render, which returns (status, retry_disabled, *outputs). On ApiUnavailable: the error
    banner, the retry timer on, and the outputs left as they were (the last numbers stay visible under the
    banner); on ApiError (4xx): the refusal as a sentence (`refusal`); on a bug: a short message, the
    traceback only in the log. `blank(sentence)` gives outputs to replace when the page cannot be drawn
    ({output index: value}, e.g. a chart saying why): nothing is left on "loading…"."""
    def outputs(sentence: str | None) -> list:
        out = [no_update] * (n_outputs - 2)
        for i, v in (blank(sentence) if blank and sentence else {}).items():
            out[i - 2] = v
        return out

    try:
        return render()
    except ApiUnavailable as exc:
        return (error_state(str(exc)), False, *outputs(None))
    except ApiError as exc:
        sentence = refusal(exc)
        return (request_error(sentence), True, *outputs(sentence))
    except Exception as exc:
        log.exception("dashboard render failed")
        return (dbc.Alert(f"This page could not be drawn ({type(exc).__name__}); the dashboard log has the "
                          "details. Try another window or model.", color="danger", className="sw-page-fault"),
                True, *outputs("This chart could not be drawn: the dashboard log has the details."))


# --- model choice (acceptance and model pages) ----------------------------------------------------------

def spec_models(pools: PoolsRead) -> list[str]:
    """Models with at least one speculative (non-baseline) pool: those still reporting first, then by name."""
    fresh: dict[str, bool] = {}
    for p in pools.pools:
        if not p.is_baseline:
            fresh[p.model_name] = fresh.get(p.model_name, False) or not p.stale
    return sorted(fresh, key=lambda m: (not fresh[m], m))


def models_anyway(client, wanted: str | None) -> dict[int, object]:
    """For a refused page: the model picker's options and value (outputs 2 and 3), so it is filled even when
    the page's numbers cannot be shown; {} when the pools cannot be read either."""
    try:
        models = spec_models(client.pools())
    except (ApiError, ApiUnavailable):
        return {}
    return {2: models, 3: pick(models, wanted)}


def pick(options: list[str], wanted: str | None) -> str | None:
    return wanted if wanted in options else (options[0] if options else None)


def spec_modes(summary: SummaryRead) -> list[str]:
    """The spec modes of a model's summary (the baseline is never one: the summary has spec classes only):
    modes still reporting first, then the one with the most drafts in the window (its pooled mix, else its
    classes summed), then by name."""
    drafts: dict[str, float] = {}
    mixed: dict[str, float] = {}
    fresh: dict[str, bool] = {}
    for k in summary.classes:
        n = k.volume.drafts or 0.0
        fresh[k.spec_mode] = fresh.get(k.spec_mode, False) or not k.freshness.stale
        if k.traffic_class == MIXED:
            mixed[k.spec_mode] = n
        else:
            drafts[k.spec_mode] = drafts.get(k.spec_mode, 0.0) + n
    for mode, n in mixed.items():
        drafts[mode] = n or drafts.get(mode, 0.0)
    return sorted(drafts, key=lambda m: (not fresh[m], -drafts[m], m))


def pick_mode(summary: SummaryRead, wanted: str | None) -> str | None:
    """The spec mode to show: the one asked for when the model runs it, else the one with the most drafts."""
    return pick(spec_modes(summary), wanted)


def for_mode(summary: SummaryRead, mode: str | None) -> SummaryRead:
    """The summary with only `mode`'s classes (and its mix): one row per class name."""
    return summary.model_copy(update={"classes": [k for k in summary.classes if k.spec_mode == mode]})


def mode_note(modes: list[str], mode: str | None) -> html.Div | None:
    """Under the pickers when a model runs several spec modes: which one is shown, and how to see the others."""
    if len(modes) < 2 or mode is None:
        return None
    others = ", ".join(m for m in modes if m != mode)
    return html.Div(f"This model runs {len(modes)} spec modes: showing {mode}; pick {others} under "
                    "“spec mode” above to see it.", className="sw-muted mb-1 sw-mode-note")


def source_note(row) -> html.Div | None:
    """Under the pickers when the shown class is read from per-request records (the engine does not label
    it): says so, with the share of the engine's draft tokens the records describe."""
    if getattr(row, "source", "engine") != "records":
        return None
    cov = row.records_coverage
    share = (f"; they describe {cov:.0%} of this spec mode's draft tokens the engine counted" if cov is not None
             else "; no engine counters of this spec mode to compare with")
    return html.Div(f"{row.traffic_class}: counts from per-request records (the engine does not label this "
                    f"class){share}.", className="sw-muted mb-1 sw-source-note")


def search_with(search: str | None, **changes: str | None):
    """The URL query with `changes` applied, or no_update when nothing changes (no needless re-render)."""
    view = state.parse_search(search)
    new = view.with_(**changes)
    return no_update if new == view or not any(changes.values()) else state.to_search(new)


def search_with_mode(search: str | None, model: str | None, mode: str | None, *, model_changed: bool,
                     mode_changed: bool, options: list | None = None, **changes: str | None):
    """The URL query after a model or spec-mode pick: a new model drops the old model's mode (the page then
    shows the new model's default); a mode picked on its own is kept. The default mode (the first of the
    picker's `options`, the busiest) is not written when the URL names none: the page's own draw never
    navigates, so its data callback runs once."""
    first = (options or [None])[0]
    default = first.get("value") if isinstance(first, dict) else first
    view = state.parse_search(search)
    new: dict[str, str | None] = {k: v for k, v in changes.items() if v}
    if model_changed and model and model != view.model:
        new.update(model=model, mode=mode if mode_changed and mode != default else None)
    elif mode_changed and mode and not (view.mode is None and mode == default):
        new["mode"] = mode
    changed = view.with_(**new)
    return no_update if changed == view else state.to_search(changed)


def page_head(title: str, *selects, query: tuple[str, dict], retry: str) -> list:
    """A page's first rows: the store of its query (the URL's view), its retry timer (on after an error) and
    its heading with the pickers beside it (they wrap under it on a phone)."""
    return [dcc.Store(id=query[0], data=query[1]), dcc.Interval(id=retry, interval=5000, disabled=True),
            html.Div([html.H4(title, className="mb-0 me-3"), *selects],
                     className="d-flex align-items-center flex-wrap gap-2 mb-1")]


def section(title: str, title_id: str, body_id: str) -> html.Section:
    """A titled section whose body loads on its own (a spinner while it does)."""
    return html.Section([html.H5(title, className="sw-chart-title", id=title_id),
                         dcc.Loading(html.Div(id=body_id), type="dot", delay_show=300)],
                        className="sw-section", **{"aria-labelledby": title_id})


def select(id: str, label: str, options: list[str], value: str | None, width: str = "16rem") -> html.Div:
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
    beside its value, so no column needs sideways scrolling; at desktop widths it stays a table. A cell is
    paired with the header of its own position among the row's cells (a row header <th> counts), and a
    cell that already names its label (data-label, set where the value is made) keeps it."""
    heads = [text_of(th) for thead in _parts(table, html.Thead) for tr in _parts(thead, html.Tr)
             for th in _parts(tr, html.Th)]
    for tbody in _parts(table, html.Tbody):
        for tr in _parts(tbody, html.Tr):
            for i, cell in enumerate(_parts(tr, html.Td | html.Th)):
                if i < len(heads) and heads[i] and getattr(cell, "data-label", None) is None:
                    setattr(cell, "data-label", heads[i])
    table.className = f"{getattr(table, 'className', None) or ''} sw-stack".strip()
    return table
