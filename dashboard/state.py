"""View state kept in the URL query string (?window=24h or ?start=..&end=.., &model=.., &cls=.., &mode=..), so a link
reproduces the view. Pure: parse and format only."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode

WINDOWS = ("1h", "6h", "24h", "7d", "30d")
DEFAULT_WINDOW = "1h"
CUSTOM = "custom"
KEYS = ("window", "start", "end", "model", "cls", "mode")  # the query keys a view reads
_DURATION = re.compile(r"^\d+[smhd]$")


@dataclass(frozen=True)
class View:
    window: str = DEFAULT_WINDOW        # a duration, or CUSTOM with start/end
    start: str | None = None            # ISO-8601 (UTC) when window == CUSTOM
    end: str | None = None
    model: str | None = None
    cls: str | None = None
    mode: str | None = None             # spec mode, for a model that runs several

    def api_window(self) -> dict[str, str]:
        """The window as API query parameters (`window`/`range` key chosen by the caller)."""
        if self.window == CUSTOM and self.start and self.end:
            return {"start": self.start, "end": self.end}
        return {"duration": self.window}

    def label(self) -> str:
        if self.window == CUSTOM and self.start and self.end:
            return f"{self.start[:16].replace('T', ' ')} → {self.end[:16].replace('T', ' ')} UTC"
        return f"last {self.window}"

    def with_(self, **kw: str | None) -> View:
        return replace(self, **kw)


def _iso(value: str | None) -> str | None:
    """Normalise a datetime-local / ISO string to 'YYYY-MM-DDTHH:MM:SSZ' (naive means UTC); None if invalid."""
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_params(params: dict[str, str | None]) -> View:
    """From page kwargs / parsed query (None: absent). Unknown keys are ignored; a bad window falls back to
    the default."""
    start, end = _iso(params.get("start")), _iso(params.get("end"))
    window = params.get("window") or DEFAULT_WINDOW
    if start and end and start < end:
        window = CUSTOM
    elif not _DURATION.match(window):
        window, start, end = DEFAULT_WINDOW, None, None
    else:
        start = end = None
    return View(window=window, start=start, end=end, model=params.get("model") or None,
                cls=params.get("cls") or None, mode=params.get("mode") or None)


def parse_search(search: str | None) -> View:
    return from_params(dict(parse_qsl((search or "").lstrip("?"))))


def to_search(view: View) -> str:
    params: dict[str, str] = {}
    if view.window == CUSTOM and view.start and view.end:
        params.update(start=view.start, end=view.end)
    else:
        params["window"] = view.window
    if view.model:
        params["model"] = view.model
    if view.cls:
        params["cls"] = view.cls
    if view.mode:
        params["mode"] = view.mode
    return "?" + urlencode(params)


def as_dict(view: View) -> dict[str, str | None]:
    return {k: getattr(view, k) for k in KEYS}
