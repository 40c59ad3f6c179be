"""Fast JSON for large columnar answers: numpy columns go straight to orjson (NaN -> null), times as
RFC 3339 UTC strings, the small parts through their pydantic models. The shape is the documented
response model's; only the encoder differs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import orjson
from fastapi import Response

from backend.services.series import COLUMNS, Head, SeriesSet

_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z


def _head(h: Head) -> dict:
    return {"model_name": h.model_name, "traffic_class": h.traffic_class, "spec_mode": h.spec_mode,
            "num_spec_tokens": h.num_spec_tokens, "pools": [p.model_dump(mode="json") for p in h.pools],
            "incomplete": h.incomplete, "flags": h.flags}


def _grid(s: SeriesSet) -> dict:
    return {"window": s.window.model_dump(mode="json"), "step_seconds": s.grid.step,
            "rolling_window_seconds": s.rolling, "bucket_seconds": s.bucket_seconds,
            "t": s.grid.times().astype("datetime64[s]")}


def series_body(s: SeriesSet, *, columns: Sequence[str] = COLUMNS) -> bytes:
    """One series (AcceptanceSeriesRead)."""
    body = _head(s.heads[0]) | _grid(s)
    body |= {c: np.ascontiguousarray(s.columns[c][0]) for c in columns}
    return orjson.dumps(body, option=_OPTS)


def set_body(s: SeriesSet, *, columns: Sequence[str]) -> bytes:
    """Many series on one grid (AcceptanceSetRead)."""
    series = [_head(h) | {c: np.ascontiguousarray(s.columns[c][i]) for c in columns} for i, h in enumerate(s.heads)]
    return orjson.dumps(_grid(s) | {"series": series}, option=_OPTS)


def json_response(body: bytes) -> Response:
    return Response(content=body, media_type="application/json")
