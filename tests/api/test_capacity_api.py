"""GET /capacity and /capacity/fleet on real Postgres against a hand-computed hour (docs/capacity.md)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from backend.config import Settings
from tests.factories import make_bucket, make_pool
from tests.support.auth import app_on_session

SETTINGS = {"gpu_hour_price": {"acme-70b": 3.0}, "gpus_per_replica": {"*": 2},
            "pool_replicas": {"acme-70b": {"*": 1}}}


def _client(db: Session, now: datetime, **kw) -> TestClient:
    return app_on_session(db, now, token_role="viewer", **kw)


@pytest.fixture
def seeded(db: Session, now: datetime) -> Session:
    """The hour before `now`, one replica per pool, 60 s buckets:
    minutes 0-29 at 4 running requests (band 1-8): spec 3,000 tokens a bucket (50 tok/s), baseline 1,500 (25);
    minutes 30-59 at 150 running (band >128): spec 1,200 (20 tok/s), baseline 1,500 (25)."""
    spec = make_pool(db, model_name="acme-70b", traffic_class="chat", spec_mode="eagle3")
    base = make_pool(db, model_name="acme-70b", traffic_class="chat", spec_mode="off")
    start = now - timedelta(hours=1)
    for i in range(60):
        t = start + timedelta(minutes=i)
        low = i < 30
        running = 4.0 if low else 150.0
        make_bucket(db, spec, t, generation_tokens=3000.0 if low else 1200.0, running_mean=running)
        make_bucket(db, base, t, generation_tokens=1500.0, running_mean=running)
    return db


def test_capacity_matches_the_hand_computed_hour(seeded, now):
    body = _client(seeded, now, **SETTINGS).get("/api/v1/capacity", params={"model": "acme-70b", "window": "1h"})
    assert body.status_code == 200, body.text
    r = body.json()
    (chat,) = r["classes"]
    assert (chat["traffic_class"], chat["spec_mode"], chat["baseline_pool"]["spec_mode"]) == ("chat", "eagle3", "off")
    assert chat["replicas_source"] == "configured" and chat["gpus_per_replica"] == 2
    # whole pool: (30 x 3,000 + 30 x 1,200) / 3,600 s = 35 tok/s; one replica -> the same per replica
    assert chat["spec"]["throughput"] == pytest.approx(126_000 / 3600)
    assert chat["spec"]["per_replica"] == pytest.approx(35.0)
    bands = {b["band"]: b for b in chat["bands"]}
    low, high = bands["1-8"], bands[">128"]
    # 1-8: 6 per replica-hour / (50 x 3600) x 1e6 = 33.33 per 1 M tokens; baseline 66.67
    assert low["spec"]["cost_per_mtok"] == pytest.approx(6e6 / 180_000)
    assert low["baseline"]["cost_per_mtok"] == pytest.approx(6e6 / 90_000)
    assert low["spec"]["per_request"] == pytest.approx(50 / 4) and low["ratio_per_request"] == pytest.approx(2.0)
    assert low["saved_in_window"] == pytest.approx(0.09 * (6e6 / 90_000 - 6e6 / 180_000))  # 3.0
    # >128: 83.33 against 66.67: 36,000 tokens lose 0.036 x 16.67 = 0.6
    assert high["saved_in_window"] == pytest.approx(-0.6) and high["ratio_per_replica"] == pytest.approx(0.8)
    assert high["pays"] == "no" and low["pays"] == "yes"
    money = chat["money"]
    assert money["saved_in_window"] == pytest.approx(2.4)
    assert money["per_week_at_window_rate"] == pytest.approx(2.4 * 168)  # one hour's rate over 168 hours = 403.2
    assert money["saved_in_window_low"] == pytest.approx(2.4) and money["saved_in_window_high"] == pytest.approx(2.4)  # constant bins
    assert money["cost_per_mtok_spec"] == pytest.approx((3.0 + 3.0) / 0.126)  # each half hour: 0.5 replica-h x 6 = 3.0
    assert chat["stops_paying_band"] == ">128" and chat["stops_paying_significant"] is True
    assert r["total"]["saved_in_window"] == pytest.approx(2.4)
    assert "bootstrap" in r["method"]


def test_fleet_capacity_sums_the_models(seeded, now):
    r = _client(seeded, now, **SETTINGS).get("/api/v1/capacity/fleet", params={"window": "1h"}).json()
    assert [(x["model_name"], x["traffic_class"]) for x in r["rows"]] == [("acme-70b", "chat")]
    assert r["rows"][0]["per_week_at_window_rate"] == pytest.approx(403.2)
    assert r["total"]["per_week_at_window_rate"] == pytest.approx(403.2) and r["models"]["acme-70b"]["saved_in_window"] == pytest.approx(2.4)


def test_without_price_or_replicas_costs_are_null(seeded, now):
    r = _client(seeded, now).get("/api/v1/capacity", params={"model": "acme-70b", "window": "1h"}).json()
    chat = r["classes"][0]
    assert chat["replicas_source"] == "unknown" and chat["spec"]["per_replica"] is None
    assert chat["money"]["saved_in_window"] is None and chat["spec"]["throughput"] == pytest.approx(35.0)
    assert "SPECWATCH_POOL_REPLICAS" in chat["note"]
    assert chat["bands"][0]["ratio_per_request"] == pytest.approx(2.0)


@pytest.mark.parametrize("params,status", [
    ({"model": "nope", "window": "1h"}, 404),
    ({"model": "acme-70b", "window": "-1h"}, 422),
    ({"model": "acme-70b", "window": "9999d"}, 422),
    ({"model": "acme-70b", "start": "not-a-time"}, 422),
    ({"model": "x" * 301}, 422),
    ({}, 422),
])
def test_bad_inputs_are_refused(seeded, now, params, status):
    resp = _client(seeded, now, **SETTINGS).get("/api/v1/capacity", params=params)
    assert resp.status_code == status, resp.text


def test_openapi_documents_the_endpoints(seeded, now):
    paths = _client(seeded, now).get("/openapi.json").json()["paths"]
    assert "/api/v1/capacity" in paths and "/api/v1/capacity/fleet" in paths
    assert "404" in paths["/api/v1/capacity"]["get"]["responses"]


def test_configured_replica_counts_take_the_most_specific_key():
    from types import SimpleNamespace

    from backend.services.capacity import configured_counts

    s = Settings(_env_file=None, pool_replicas={"acme-70b": {"*": 2, "chat": 4, "chat:off": 3}, "*": {"*": 1}})
    pools = [SimpleNamespace(id=i, model_name=m, traffic_class=c, spec_mode=mode) for i, (m, c, mode) in enumerate([
        ("acme-70b", "chat", "eagle3"), ("acme-70b", "chat", "off"), ("acme-70b", "code", "eagle3"),
        ("other", "chat", "eagle3")])]
    got = configured_counts(pools, s)
    assert [got[i].replicas for i in range(4)] == [4.0, 3.0, 2.0, 1.0]
    assert {r.source for r in got.values()} == {"configured"}
    assert configured_counts(pools[:1], Settings(_env_file=None))[0].source == "unknown"


@pytest.mark.parametrize("bad", [
    {"gpu_hour_price": {"m": 0}}, {"gpu_hour_price": {"m": 1e9}}, {"gpus_per_replica": {"*": 0}},
    {"pool_replicas": {"m": {"a:b:c": 1}}}, {"pool_replicas": {"m": {"*": 0}}}, {"capacity_boot_samples": 0},
])
def test_bad_capacity_settings_refuse_to_start(bad):
    with pytest.raises(ValueError):
        Settings(_env_file=None, **bad)


def test_observed_replicas_win_over_the_configured_count(seeded, now):
    """Per-replica rows in the window: two replicas on the spec pool (six 10-minute rows each), three on the
    baseline for the first half hour and two after (mean 2.5) -> per replica = pool rate / observed count."""
    from backend.db import replica_repo

    pools = {p.spec_mode: p for p in replica_repo.model_pools(seeded, "acme-70b")}
    start = now - timedelta(hours=1)
    layout = {"spec": [("r0", 6), ("r1", 6)], "base": [("b0", 6), ("b1", 6), ("b2", 3)]}
    for side, mode in (("spec", "eagle3"), ("base", "off")):
        seen = {(pools[mode].id, inst, "0"): (start, now, {}) for inst, _ in layout[side]}
        ids = replica_repo.upsert_replicas(seeded, seen)
        replica_repo.upsert_buckets(seeded, [
            {"replica_id": ids[(pools[mode].id, inst, "0")], "bucket_start": start + timedelta(minutes=10 * i),
             **dict.fromkeys(replica_repo.BUCKET_COLUMNS), "bucket_seconds": 600}
            for inst, n in layout[side] for i in range(n)])
    seeded.flush()
    body = _client(seeded, now, **SETTINGS).get("/api/v1/capacity", params={"model": "acme-70b", "window": "1h"})
    assert body.status_code == 200, body.text
    (chat,) = body.json()["classes"]
    assert chat["replicas_source"] == "observed"
    assert (chat["replicas_spec"], chat["replicas_baseline"]) == (2.0, 2.5)  # 12 rows / 6; 15 rows / 6
    assert chat["spec"]["per_replica"] == pytest.approx(35.0 / 2)
    assert chat["baseline"]["per_replica"] == pytest.approx(25.0 / 2.5)


def test_fleet_rows_carry_the_per_week_at_window_rate_of_capacity_fleet(seeded, now):
    """The overview's saving column comes with /fleet's rows: each class row's is /capacity/fleet's point
    figure (computed with one bootstrap replicate: the point does not depend on them), the `mixed` row's the
    model's total; without a GPU-hour price every one is null."""
    code = make_pool(seeded, model_name="acme-70b", traffic_class="code", spec_mode="eagle3")
    for i in range(60):
        make_bucket(seeded, code, now - timedelta(hours=1) + timedelta(minutes=i), generation_tokens=2000.0,
                    running_mean=4.0)
    client = _client(seeded, now, **SETTINGS)
    cap = client.get("/api/v1/capacity/fleet", params={"window": "1h"}).json()
    want = {(r["traffic_class"], r["spec_mode"]): r["per_week_at_window_rate"] for r in cap["rows"]}
    want[("mixed", "eagle3")] = cap["models"]["acme-70b"]["per_week_at_window_rate"]
    rows = client.get("/api/v1/fleet", params={"window": "1h"}).json()["rows"]
    got = {(r["traffic_class"], r["spec_mode"]): r["per_week_at_window_rate"] for r in rows}
    assert got == pytest.approx(want) and set(got) == {("chat", "eagle3"), ("code", "eagle3"), ("mixed", "eagle3")}
    assert got[("chat", "eagle3")] == pytest.approx(403.2) and got[("mixed", "eagle3")] is not None
    unpriced = _client(seeded, now).get("/api/v1/fleet", params={"window": "1h"}).json()["rows"]
    assert [r["per_week_at_window_rate"] for r in unpriced] == [None, None, None]
