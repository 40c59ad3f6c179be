"""The periodic tasks' cheaper paths give exactly the answers of the full ones, on a seeded fleet (the
periodic benchmark's own history: 8 pools, chat and code, eagle3 and baseline, 3 hours of 1-minute
buckets with ITL/TPOT histograms, rolled up)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries
from backend.db.session import make_engine, make_sessionmaker
from backend.domain.alert_config import parse_config
from backend.services import alert_eval, alert_rules, alerts, analytics, rollout
from backend.services.windows import Range
from benchmarks.periodic_history import build

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 30, 12, 30, tzinfo=UTC)


@pytest.fixture(scope="module")
def seeded(pg_admin_url, pg_template):
    from tests.support import db as dbsupport

    name, url = dbsupport.clone(pg_admin_url, pg_template)
    build(url, 8, now=NOW, raw_hours=3, days=2)
    engine = make_engine(url)
    yield make_sessionmaker(engine)
    engine.dispose()
    dbsupport.drop_database(pg_admin_url, name)


@pytest.fixture
def settings() -> Settings:
    return Settings(_env_file=None, alert_rules_file=str(ROOT / "alerts.example.yaml"))


def test_alert_targets_without_unread_histograms_evaluate_exactly_alike(seeded, settings):
    config = parse_config(alerts.load_file(ROOT / "alerts.example.yaml"))
    windows = {w for r in config.rules for w in r.windows()}
    needs = alert_eval.reads(config)
    latency = needs.latency
    assert latency == {3600.0} and windows - latency  # the example's other windows skip the histograms
    # 5m, 30m and 6h are read by alpha rules only: rate rows, no summary; drift reads 1h's bands only
    assert needs.full == {3600.0} and needs.drift == {3600.0} and windows - needs.full == {300.0, 1800.0, 21600.0}
    with seeded() as session:
        full = alert_eval.snapshot(session, windows=windows, now=NOW, settings=settings)
        cheap = alert_eval.snapshot(session, windows=windows, now=NOW, settings=settings, latency_windows=latency,
                                    full_windows=needs.full, drift_windows=needs.drift)
    assert full.keys() == cheap.keys() and len(full) == 6  # 4 class rows + 2 mixed
    verdicts = set()
    for key, target in full.items():
        for rule in config.rules:
            if rule.kind == "pool_limit":
                continue
            a = alert_rules.evaluate(rule, target, now=NOW, stale_after_seconds=300)
            b = alert_rules.evaluate(rule, cheap[key], now=NOW, stale_after_seconds=300)
            assert a == b, (key, rule.name)
            if rule.kind == "latency_regression":
                verdicts.add(a.status)
        # the one window a latency rule reads has the histograms, equal; the alpha-only ones carry the same
        # rate, drafts and K as the whole summary, without its latency work
        assert cheap[key].rows[3600.0].tpot == target.rows[3600.0].tpot
        assert cheap[key].rows[3600.0].tpot is not None
        for w in windows - needs.full:
            light, whole = cheap[key].rows[w], target.rows[w]
            assert isinstance(light, alert_eval.RateRow) and whole.tpot is not None
            assert (light.acceptance_rate, light.volume.drafts, light.num_spec_tokens) == (
                whole.acceptance_rate, whole.volume.drafts, whole.num_spec_tokens)
            assert light.acceptance_rate is not None and light.volume.drafts > 0
        assert cheap[key].band_alpha.keys() == {3600.0} and cheap[key].band_alpha[3600.0] == target.band_alpha[3600.0]
    assert verdicts <= {"breached", "ok", "hold", "no_data"} and verdicts - {"no_data"}  # a latency rule decided


def _p99_rows(session: Session, settings: Settings, quantiles: tuple[float, ...]) -> list:
    rng = Range(NOW - timedelta(hours=2), NOW)
    pools = queries.list_pools(session)
    data = analytics.fetch(session, pools=pools, rng=rng, settings=settings)
    out = []
    for model in sorted({p.model_name for p in pools}):
        mpools = [p for p in pools if p.model_name == model]
        for row in analytics.model_summaries(mpools, data, settings=settings, now=NOW, quantiles=quantiles):
            out.append((row.traffic_class, rollout._p99(row), rollout._p99(row, "itl"), row.acceptance_rate))
    return out


def test_rollout_p99_alone_is_the_p99_among_three_quantiles(seeded, settings):
    with seeded() as session:
        three = _p99_rows(session, settings, (0.5, 0.9, 0.99))
        alone = _p99_rows(session, settings, (0.99,))
    assert three == alone and len(three) == 6
    assert {r[1]["verdict"] for r in three} - {None}  # real verdicts were compared
