"""`specwatch demo --per-request`: the demo's simulator also serves one model whose single pool carries two
traffic classes, and posts that pool's per-request records to the demo API with an ingest token."""

from __future__ import annotations

from datetime import UTC, datetime

SCENARIO = "per-request"


def ingest_token(db_url: str) -> str:
    """A fresh `ingest` token for the demo simulator (shown nowhere; only its hash is stored)."""
    from backend.api.auth import create_token
    from backend.db.session import make_engine, make_sessionmaker, session_scope

    engine = make_engine(db_url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            return create_token(session, name="demo simulator (per-request records)", role="ingest", by="demo",
                                now=datetime.now(UTC))[1]
    finally:
        engine.dispose()


def sim_args(api_url: str) -> list[str]:
    return ["--post-requests", f"{api_url}/api/v1/requests"]
