"""GET /api/v1/annotations (added for the per-domain chart): restarts per bucket and current versions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.config import Settings
from tests.dashboard import seeding
from tests.support.auth import bearer, make_token


def test_restarts_are_listed_at_the_end_of_their_bucket(fresh_db_url):
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    fleet = (seeding.PoolSpec("m", "chat", k=3, restarts_every_h=0.5, vllm_version="0.22.0", drafter="d1"),
             seeding.PoolSpec("other", "chat", k=3, restarts_every_h=0.25))
    seeding.seed_demo(fresh_db_url, hours=1.0, now=now, fleet=fleet)
    with psycopg.connect(fresh_db_url.replace("+psycopg", "")) as conn:
        expected = conn.execute("SELECT count(*) FROM pool_buckets b JOIN pools p ON p.id = b.pool_id "
                                "WHERE p.model_name = 'm' AND b.restarts > 0").fetchone()[0]
    assert expected >= 1
    with TestClient(create_app(Settings(_env_file=None, database_url=fresh_db_url)),
                    headers=bearer(make_token(fresh_db_url))) as client:
        body = client.get("/api/v1/annotations", params={"model": "m", "range": "2h"}).json()
        assert len(body["annotations"]) == expected
        first = body["annotations"][0]
        assert first["kind"] == "restart" and first["traffic_class"] == "chat"
        assert datetime.fromisoformat(first["t"]) <= now
        assert body["versions"] == [{"traffic_class": "chat", "spec_mode": "eagle3", "drafter": "d1",
                                     "vllm_version": "0.22.0"}]
        quiet = {"model": "m", "start": (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "end": (now - timedelta(minutes=55)).strftime("%Y-%m-%dT%H:%M:%SZ")}  # no restart in there
        assert client.get("/api/v1/annotations", params=quiet).json()["annotations"] == []
        unknown = client.get("/api/v1/annotations", params={"model": "nope"})
        assert unknown.status_code == 404 and unknown.json()["known_models"] == ["m", "other"]
        assert client.get("/api/v1/annotations", params={"model": "m", "range": "bogus"}).status_code == 422
