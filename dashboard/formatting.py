"""How values and states read as text, and their colours: numbers (null -> "—", never 0; a true minus
sign), times and durations, the state and verdict labels (icon, words, colour-blind-safe colour) and a fleet
row's state in words. No Dash here: the charts (dashboard.figures) and the building blocks
(dashboard.components) both use it."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime

from backend.domain import wording
from backend.schemas.fleet import FleetAlertRead, FleetRowRead

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


def fmt_with_interval(value: float | None, interval: list | None, fmt: Callable = fmt_rate) -> str:
    """A value with its 95 % interval: "0.412 (0.380–0.441)"; a single request has none."""
    low, high = interval if interval else (None, None)
    if value is None:
        return NO_DATA
    if low is None or high is None:
        return f"{fmt(value)} (one request: no interval)"
    return f"{fmt(value)} ({fmt(low)}–{fmt(high)})"
