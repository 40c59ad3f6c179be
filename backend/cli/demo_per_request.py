"""`specwatch demo --per-request`: the demo's simulator also serves one model whose single pool carries two
traffic classes, and posts that pool's per-request records to the demo API with an ingest token. Any other
scenario whose pools report per-request records (`mixed-engines`: vLLM, SGLang and llama.cpp records) posts
them the same way."""

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


def has_records(scenario: str) -> bool:
    """Whether `scenario` (a built-in name or a YAML path) has pools that report per-request records; a
    scenario that does not load is left to the simulator to report."""
    from backend.sim.scenario import ScenarioError, load_scenario

    try:
        return any(p.per_request is not None for p in load_scenario(scenario).pools)
    except (ScenarioError, OSError):
        return False


def sim_args(api_url: str) -> list[str]:
    return ["--post-requests", f"{api_url}/api/v1/requests"]
