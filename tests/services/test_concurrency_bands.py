"""α and τ by concurrency band from per-request records (GET /requests/acceptance's by_concurrency):
the record's own running_requests first, else the engine pool's running_mean of the record's bucket (the
model's engine pools of that spec mode when its class has none); hand-computed values; bad
running_requests refused."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.services import per_request as svc
from backend.services import request_checks, request_ingest
from backend.services.windows import Range
from tests.factories import make_bucket, make_pool


def rec(rid: str, hist: list[int], finish: datetime, *, cls: str = "chat", running: int | None = None) -> dict:
    k = len(hist) - 1
    steps = sum(hist)
    out = {"request_id": rid, "model": "m1", "spec_mode": "eagle3", "labels": {"traffic_class": cls},
           "finish_time": finish.timestamp(), "output_tokens": 100,
           "speculative_decoding": {"num_spec_tokens": k, "num_spec_steps": steps, "num_draft_tokens": k * steps,
                                    "num_accepted_draft_tokens": sum(j * h for j, h in enumerate(hist)),
                                    "acceptance_histogram": hist}}
    return out if running is None else {**out, "running_requests": running}


@pytest.fixture
def engine_buckets(db: Session, now: datetime) -> tuple[datetime, datetime]:
    """The chat engine pool of m1: 12 running requests in the minute b1 ("9-32"), 50 in b2 ("33-128"); its
    code engine pool: 200 in b2 (">128"); another spec mode's pool: never read."""
    pool = make_pool(db, model_name="m1", traffic_class="chat", spec_mode="eagle3")
    b1, b2 = now - timedelta(minutes=5), now - timedelta(minutes=4)
    make_bucket(db, pool, b1, running_mean=12.0)
    make_bucket(db, pool, b2, running_mean=50.0)
    make_bucket(db, make_pool(db, model_name="m1", traffic_class="code", spec_mode="eagle3"), b2, running_mean=200.0)
    other = make_pool(db, model_name="m1", traffic_class="chat", spec_mode="ngram")
    make_bucket(db, other, b1, running_mean=500.0)
    make_bucket(db, other, b2, running_mean=500.0)
    return b1, b2


def test_hand_computed_bands_and_bases(db: Session, now: datetime, settings: Settings, hour: Range,
                                       engine_buckets) -> None:
    b1, b2 = engine_buckets
    mid1, mid2 = b1 + timedelta(seconds=30), b2 + timedelta(seconds=30)
    items = [rec("r1", [0, 1, 1, 1], mid1), rec("r2", [1, 0, 1, 0], mid1),  # pool band 9-32
             rec("r3", [0, 0, 0, 3], mid1, running=4),  # the record's own: 1-8
             rec("r7", [0, 1, 0, 0], mid1, running=40),  # the record's own: 33-128 (bucket b1)
             rec("r4", [1, 1, 0, 0], mid2),  # pool band 33-128 (bucket b2)
             rec("r6", [0, 1, 1, 1], now - timedelta(minutes=10)),  # no engine bucket then: no band
             rec("c1", [0, 0, 1, 1], mid2, cls="code"),  # its own class's engine pool: >128
             rec("c2", [0, 0, 1, 1], mid1, cls="code")]  # no code engine bucket in b1: the model's (chat) pool's
    assert request_ingest.ingest(db, items, settings=settings, now=now).stored == 8
    stored = dict(db.execute(text("SELECT request_id, running_requests FROM request_records")).all())
    assert stored == {"r1": None, "r2": None, "r3": 4, "r7": 40, "r4": None, "r6": None, "c1": None, "c2": None}
    out = {k["traffic_class"]: k for k in svc.distribution(db, model="m1", rng=hour, settings=settings)["classes"]}
    chat = out["chat"]
    bands = {b["band"]: b for b in chat["by_concurrency"]}
    assert list(bands) == ["1-8", "9-32", "33-128"] and chat["requests_without_concurrency"] == 1
    low, mid, high = bands["1-8"], bands["9-32"], bands["33-128"]
    assert (low["basis"], low["requests"], low["draft_token_weighted_alpha"]) == ("record", 1, 1.0)
    assert low["draft_token_weighted_alpha_interval"] == [None, None]  # one request: no interval
    # 9-32: r1 (a 6, d 9, steps 3), r2 (a 2, d 6, steps 2): α = 8/15, τ = 1 + 8/5, request-weighted (2/3 + 1/3)/2
    assert (mid["basis"], mid["requests_by_basis"]) == ("pool", {"record": 0, "pool": 2})
    assert (mid["requests"], mid["drafts"], mid["draft_tokens"], mid["accepted_tokens"]) == (2, 5, 15, 8)
    assert mid["draft_token_weighted_alpha"] == pytest.approx(8 / 15, abs=1e-12)
    assert mid["mean_acceptance_length"] == pytest.approx(2.6, abs=1e-12)
    assert mid["request_weighted_alpha"] == pytest.approx(0.5, abs=1e-12)
    r = 8 / 15
    se = math.sqrt(2 * ((6 - 9 * r) ** 2 + (2 - 6 * r) ** 2)) / 15
    assert mid["draft_token_weighted_alpha_interval"][0] == pytest.approx(max(0.0, r - 1.959963984540054 * se))
    # 33-128: r7 (a 1, d 3, steps 1) in b1 from its record, r4 (a 1, d 6, steps 2) in b2 from the pool
    assert (high["basis"], high["requests_by_basis"], high["buckets"]) == ("record and pool",
                                                                           {"record": 1, "pool": 1}, 2)
    assert high["draft_token_weighted_alpha"] == pytest.approx(2 / 9, abs=1e-12)
    assert high["mean_acceptance_length"] == pytest.approx(1 + 2 / 3, abs=1e-12)
    # dispersion: bucket α 1/3 (d 3) and 1/6 (d 6) around 2/9: (3·(1/9)² + 6·(1/18)²) / (2/9 · 7/9) over 1 df
    assert high["dispersion"] == pytest.approx(81 / 252, abs=1e-12)
    assert high["alpha_vs_low_load"] == pytest.approx(2 / 9 - 17 / 24, abs=1e-12)  # low load: 1-8 and 9-32
    assert chat["load_stability"]["status"] == "no_data"  # 8 drafts: far below min_drafts
    code = out["code"]["by_concurrency"]
    assert [(b["band"], b["basis"], b["requests"]) for b in code] == [("9-32", "pool", 1), (">128", "pool", 1)]


def test_the_window_applies(db: Session, now: datetime, settings: Settings, engine_buckets) -> None:
    b1, _ = engine_buckets
    request_ingest.ingest(db, [rec("r1", [0, 1, 1, 1], b1 + timedelta(seconds=30))], settings=settings, now=now)
    later = Range(b1 + timedelta(minutes=1), now)
    chat = svc.distribution(db, model="m1", rng=later, settings=settings)["classes"]
    assert chat == []  # the only record finished before the window


@pytest.mark.parametrize("bad", [0, -1, 1.5, "12", True, 1_000_001])
def test_bad_running_requests_refuse_the_batch(db: Session, now: datetime, settings: Settings, bad) -> None:
    make_pool(db, model_name="m1", traffic_class="chat", spec_mode="eagle3")
    finish = now - timedelta(minutes=2)
    items = [rec("ok", [0, 1, 1, 1], finish, running=3), {**rec("bad", [0, 1, 1, 1], finish), "running_requests": bad}]
    with pytest.raises(request_checks.BatchRefused, match="record 1: running_requests must be a whole number"):
        request_ingest.ingest(db, items, settings=settings, now=now)
    assert db.execute(text("SELECT count(*) FROM request_records")).scalar() == 0
