"""A class that exists only through per-request records reads like any pool (summary, fleet, alert targets);
the per-request views (distribution, lowest export, reconciliation) give hand-computed values; retention."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db.models_requests import RequestLabelValue, RequestRecordRow
from backend.domain import request_stats
from backend.domain.per_request import accepted_per_position
from backend.domain.records import BucketRecord, PoolKey
from backend.services import alert_eval, analytics, request_ingest, rollup
from backend.services import fleet as fleet_svc
from backend.services import per_request as svc
from backend.services.ingest import write_records
from backend.services.windows import Range


def rec(rid: str, hist: list[int], *, now: datetime, cls: str, ago: float = 120, output: int = 100,
        tenant: str = "acme") -> dict:
    k = len(hist) - 1
    steps = sum(hist)
    return {"request_id": rid, "model": "m1", "spec_mode": "eagle3",
            "labels": {"traffic_class": cls, "tenant": tenant},
            "finish_time": (now - timedelta(seconds=ago)).timestamp(), "output_tokens": output,
            "speculative_decoding": {"num_spec_tokens": k, "num_spec_steps": steps, "num_draft_tokens": k * steps,
                                     "num_accepted_draft_tokens": sum(j * h for j, h in enumerate(hist)),
                                     "acceptance_histogram": hist}}


# K = 3. chat: alphas 20/30, 10/12; code: 2/30, 9/9 (1.0), 0/6 (0.0)
CHAT = [("c1", [1, 2, 3, 4], 100), ("c2", [0, 1, 0, 3], 40)]
CODE = [("k1", [8, 2, 0, 0], 400), ("k2", [0, 0, 0, 3], 12), ("k3", [2, 0, 0, 0], 5)]


def test_per_position_counts_from_the_histogram() -> None:
    # P_i = drafts whose first i+1 tokens were accepted = steps that accepted more than i tokens
    assert accepted_per_position([1, 2, 3, 4]) == [2 + 3 + 4, 3 + 4, 4]
    assert accepted_per_position([5, 0, 0, 0, 0, 1]) == [1, 1, 1, 1, 1]
    assert accepted_per_position([7, 0]) == [0]
    hist = [3, 1, 4, 1, 5]
    assert sum(accepted_per_position(hist)) == sum(j * h for j, h in enumerate(hist))


@pytest.fixture
def ingested(db: Session, now: datetime, settings: Settings) -> Settings:
    items = [rec(r, h, now=now, cls="chat", output=o) for r, h, o in CHAT]
    items += [rec(r, h, now=now, cls="code", output=o, tenant="beta") for r, h, o in CODE]
    report = request_ingest.ingest(db, items, settings=settings, now=now)
    assert report.stored == 5
    return settings


def _engine_bucket(db: Session, now: datetime, *, drafts: float, draft_tokens: float, accepted: float,
                   per_pos: list[float]) -> None:
    start = (now - timedelta(seconds=600)).timestamp() // 60 * 60
    write_records(db, [BucketRecord(pool=PoolKey("m1", "default", "eagle3"), bucket_start=start, drafts=drafts,
                                    draft_tokens=draft_tokens, accepted_tokens=accepted, accepted_per_pos=per_pos)],
                  width=60, source="prometheus", now=now)


def test_summary_fleet_and_alert_targets_include_per_request_classes(db: Session, now, hour: Range, ingested) -> None:
    s = analytics.summary(db, model_name="m1", rng=hour, now=now, settings=ingested)
    rows = {(c.traffic_class, c.spec_mode): c for c in s.classes}
    chat, code, mixed = rows[("chat", "eagle3")], rows[("code", "eagle3")], rows[("mixed", "eagle3")]
    assert chat.acceptance_rate == 30 / 42 and chat.volume.drafts == 14 and chat.num_spec_tokens == 3
    assert code.acceptance_rate == 11 / 45
    assert mixed.acceptance_rate == 41 / 87  # pooled counts, not a mean of the class rates
    assert chat.mean_acceptance_length == 1 + 30 / 14
    # per-position from the summed histograms: chat [1,2,3,4] + [0,1,0,3] -> P = [9+4, 7+3, 4+3]
    assert chat.per_position_unconditional == [13 / 14, 10 / 14, 7 / 14]
    fleet = fleet_svc.fleet(db, rng=hour, now=now, settings=ingested)
    fleet_rows = {(r.model_name, r.traffic_class, r.spec_mode): r for r in fleet.rows}
    assert fleet_rows[("m1", "code", "eagle3")].acceptance_rate == 11 / 45
    assert fleet_rows[("m1", "code", "eagle3")].state == "low-volume"  # 15 drafts < min_drafts
    targets = alert_eval.snapshot(db, windows={3600.0}, now=now, settings=ingested)
    assert targets[("m1", "code", "eagle3")].rows[3600.0].acceptance_rate == 11 / 45


def test_distribution(db: Session, now, hour: Range, ingested) -> None:
    d = svc.distribution(db, model="m1", rng=hour, settings=ingested)
    by = {c["traffic_class"]: c for c in d["classes"]}
    code = by["code"]
    alphas = sorted([2 / 30, 1.0, 0.0])
    assert code["requests"] == 3 and code["draft_tokens"] == 45
    assert code["draft_token_weighted_alpha"] == pytest.approx(11 / 45, abs=1e-15)
    assert code["request_weighted_alpha"] == pytest.approx(sum(alphas) / 3, abs=1e-12)
    assert code["share_below_threshold"] == pytest.approx(2 / 3)
    assert code["p50"] == pytest.approx(2 / 30)  # linear interpolation over [0, 0.0667, 1]
    assert code["p10"] == pytest.approx(0.2 * 2 / 30)
    assert code["p90"] == pytest.approx(2 / 30 + 0.8 * (1 - 2 / 30))
    counts = code["histogram"]["counts"]
    assert (counts[0], counts[1], counts[19], sum(counts)) == (1, 1, 1, 3)  # 0.0, 0.0667 in [0.05, 0.1), 1.0
    lengths = {b["output_tokens_from"]: b for b in code["by_output_length"]}
    assert lengths[256]["requests"] == 1 and lengths[256]["draft_token_weighted_alpha"] == pytest.approx(2 / 30)
    assert by["chat"]["p50"] == pytest.approx((20 / 30 + 10 / 12) / 2)
    only_beta = svc.distribution(db, model="m1", rng=hour, settings=ingested, label_filter={"tenant": "beta"})
    assert [c["traffic_class"] for c in only_beta["classes"]] == ["code"]


def test_lowest_export(db: Session, now, hour: Range, ingested) -> None:
    out = svc.lowest_requests(db, model="m1", rng=hour, settings=ingested, limit=3, min_draft_tokens=1)
    assert [r["request_id"] for r in out["requests"]] == ["k3", "k1", "c1"]  # 0, 0.0667, then 0.6667 (30 drafted)
    assert out["requests"][0]["labels"] == {"traffic_class": "code", "tenant": "beta"}
    assert "prompt" not in out["requests"][0]
    assert svc.lowest_requests(db, model="m1", rng=hour, settings=ingested, limit=3,
                               min_draft_tokens=10)["requests"][0]["request_id"] == "k1"


def test_reconciliation_full_and_partial(db: Session, now, hour: Range, ingested) -> None:
    # the engine counted exactly the five requests: coverage 1
    hists = [h for _, h, _ in CHAT + CODE]
    drafts = sum(sum(h) for h in hists)
    accepted = sum(sum(j * x for j, x in enumerate(h)) for h in hists)
    per_pos = [sum(accepted_per_position(h)[i] for h in hists) for i in range(3)]
    _engine_bucket(db, now, drafts=drafts, draft_tokens=3 * drafts, accepted=accepted, per_pos=per_pos)
    r = svc.reconciliation(db, model="m1", rng=hour, settings=ingested)
    assert r["engine"]["drafts"] == r["per_request"]["drafts"] == drafts
    assert r["coverage"] == {"drafts": 1.0, "draft_tokens": 1.0, "accepted_tokens": 1.0}
    assert r["flags"] == []
    # ten more engine drafts that no record reports: coverage below 1, flagged
    _engine_bucket(db, now - timedelta(minutes=5), drafts=10, draft_tokens=30, accepted=5, per_pos=[3, 1, 1])
    r = svc.reconciliation(db, model="m1", rng=hour, settings=ingested)
    assert r["coverage"]["drafts"] == drafts / (drafts + 10)
    assert r["flags"] == ["partial_coverage"]


def test_reconciliation_flags_each_coverage(db: Session, now, hour: Range, ingested) -> None:
    # the engine counted the same drafts and draft tokens as the records, but 46 accepted tokens where the
    # records report 41 (30 chat + 11 code): accepted-token coverage 41/46 = 0.891, flagged on its own
    hists = [h for _, h, _ in CHAT + CODE]
    drafts = sum(sum(h) for h in hists)
    _engine_bucket(db, now, drafts=drafts, draft_tokens=3 * drafts, accepted=46, per_pos=[20, 15, 11])
    r = svc.reconciliation(db, model="m1", rng=hour, settings=ingested)
    assert r["per_request"]["accepted_tokens"] == 41
    assert r["coverage"] == {"drafts": 1.0, "draft_tokens": 1.0, "accepted_tokens": 41 / 46}
    assert r["coverage_flags"] == {"drafts": None, "draft_tokens": None, "accepted_tokens": "partial_coverage"}
    assert r["flags"] == ["partial_coverage"]
    assert r["coverage_band"] == [0.98, 1.02]


def test_coverage_flag_band_is_exact() -> None:
    assert request_stats.coverage_flag(49, 50) is None  # exactly 0.98: inside the band
    assert request_stats.coverage_flag(48.99, 50) == "partial_coverage"
    assert request_stats.coverage_flag(51, 50) is None  # exactly 1.02
    assert request_stats.coverage_flag(51.01, 50) == "per_request_exceeds_engine"
    assert request_stats.coverage_flag(5, 0) is None and request_stats.coverage_flag(None, 50) is None  # undefined: no flag


def test_retention_deletes_old_rows_and_unused_label_values(db: Session, now, ingested) -> None:
    settings = ingested.model_copy(update={"requests_retention_days": 1.0})
    later = now + timedelta(days=1, minutes=5)
    request_ingest.ingest(db, [rec("fresh", [1, 1, 0, 0], now=later, cls="chat")], settings=settings, now=later)
    res = rollup.storage(db, settings=settings, now=later)
    assert res.request_rows_deleted == 5
    assert db.scalars(select(RequestRecordRow.request_id)).all() == ["fresh"]
    assert sorted(db.scalars(select(RequestLabelValue.value)).all()) == ["acme", "chat"]
    assert db.scalar(select(func.count()).select_from(RequestRecordRow)) == 1
