"""The names of the three savings (domain.capacity) and money in its currency: every surface labels the
figures with these constants and formats amounts with ``money_text`` in the configured currency
(``check_currency``)."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence

SAVED_IN_WINDOW = "saved in this window"
PER_WEEK_AT_WINDOW_RATE = "per week at this window's rate"
SAVED_WEEK_SO_FAR = "saved this week so far"
DEFAULT_CURRENCY = "USD"
_ISO_CURRENCY = re.compile(r"^[A-Z]{3}$", re.ASCII)


def hours_of_data(seconds: Sequence[float | None]) -> float | None:
    """The hours of data a saving rests on: the longest coverage (bucket-seconds that reported output tokens)
    of the spec pools whose saving it sums (pools are collected side by side, so their coverage overlaps).
    No coverage known -> ``None``."""
    have = [float(s) for s in seconds if s is not None and math.isfinite(s) and s > 0]
    return max(have) / 3600.0 if have else None


def hours_text(hours: float | None) -> str:
    """'3 h', '2.5 h', '0.3 h': one decimal at most, never a trailing '.0'; ``None`` -> 'n/a h'."""
    if hours is None:
        return "n/a h"
    text = f"{hours:.1f}".rstrip("0").rstrip(".") if hours < 100 else f"{hours:.0f}"
    return f"{text} h"


def saved_week_label(hours: float | None) -> str:
    """'saved this week so far (3 h of data)': the weekly report's figure, named with the data it rests on."""
    return f"{SAVED_WEEK_SO_FAR} ({hours_text(hours)} of data)"


def check_currency(text: str) -> str:
    """A 3-letter ISO 4217 code (any case, returned upper-case) or a short currency symbol (1-3 characters
    with at least one currency sign, no digits or spaces: '$', '€', 'US$', 'R$'); anything else -> ValueError."""
    t = str(text).strip()
    if t.isascii() and t.isalpha() and len(t) == 3:
        return t.upper()
    if 1 <= len(t) <= 3 and any(unicodedata.category(ch) == "Sc" for ch in t) and not any(
            ch.isdigit() or ch.isspace() for ch in t):
        return t
    raise ValueError(f"currency {text!r}: expected a 3-letter ISO 4217 code such as USD or EUR, or a short "
                     "currency symbol such as $ or €")


def money_text(amount: float | None, currency: str, *, none: str = "n/a") -> str:
    """One amount in the configured currency: '1,234.56 USD' for a code, '$1,234.56' / '-$3.20' for a symbol;
    ``None`` -> ``none`` (undefined is never 0)."""
    if amount is None or not math.isfinite(amount):
        return none
    digits = f"{abs(amount):,.2f}"
    sign = "-" if amount < 0 and digits.strip("0.,") else ""  # -0.001 reads 0.00, never -0.00
    return f"{sign}{digits} {currency}" if _ISO_CURRENCY.match(currency) else f"{sign}{currency}{digits}"


def interval_text(low: float | None, high: float | None, currency: str, *, none: str = "n/a") -> str:
    """'3.47 USD to 23.47 USD': a money interval; either end undefined -> ``none``."""
    if low is None or high is None:
        return none
    return f"{money_text(low, currency)} to {money_text(high, currency)}"


def saved_week_cell(amount: float | None, hours: float | None, currency: str, *, none: str = "n/a") -> str:
    """'12.80 USD (3 h of data)': the value of "saved this week so far" in a table under that heading."""
    if amount is None:
        return none
    return f"{money_text(amount, currency)} ({hours_text(hours)} of data)"
