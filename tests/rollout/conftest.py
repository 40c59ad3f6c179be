from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy.orm import Session, sessionmaker

from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker

MODEL = "acme-8b"
T0 = datetime(2026, 11, 23, 0, 0, tzinfo=UTC).timestamp()  # Monday of 2026-W48
BASE = {"tick": 0.1, "defaults": {"step_time": {"base": 0.007, "per_seq": 0.00012},
                                  "overhead": {"eps0": 0.35, "slope": 0.01}}}


def pool(cls: str, mode: str, *, model: str = MODEL, conc: int = 8, **kw) -> dict:
    return {"id": f"{model}-{cls}-{mode}", "model": model, "traffic_class": cls, "spec_mode": mode,
            "concurrency": conc, **kw}


def scenario(pools: list[dict]) -> dict:
    d = copy.deepcopy(BASE)
    d["pools"] = pools
    return d


# the baseline servers decode slower per token (P99 TPOT in vLLM's (10, 25] ms bucket) than the speculative
# ones (in (0, 10] ms): a move the default buckets resolve, so the latency step can pass. With equal step
# times both P99s share the (0, 10] ms bucket: "unresolved", and the track is held for a human.
SLOW_STEP = {"base": 0.012, "per_seq": 0.00012}
BASELINE = [pool("chat", "off", step_time=SLOW_STEP), pool("code", "off", conc=4, step_time=SLOW_STEP)]
SPEC = [pool("chat", "eagle3", k=3, acceptance={"mode": "rate", "r": 0.75}),
        pool("code", "eagle3", k=3, conc=4, acceptance={"mode": "rate", "r": 0.35})]


@pytest.fixture
def rollout_settings(fresh_db_url: str) -> Settings:
    return Settings(_env_file=None, database_url=fresh_db_url, rollout_min_drafts=200_000,
                    rollout_window_seconds=3600, rollout_consecutive_successes=2)


@pytest.fixture
def factory(fresh_db_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(fresh_db_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def client(db, now):
    """The app on the rollback-per-test session, a fixed clock and trusted-header auth, called as a viewer
    (`X-Forwarded-User`; a test's own headers win), also by the dashboard's API client (its per-request
    headers); `anonymous` calls it without."""
    from fastapi.testclient import TestClient

    from backend.api.app import create_app
    from backend.api.deps import get_now, get_reader, get_session
    from tests.support.auth import SessionReader

    app = create_app(Settings(_env_file=None, auth_mode="trusted-header"))

    def session():
        yield db
        db.flush()

    app.dependency_overrides[get_session] = session
    app.dependency_overrides[get_reader] = lambda: SessionReader(db)
    app.dependency_overrides[get_now] = lambda: now
    from dashboard.api_client import REQUEST_HEADERS

    viewer = {"X-Forwarded-User": "test-viewer"}
    given = REQUEST_HEADERS.set(viewer)
    yield TestClient(app, client=("127.0.0.1", 50000), headers=viewer)  # a loopback peer: the trusted proxy
    REQUEST_HEADERS.reset(given)


@pytest.fixture
def anonymous(client):
    """The same app, called without the proxy's user header."""
    from fastapi.testclient import TestClient

    return TestClient(client.app, client=("127.0.0.1", 50000))
