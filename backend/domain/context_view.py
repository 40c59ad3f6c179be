"""α by context length, as people read it: the section name, the column heads, a band's prompt-token range
and an α with its 95 % interval. One wording for every surface that shows the API's `by_context_length`
(the model page, the weekly report's page, Markdown, CSV headings and PDF), so a figure reads the same
wherever it appears. Pure: no I/O.

The numbers themselves come from one function, backend.services.per_request.context_length_bands."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

SECTION = "α by context length"
POOLED = "α pooled (draft-token-weighted)"
WEIGHTED = "α request-weighted"
HEAD = ("class", "spec mode", "prompt tokens", "requests", "drafts", f"{POOLED}, 95 %", f"{WEIGHTED}, 95 %")
NOTE = ("Prompt tokens in powers of two (the last band, 131,072 and up, open-ended), over the requests that sent "
        "prompt_tokens and drafted. Pooled α: accepted ÷ drafted tokens over the band's requests; request-weighted "
        "α: the mean of per-request α. 95 % intervals with the request as the unit; one request: no interval.")
NO_RECORDS = ("no per-request records for this model: α by context length needs per-request records "
              "(POST /api/v1/requests) that carry prompt_tokens")
NO_PROMPT_TOKENS = ("no per-request record of this class in the window carries prompt_tokens (or none drafted): "
                    "no α by context length")
ONE_REQUEST = "one request: no interval"


def _num(v: float | None, spec: str, none: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    return f"{v:{spec}}"


def band_text(b: dict[str, Any]) -> str:
    """'32,768–65,535' or '131,072+' (the open last band)."""
    lo, hi = b["prompt_tokens_from"], b["prompt_tokens_to"]
    return f"{lo:,}+" if hi is None else f"{lo:,}–{hi:,}"


def alpha_text(value: float | None, interval: Sequence[float | None] | None, none: str = "n/a") -> str:
    """'0.700 (0.650–0.750)'; without an interval (one request) says so; `none` when undefined."""
    if value is None:
        return none
    low, high = interval if interval else (None, None)
    if low is None or high is None:
        return f"{value:.3f} ({ONE_REQUEST})"
    return f"{value:.3f} ({low:.3f}–{high:.3f})"


def band_row(scope: str, spec_mode: str, b: dict[str, Any], none: str = "n/a") -> list[str]:
    """One band as the cells of HEAD."""
    return [scope, spec_mode, band_text(b), _num(b["requests"], ",.0f", none), _num(b.get("drafts"), ",.0f", none),
            alpha_text(b["draft_token_weighted_alpha"], b["draft_token_weighted_alpha_interval"], none),
            alpha_text(b["request_weighted_alpha"], b["request_weighted_alpha_interval"], none)]
