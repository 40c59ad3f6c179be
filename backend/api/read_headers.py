"""Where a response's reads went, when a read replica is configured (backend.db.replica):

    X-Specwatch-Reads-From: standby | primary
    X-Specwatch-Replica-Lag-Seconds: 0.8          (standby: its replication lag as last measured)
    X-Specwatch-Read-Fallback: <why not the standby> (primary: the standby is down, reads fell back)

Set from the request's note (request.state.reads), which the read session or Reader fills in."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.types import Scope

from backend.api.headers import ResponseHeaders
from backend.schemas.common import ReadsRead


def reads_of(request: Request) -> ReadsRead | None:
    """The request's note as a response field (FleetRead.reads), None without a read replica."""
    note = getattr(request.state, "reads", None)
    return ReadsRead(**note) if note and note.get("reads_from") else None


def with_reads(body: bytes, reads: ReadsRead | None) -> bytes:
    """A stored JSON object body with `reads` set (a snapshot of /fleet, stored without it)."""
    if reads is None or not body.startswith(b"{"):
        return body
    return b'{"reads":' + json.dumps(reads.model_dump()).encode() + (b"," if body[1:2] != b"}" else b"") + body[1:]


def reads_headers(note: dict) -> list[tuple[bytes, bytes]]:
    source = note.get("reads_from")
    if source is None:
        return []
    out = [(b"x-specwatch-reads-from", source.encode())]
    if note.get("lag_seconds") is not None:
        out.append((b"x-specwatch-replica-lag-seconds", f"{note['lag_seconds']:.3f}".encode()))
    if note.get("fallback"):
        out.append((b"x-specwatch-read-fallback", note["fallback"].encode("ascii", "replace")))
    return out


class ReadSourceHeaders(ResponseHeaders):
    """The headers above on each response whose request read through a ReadRoute."""

    def headers(self, scope: Scope, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        note = scope["state"].get("reads")
        return [*headers, *reads_headers(note)] if isinstance(note, dict) else headers
