"""GET /api/v1/pools/figures: per pool, each spec-decode figure over the window with whether it is exact (a
vLLM or llama.cpp pool's counters) or an estimate (an SGLang pool's gauge parts, with its basis), the figures
an engine does not expose null, never 0; and an estimate never in an exact figure (hand-computed answers)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.api.deps import get_now
from backend.config import Settings
from backend.db.session import session_scope
from backend.domain.engines.estimate import ESTIMATE_BASIS
from backend.domain.records import BucketRecord, PoolKey
from backend.services.ingest import write_records
from tests.support import db as dbsupport
from tests.support.auth import bearer, make_token
from tests.support.stack import factory_for

T0 = 1_800_000_000
MODEL = "m"


def _records() -> list[BucketRecord]:
    vllm = PoolKey(MODEL, "chat", "eagle3")
    llama = PoolKey(MODEL, "chat", "draft")
    old = PoolKey(MODEL, "chat", "ngram")
    sgl = PoolKey(MODEL, "chat", "eagle")
    out = []
    for b in (T0, T0 + 60):
        out += [BucketRecord(vllm, b, drafts=100, draft_tokens=300, accepted_tokens=150, generation_tokens=250,
                             engine="vllm"),
                BucketRecord(llama, b, drafts=40, draft_tokens=160, accepted_tokens=40, generation_tokens=80,
                             engine="llamacpp"),
                BucketRecord(old, b, draft_tokens=100, accepted_tokens=70, generation_tokens=90, engine="llamacpp"),
                BucketRecord(sgl, b, generation_tokens=200, est_weight_tokens=200, est_verify_steps=80,
                             est_accepted_tokens=100, est_draft_tokens=250, engine="sglang")]
    return out


@pytest.fixture(scope="module")
def client(pg_admin_url: str, pg_template: str):
    name, url = dbsupport.clone(pg_admin_url, pg_template)
    s = Settings(_env_file=None, database_url=url, bucket_seconds=60, stale_after_seconds=10**9)
    with session_scope(factory_for(url)) as session:
        write_records(session, _records(), width=60, source="scrape", now=datetime.fromtimestamp(T0 + 200, UTC))
    app = create_app(s)
    app.dependency_overrides[get_now] = lambda: datetime.fromtimestamp(T0 + 300, UTC)
    with TestClient(app, headers=bearer(make_token(url, "viewer"))) as c:
        yield c
    dbsupport.drop_database(pg_admin_url, name)


def _by_mode(body: dict) -> dict[str, dict[str, dict]]:
    return {row["pool"]["spec_mode"]: {f["figure"]: f | {"engine": row["engine"]} for f in row["figures"]}
            for row in body["pools"]}


def test_each_figure_says_exact_or_estimated(client):
    r = client.get("/api/v1/pools/figures", params={"model": MODEL, "window": "1h"})
    assert r.status_code == 200, r.text
    got = _by_mode(r.json())
    assert {m: f["drafts"]["engine"] for m, f in got.items()} == {
        "eagle3": "vllm", "draft": "llamacpp", "ngram": "llamacpp", "eagle": "sglang"}
    v = got["eagle3"]
    assert (v["acceptance_rate"]["value"], v["accept_length"]["value"]) == (0.5, 2.5)  # 300/600, 1 + 300/200
    assert v["acceptance_rate"]["exact"] is True and v["acceptance_rate"]["estimate_basis"] is None
    ll = got["draft"]
    assert (ll["acceptance_rate"]["value"], ll["accept_length"]["value"]) == (0.25, 2.0)  # 80/320, 1 + 80/80
    assert ll["drafts"]["value"] == 80 and ll["drafts"]["exact"] is True
    old = got["ngram"]
    assert old["acceptance_rate"]["value"] == 0.7 and old["acceptance_rate"]["exact"] is True
    assert old["drafts"]["value"] is None and old["accept_length"]["value"] is None  # not exposed by that build
    sg = got["eagle"]
    # the estimate: 400 tokens in 160 steps -> 1 + 240/160 = 2.5; 200 accepted of 500 drafted -> 0.4
    assert sg["accept_length"]["value"] == 2.5 and sg["acceptance_rate"]["value"] == 0.4
    for figure in ("accept_length", "acceptance_rate", "draft_tokens", "accepted_tokens"):
        assert sg[figure]["exact"] is False and sg[figure]["estimate_basis"] == ESTIMATE_BASIS
    assert sg["drafts"] == {"figure": "drafts", "value": None, "exposed": False, "exact": None,
                            "estimate_basis": None, "note": None, "engine": "sglang"}
    # an exact sum over the model's pools holds only exact counts: the estimate is in none of them
    exact_accepted = sum(f["accepted_tokens"]["value"] or 0 for f in got.values() if f["accepted_tokens"]["exact"])
    assert exact_accepted == 300 + 80 + 140


def test_an_estimate_over_a_window_past_the_raw_buckets_says_so(client):
    r = client.get("/api/v1/pools/figures", params={"model": MODEL, "window": "30d"})
    assert r.status_code == 200, r.text
    got = _by_mode(r.json())
    assert "covers only the raw buckets kept (14 days)" in got["eagle"]["acceptance_rate"]["note"]
    assert got["eagle"]["acceptance_rate"]["value"] == 0.4
    assert got["eagle3"]["acceptance_rate"]["note"] is None  # exact figures read the rollups as well


def test_an_unknown_model_lists_the_known_ones(client):
    r = client.get("/api/v1/pools/figures", params={"model": "nope"})
    assert r.status_code == 404 and "m" in r.text
