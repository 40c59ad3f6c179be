"""Small building blocks: number formatting (null -> "—" with a "no data" tooltip, never 0), state and
verdict badges (icon + text + a colour-blind-safe colour), KPI cards, and the error / empty / loading states."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import UTC, datetime

import dash_bootstrap_components as dbc
from dash import html, no_update

from backend.domain import wording
from backend.domain.engines.wording import is_words
from backend.schemas.fleet import FleetAlertRead, FleetRowRead
from backend.schemas.pools import PoolsRead
from backend.schemas.summary import MIXED, SummaryRead

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
    # a pending or firing alert of the row's pool: above anything the window's numbers say
    "firing": ("▲", "firing", OKABE_ITO["vermillion"]),  # as the alerts page and banner say it
    "pending": ("◎", "pending", OKABE_ITO["orange"]),
    "healthy": ("✔", "healthy", OKABE_ITO["green"]),
    "below-threshold": ("▼", "below threshold", OKABE_ITO["orange"]),
    "negative-margin": ("✖", "speedup below 1×", OKABE_ITO["vermillion"]),  # the business margin, as margin-negative
    "stale": ("◷", "stale", OKABE_ITO["purple"]),
    "no-data": ("∅", "no data", OKABE_ITO["grey"]),
    "low-volume": ("◔", "low volume", OKABE_ITO["sky"]),
    # no exact counts, only an engine's estimate (SGLang's gauges): shown, never judged against a threshold
    "estimated": ("≈", "estimated only", OKABE_ITO["blue"]),
}
# The verdict's words come from backend.domain.wording (the report's exports and the digest use the same);
# the API's values (the keys) stay as they are.
_VERDICT_LOOK = {
    "better": ("✔", OKABE_ITO["green"]),
    "worse": ("✖", OKABE_ITO["vermillion"]),
    "no-significant-change": ("=", OKABE_ITO["grey"]),
    # both quantiles in one histogram bucket: the order is below the resolution (neither better nor no change)
    "unresolved": ("⇅", OKABE_ITO["blue"]),
    "inconclusive": ("?", OKABE_ITO["sky"]),
}
VERDICTS = {k: (icon, wording.verdict_text(k), colour) for k, (icon, colour) in _VERDICT_LOOK.items()}


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


def fmt_delta_ms(seconds: float | None) -> str:
    """A latency delta spec − baseline (the P99 ITL / TPOT Δ) as the overview grid writes it (its
    ZERO_MS formatter): signed, 0.1 ms, true minus; a delta that rounds to zero reads "0.0 ms"."""
    if seconds is not None and not math.isnan(seconds) and abs(seconds * 1000) < 0.05:
        return "0.0 ms"
    return fmt_ms(seconds, signed=True)


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


def fmt_window(seconds: float | None) -> str:
    """A rule window as its messages say it: 5m, 2m, 1h, 20s."""
    if seconds is None:
        return NO_DATA
    s = int(seconds)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n and s % n == 0:
            return f"{s // n}{unit}"
    return f"{s}s"


def alert_text(alert: FleetAlertRead) -> str:
    """One alert of a row, as the row says it: the rule and the value it compared vs its threshold."""
    v, t = alert.value, alert.threshold
    if alert.kind == "stale_data":
        numbers = f"{fmt_duration(v)} old vs {fmt_window(t)}" if v is not None else "no data"
    elif alert.kind == "latency_regression":
        numbers = "P99 worse"
    elif v is None and t is None:
        numbers = ""
    else:
        spec = ".2f" if alert.kind == "margin_negative" else ".3f"
        numbers = f"{fmt(v, spec)} vs {fmt(t, spec)}"
    return f"{alert.rule} {numbers}".strip()


def row_state_text(row: FleetRowRead) -> str:
    """A fleet row's state in words after its label: the alert's rule and value vs threshold (and how many
    more alerts), or the row's own threshold when below it."""
    if row.alerts:
        more = len(row.alerts) - 1
        return ": " + alert_text(row.alerts[0]) + (f" +{more}" if more else "")  # the others: on hover / tap
    if row.state == "below-threshold" and row.alpha_threshold is not None:
        return f" {row.alpha_threshold:.2f}"
    return ""


def row_state_title(row: FleetRowRead) -> str:
    """The hover / tap text of a row's state: every alert with its windows and since when."""
    if not row.alerts:
        if row.state == "below-threshold" and row.alpha_threshold is not None:
            return f"acceptance rate below this class's alpha_low threshold {row.alpha_threshold:.2f}"
        return label(STATES, row.state)
    return "; ".join(f"{a.state}: {alert_text(a)}" + (f" ({a.window})" if a.window else "")
                     + (f" since {fmt_time(a.since)}" if a.since else "") for a in row.alerts)


def row_state_label(row: FleetRowRead) -> str:
    """'icon text' of a fleet row's state with its detail, as the grid shows it."""
    return label(STATES, row.state) + row_state_text(row)


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
    from dashboard.api_client import ApiError, ApiUnavailable

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
    from dashboard.api_client import ApiError, ApiUnavailable

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
    from dashboard import state

    view = state.parse_search(search)
    new = view.with_(**changes)
    return no_update if new == view or not any(changes.values()) else state.to_search(new)


def search_with_mode(search: str | None, model: str | None, mode: str | None, *, model_changed: bool,
                     mode_changed: bool, options: list | None = None, **changes: str | None):
    """The URL query after a model or spec-mode pick: a new model drops the old model's mode (the page then
    shows the new model's default); a mode picked on its own is kept. The default mode (the first of the
    picker's `options`, the busiest) is not written when the URL names none: the page's own draw never
    navigates, so its data callback runs once."""
    from dashboard import state

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
