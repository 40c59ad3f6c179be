"""Server-side filtering, sorting and paging of a /fleet answer, for fleets of thousands of rows (the
overview asks for one page at a time). Works on the answer as JSON (the stored snapshot's body or a live
answer dumped): no database, no per-row models; a page of 5,000 rows costs a parse, a filter and a sort."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from backend.schemas.fleet import FLEET_STATE_ORDER as STATE_ORDER  # by state: most urgent first

VERDICT_ORDER = ("worse", "inconclusive", "unresolved", "no-significant-change", "better")
# sortable fields: name -> how a row's value is read (None sorts last in either direction)
SORT_KEYS = {
    "model_name": lambda r: r["model_name"],
    "traffic_class": lambda r: r["traffic_class"],
    "spec_mode": lambda r: r["spec_mode"],
    "state": lambda r: STATE_ORDER.index(r["state"]) if r["state"] in STATE_ORDER else len(STATE_ORDER),
    "acceptance_rate": lambda r: r.get("acceptance_rate"),
    "margin": lambda r: r.get("margin"),
    "estimated_speedup": lambda r: r.get("estimated_speedup"),
    "break_even_alpha": lambda r: r.get("break_even_alpha"),
    "mean_acceptance_length": lambda r: r.get("mean_acceptance_length"),
    "num_spec_tokens": lambda r: r.get("num_spec_tokens"),
    "p99_itl_delta": lambda r: r.get("p99_itl_delta"),
    "p99_tpot_delta": lambda r: r.get("p99_tpot_delta"),
    "p99_itl_verdict": lambda r: _rank(VERDICT_ORDER, r.get("p99_itl_verdict")),
    "p99_tpot_verdict": lambda r: _rank(VERDICT_ORDER, r.get("p99_tpot_verdict")),
    "concurrency_band": lambda r: r.get("concurrency_band"),
    "drafts": lambda r: r.get("drafts"),
    "last_seen": lambda r: (r.get("freshness") or {}).get("last_seen"),
}
SORTS = tuple(s for name in SORT_KEYS for s in (name, f"-{name}"))
SEARCHED = ("model_name", "traffic_class", "spec_mode", "state", "concurrency_band", "engines")
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_OFFSET = 1_000_000
MAX_QUERY = 200


def _rank(order: tuple[str, ...], value: str | None) -> int | None:
    return None if value is None else (order.index(value) if value in order else len(order))


def _identity(r: dict[str, Any]) -> tuple[str, str, str]:
    return r["model_name"], r["traffic_class"], r["spec_mode"]


@dataclass(frozen=True)
class PageQuery:
    """What the client asked for; every field already bounded by the route (FastAPI -> 422 otherwise)."""

    q: str | None = None
    model: str | None = None
    states: tuple[str, ...] = ()
    sort: str | None = None
    offset: int = 0
    limit: int = DEFAULT_LIMIT


def matches(r: dict[str, Any], query: PageQuery) -> bool:
    if query.model is not None and r["model_name"] != query.model:
        return False
    if query.states and r["state"] not in query.states:
        return False
    if query.q:
        needle = query.q.casefold()
        return any(needle in str(r.get(f) or "").casefold() for f in SEARCHED)
    return True


def ordered(rows: list[dict[str, Any]], sort: str | None) -> list[dict[str, Any]]:
    """`rows` by `sort` ("field" ascending, "-field" descending), nulls last either way, ties by model,
    class and mode ascending (a stable order: the same request pages the same way); no sort: as given."""
    if not sort:
        return rows
    desc = sort.startswith("-")
    key = SORT_KEYS[sort.lstrip("-")]
    base = sorted(rows, key=_identity)
    present = [r for r in base if key(r) is not None]
    absent = [r for r in base if key(r) is None]
    return sorted(present, key=key, reverse=desc) + absent  # Python's sort is stable, reversed or not


def page(body: dict[str, Any], query: PageQuery) -> dict[str, Any]:
    """The /fleet body with `rows` cut to the page, and the paging facts: `total_rows` (the window's rows,
    unfiltered), `matched_rows` (after the filters), `offset`, `limit`, `sort` and `state_counts` (of all
    rows: the overview's cards stay right whatever page is shown)."""
    rows = body["rows"]
    hits = ordered([r for r in rows if matches(r, query)], query.sort)
    counts = Counter(r["state"] for r in rows)
    return {**body, "rows": hits[query.offset:query.offset + query.limit], "total_rows": len(rows),
            "matched_rows": len(hits), "offset": query.offset, "limit": query.limit, "sort": query.sort,
            "state_counts": {s: counts.get(s, 0) for s in STATE_ORDER}}
