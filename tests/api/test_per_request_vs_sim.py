"""One simulated pool serving two classes: its engine counters go in through the scrape path, its per-request
records through POST /api/v1/requests. Per-class α in /summary equals the simulator's per-request truth
exactly; reconciliation reads coverage 1 when every record is posted and < 1 when some are withheld."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

from fastapi.testclient import TestClient

from backend.api.app import create_app
from backend.api.auth import create_token
from backend.api.deps import get_now
from backend.config import Settings
from backend.db.session import session_scope
from backend.services.history import seed_history
from backend.sim.server import Simulator
from tests.sim.test_per_request import TWO_CLASSES
from tests.support.auth import bearer, make_token
from tests.support.stack import factory_for

END = 1_796_040_000
# requests run from 30 s to ~90 s of simulated time, inside the window (the simulator starts 15 s before it):
# a request that started before the window would have drafts the window's engine buckets do not hold
WHOLE = copy.deepcopy(TWO_CLASSES)
WHOLE["pools"][0]["concurrency"] = {"points": [[0, 0], [30, 8], [90, 0]], "interp": "step"}
SECONDS = 600
SCRAPE = 15.0


def _records(scenario: dict, seed: int) -> list[dict]:
    """The same simulator seed_history runs (same scenario, seed and start), read to the end."""
    start = END - SECONDS
    sim = Simulator(scenario, seed=seed, clock=lambda: float(END), history_seconds=0, start=start - SCRAPE)
    return sim.request_records()


def _run(fresh_db_url: str, scenario: dict, seed: int = 7, *, with_distribution: bool = False):
    s = Settings(_env_file=None, database_url=fresh_db_url, bucket_seconds=60, stale_after_seconds=10**9)
    factory = factory_for(fresh_db_url)
    seed_history(factory, s, scenario=scenario, seconds=SECONDS, end=END, seed=seed, scrape_interval=SCRAPE)
    with session_scope(factory) as session:
        token = create_token(session, name="gw", role="ingest", by="test", now=datetime.fromtimestamp(END, UTC))[1]
    records = _records(scenario, seed)
    app = create_app(s)
    app.dependency_overrides[get_now] = lambda: datetime.fromtimestamp(END, UTC)
    window = {"model": "m1", "start": datetime.fromtimestamp(END - SECONDS, UTC).isoformat(),
              "end": datetime.fromtimestamp(END, UTC).isoformat()}
    with TestClient(app, headers=bearer(make_token(s.database_url))) as client:
        for i in range(0, len(records), 100):
            body = client.post("/api/v1/requests", json=records[i:i + 100],
                               headers={"Authorization": f"Bearer {token}"}).raise_for_status().json()
            assert body["refused"] == 0, body
        summary = client.get("/api/v1/summary", params=window).raise_for_status().json()
        rec = client.get("/api/v1/requests/reconciliation", params=window).raise_for_status().json()
        if with_distribution:
            dist = client.get("/api/v1/requests/acceptance", params=window).raise_for_status().json()
            return records, summary, rec, dist
    return records, summary, rec


def test_per_class_alpha_equals_the_simulators_truth_and_reconciles(fresh_db_url: str) -> None:
    records, summary, rec = _run(fresh_db_url, WHOLE)
    rows = {(r["traffic_class"], r["spec_mode"]): r for r in summary["classes"]}
    # the engine's pool has no class label: the classes come from the records, its totals are the mixed row
    assert set(rows) == {("chat", "eagle3"), ("code", "eagle3"), ("mixed", "eagle3")}
    for cls in ("chat", "code"):
        # the records of the window's buckets: finished in (start, end]
        mine = [r["speculative_decoding"] for r in records
                if r["labels"]["traffic_class"] == cls and END - SECONDS < r["finish_time"] <= END]
        accepted = sum(m["num_accepted_draft_tokens"] for m in mine)
        drafted = sum(m["num_draft_tokens"] for m in mine)
        steps = sum(m["num_spec_steps"] for m in mine)
        assert rows[(cls, "eagle3")]["source"] == "records"
        assert rows[(cls, "eagle3")]["acceptance_rate"] == accepted / drafted
        assert rows[(cls, "eagle3")]["mean_acceptance_length"] == 1 + accepted / steps
    assert rows[("chat", "eagle3")]["acceptance_rate"] > 0.55 > rows[("code", "eagle3")]["acceptance_rate"]
    # the engine sees one pool; per-request sums over the same buckets equal its counters
    assert rec["coverage"] == {"drafts": 1.0, "draft_tokens": 1.0, "accepted_tokens": 1.0}
    assert rec["engine"]["drafts"] == rec["per_request"]["drafts"] > 0
    mixed = rows[("mixed", "eagle3")]
    assert mixed["source"] == "engine" and mixed["records_coverage"] == 1.0
    assert mixed["volume"]["drafts"] == rec["engine"]["drafts"]  # the engine's totals, not engine + records
    assert mixed["acceptance_rate"] == rec["engine"]["accepted_tokens"] / rec["engine"]["draft_tokens"]
    assert [p["traffic_class"] for p in mixed["pools"]] == ["default"]
    assert rec["flags"] == []


def test_withheld_records_show_as_partial_coverage(fresh_db_url: str) -> None:
    scenario = copy.deepcopy(WHOLE)
    scenario["pools"][0]["per_request"]["report_share"] = 0.6
    _, _, rec = _run(fresh_db_url, scenario)
    assert 0.3 < rec["coverage"]["drafts"] < 0.9
    assert rec["flags"] == ["partial_coverage"]


def test_seeded_history_holds_the_per_request_records(fresh_db_url: str) -> None:
    """seed_history (the demo's history) stores the simulator's per-request records with its counters: the
    requests views are filled from the start and their totals are the simulator's own requests."""
    s = Settings(_env_file=None, database_url=fresh_db_url, bucket_seconds=60, stale_after_seconds=10**9)
    summary = seed_history(factory_for(fresh_db_url), s, scenario=WHOLE, seconds=SECONDS, end=END, seed=7,
                           scrape_interval=SCRAPE)
    truth = _records(WHOLE, 7)
    assert summary.requests == len(truth) > 50
    app = create_app(s)
    app.dependency_overrides[get_now] = lambda: datetime.fromtimestamp(END, UTC)
    window = {"model": "m1", "start": datetime.fromtimestamp(END - SECONDS, UTC).isoformat(),
              "end": datetime.fromtimestamp(END, UTC).isoformat()}
    with TestClient(app, headers=bearer(make_token(s.database_url))) as client:
        dist = client.get("/api/v1/requests/acceptance", params=window).raise_for_status().json()
        rec = client.get("/api/v1/requests/reconciliation", params=window).raise_for_status().json()
        lowest = client.get("/api/v1/requests/lowest", params={**window, "limit": 5}).raise_for_status().json()
        with session_scope(factory_for(fresh_db_url)) as session:
            token = create_token(session, name="gw", role="ingest", by="test",
                                 now=datetime.fromtimestamp(END, UTC))[1]
        again = client.post("/api/v1/requests", json=truth, headers={"Authorization": f"Bearer {token}"}).json()
    by_class = {c["traffic_class"]: c for c in dist["classes"]}
    assert set(by_class) == {"chat", "code"}
    for cls, row in by_class.items():
        mine = [r for r in truth if r["labels"]["traffic_class"] == cls]
        assert row["requests"] == len(mine) > 0
        assert row["draft_tokens"] == sum(r["speculative_decoding"]["num_draft_tokens"] for r in mine)
        assert row["accepted_tokens"] == sum(r["speculative_decoding"]["num_accepted_draft_tokens"] for r in mine)
        assert row["output_tokens"] == sum(r["output_tokens"] for r in mine)
        assert sum(row["histogram"]["counts"]) == row["requests_with_drafts"]
    assert by_class["chat"]["draft_token_weighted_alpha"] > 0.55 > by_class["code"]["draft_token_weighted_alpha"]
    assert rec["coverage"] == {"drafts": 1.0, "draft_tokens": 1.0, "accepted_tokens": 1.0} and rec["flags"] == []
    assert len(lowest["requests"]) == 5
    # the same records posted again (a gateway replaying them): every id is already stored
    assert (again["stored"], again["duplicates"], again["refused"]) == (0, len(truth), 0)
