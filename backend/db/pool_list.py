"""The pool list as plain rows, for reads that must not spend a round trip on it.

A series request needs the pool list before its read (which pools, how grouped) and again after (labels,
freshness flags). `recent` gives the list this process read last (reading it only when there is none),
from which the caller chooses its pools; the read then carries `SQL` in the same round trip
(spec_series.spec_counters(lead=...)), and the caller checks its choice against that fresh list, reading
again in the rare case the choice has changed (a pool appeared, or changed its K). The remembered list is
only ever a guess: no answer is built from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from psycopg import RawCursor

from backend.db.session import Reads, database_of, driver

SQL = ("SELECT id, model_name, traffic_class, spec_mode, num_spec_tokens, drafter, vllm_version, first_seen, "
       "last_seen, origin, engine FROM pools ORDER BY model_name, traffic_class, spec_mode")


@dataclass(frozen=True, slots=True)
class PoolRow:
    """A `pools` row (backend.db.models.Pool's columns), detached from any session."""

    id: int
    model_name: str
    traffic_class: str
    spec_mode: str
    num_spec_tokens: int | None
    drafter: str | None
    vllm_version: str | None
    first_seen: datetime
    last_seen: datetime
    origin: str = "engine"  # engine: vLLM counters; requests: sums of per-request records
    engine: str = "vllm"  # the inference engine whose metrics the counts come from (backend.domain.engines)


_recent: dict[object, tuple[list[tuple], list[PoolRow]]] = {}  # per database URL: the raw rows and as PoolRows


def rows(raw: list[tuple]) -> list[PoolRow]:
    """SQL's result rows as PoolRows."""
    return [PoolRow(*r) for r in raw]


def read(session: Reads) -> list[PoolRow]:
    """The pool list now (one round trip); remembered as this process's most recent."""
    with driver(session) as conn:
        raw = RawCursor(conn).execute(SQL, prepare=True, binary=True).fetchall()
    return fresh(session, raw)


def recent(session: Reads) -> list[PoolRow]:
    """The pool list this process read last from this database, or the list now if it has none."""
    known = _recent.get(database_of(session))
    return known[1] if known is not None else read(session)


def fresh(session: Reads, raw: list[tuple]) -> list[PoolRow]:
    """SQL's rows just read, as PoolRows, remembered as this process's most recent list: the very same
    PoolRows as last time when no row has changed (the usual case between two collection cycles)."""
    key = database_of(session)
    known = _recent.get(key)
    pools = known[1] if known is not None and known[0] == raw else rows(raw)
    _recent[key] = (raw, pools)
    return pools
