"""Counts at exactly the threshold are not below it, through the database: the per-request share below
(SQL) and the fleet row state read 20 requests at alpha exactly 0.55 as not below 0.55."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.services import fleet as fleet_svc
from backend.services import per_request as svc
from backend.services import request_ingest
from backend.services.windows import Range


def rec(rid: str, hist: list[int], *, now: datetime) -> dict:
    k = len(hist) - 1
    steps = sum(hist)
    return {"request_id": rid, "model": "m1", "spec_mode": "eagle3", "labels": {"traffic_class": "chat"},
            "finish_time": (now - timedelta(seconds=120)).timestamp(), "output_tokens": 100,
            "speculative_decoding": {"num_spec_tokens": k, "num_spec_steps": steps, "num_draft_tokens": k * steps,
                                     "num_accepted_draft_tokens": sum(j * h for j, h in enumerate(hist)),
                                     "acceptance_histogram": hist}}


def test_twenty_requests_at_exactly_the_threshold_are_not_below(db: Session, now: datetime, hour: Range,
                                                                  settings: Settings) -> None:
    # K = 4, request n: 5n steps, histogram [0, n, 2n, 2n, 0] -> accepted 11n of 20n draft tokens: alpha 0.55
    # exactly. In float8, `accepted < 0.55 * draft_tokens` holds for n = 5, 9, 10, 11, 17, 18, 19, 20.
    items = [rec(f"r{n}", [0, n, 2 * n, 2 * n, 0], now=now) for n in range(1, 21)]
    items.append(rec("below", [0, 2, 2, 1, 0], now=now))  # 2 + 4 + 3 = 9 of 20: 0.45
    items.append(rec("above", [0, 0, 1, 4, 0], now=now))  # 2 + 12 = 14 of 20: 0.70
    s = settings.model_copy(update={"alpha_threshold": 0.55, "min_drafts": 100})
    assert request_ingest.ingest(db, items, settings=s, now=now).stored == 22
    d = svc.distribution(db, model="m1", rng=hour, settings=s)
    chat = next(c for c in d["classes"] if c["traffic_class"] == "chat")
    assert chat["requests"] == 22
    assert chat["share_below_threshold"] == 1 / 22  # only "below"
    # one more accepted token would not matter, one fewer makes a request below
    items = [rec("r21-less", [1, 20, 42, 42, 0], now=now)]  # 20 + 84 + 126 = 230 of 420: 0.5476
    request_ingest.ingest(db, items, settings=s, now=now)
    chat = next(c for c in svc.distribution(db, model="m1", rng=hour, settings=s)["classes"]
                if c["traffic_class"] == "chat")
    assert chat["share_below_threshold"] == 2 / 23


def test_fleet_row_at_exactly_the_threshold_is_healthy(db: Session, now: datetime, hour: Range,
                                                       settings: Settings) -> None:
    items = [rec(f"r{n}", [0, n, 2 * n, 2 * n, 0], now=now) for n in range(1, 21)]  # 2310 of 4200: 0.55
    s = settings.model_copy(update={"alpha_threshold": 0.55, "min_drafts": 100})
    request_ingest.ingest(db, items, settings=s, now=now)
    rows = {r.traffic_class: r for r in fleet_svc.fleet(db, rng=hour, now=now, settings=s).rows}
    assert rows["chat"].acceptance_rate == 0.55
    assert rows["chat"].state not in ("below-threshold", "no-data", "low-volume", "stale")
