"""What many routes declare alike, declared once: the start/end query parameters, the error answers they
document, the window they read (the API document's text is these)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import Query

from backend.config import Settings
from backend.schemas.common import Duration, ErrorRead, Instant
from backend.services.windows import Range, resolve_range

Start = Annotated[Instant | None, Query(description="RFC 3339 start (instead of window)")]
End = Annotated[Instant | None, Query(description="RFC 3339 end (default now)")]
UNKNOWN_MODEL = "Unknown model (known names listed)"


def errors(unknown: str | None = UNKNOWN_MODEL, invalid: str = "Invalid window") -> dict[int | str, dict[str, Any]]:
    """The documented answers: 404 (`unknown`, unless None) and 422 (`invalid`)."""
    out: dict[int | str, dict[str, Any]] = {404: {"model": ErrorRead, "description": unknown}} if unknown else {}
    return out | {422: {"model": ErrorRead, "description": invalid}}


def window_range(settings: Settings, now: datetime, window: Duration | None, start: Instant | None,
                 end: Instant | None) -> Range:
    """The window a route reads: `window` ending at `end` (default now, default length the setting's), or
    start to end; refused beyond SPECWATCH_MAX_RANGE_SECONDS."""
    return resolve_range(now=now, window=window, start=start, end=end,
                         default_seconds=settings.default_window_seconds, max_seconds=settings.max_range_seconds)
