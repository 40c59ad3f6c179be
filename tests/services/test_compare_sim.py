"""Drafter A/B on simulated traffic (the scrape path into real Postgres): before/after an upgrade with a known
effect, two drafters side by side, and the quieter-week control (the same drafter at a lower load)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import config_repo
from backend.db.models import Pool
from backend.db.session import make_engine
from backend.services import compare
from backend.services.history import seed_history
from backend.services.windows import Range
from backend.sim.scenario import load_scenario
from tests.support.stack import factory_for

END = 1_796_040_000
SECONDS = 3600
# known effects at K=3 (i.i.d. per-token a): alpha = A/D = (a + a^2 + a^3) / 3, tau = 1 + 3 alpha
ALPHA_060, ALPHA_072 = (0.6 + 0.36 + 0.216) / 3, (0.72 + 0.5184 + 0.373248) / 3  # 0.392, 0.537216
SPEEDUP_CHANGE = (1 + 3 * ALPHA_072) / (1 + 3 * ALPHA_060) - 1  # the same step cost: tau ratio, +20.0 %


def _settings(url: str, model: str) -> Settings:
    return Settings(_env_file=None, database_url=url, bucket_seconds=60, stale_after_seconds=10**9,
                    gpu_hour_price={model: 4.0}, pool_replicas={model: {"*": 1}})


@contextmanager
def _seed(url: str, name: str) -> Iterator[tuple[Settings, Session, datetime]]:
    sc = load_scenario(name)
    s = _settings(url, sc.pools[0].model)
    seed_history(factory_for(url), s, scenario=sc, seconds=SECONDS, end=END, seed=11, tick=1.0)
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            yield s, session, datetime.fromtimestamp(END, UTC)
    finally:
        engine.dispose()


def _metric(scope: dict, name: str) -> dict:
    return next(m for m in scope["metrics"] if m["metric"] == name)


def _scope(r: dict, name: str) -> dict:
    return next(s for s in r["scopes"] if s["scope"] == name)


def test_upgrade_before_after_known_effect(fresh_db_url):
    with _seed(fresh_db_url, "drafter-upgrade") as (s, session, now):
        model = "meta-llama/Llama-3.1-70B-Instruct"
        at = now - timedelta(seconds=1800)  # the simulator's change at t = 1800 s (its clock starts 15 s early)
        chat_pool = session.query(Pool).filter_by(traffic_class="chat", spec_mode="eagle3").one()
        config_repo.record(session, pool_id=chat_pool.id, at=at, field="drafter", old="EAGLE-3", new="EAGLE-3.1",
                           source="annotation", now=now)
        session.commit()
        r = compare.compare(session, model=model, a="eagle3", at=at, span_seconds=1800, now=now, settings=s)
        assert r["mode"] == "before-after" and (r["a"]["label"], r["b"]["label"]) == ("drafter EAGLE-3", "drafter EAGLE-3.1")
        chat, code = _scope(r, "chat"), _scope(r, "code")
        a = _metric(chat, "alpha")
        assert a["a"] == pytest.approx(ALPHA_060, rel=0.03) and a["b"] == pytest.approx(ALPHA_072, rel=0.03)
        assert a["change_low"] < ALPHA_072 / ALPHA_060 - 1 < a["change_high"]
        assert a["verdict"] == "better"
        sp = _metric(chat, "measured_speedup")
        assert sp["verdict"] == "better"
        assert sp["change_low"] < SPEEDUP_CHANGE < sp["change_high"]
        assert _metric(chat, "cost_per_mtok")["verdict"] == "better"
        for name in ("alpha", "measured_speedup"):  # code kept its acceptance: no significant change
            m = _metric(code, name)
            assert m["verdict"] == "no-significant-change" and m["change_low"] < 0 < m["change_high"]
        assert chat["bands"] == ["9-32"] and chat["compared_fraction"] == 1.0
        assert r["sentence"].startswith("drafter EAGLE-3.1 vs drafter EAGLE-3 on meta-llama/Llama-3.1-70B-Instruct: "
                                        "speedup +20 % (")
        assert " on chat, " in r["sentence"] and " on code; saving " in r["sentence"]
        csv_text = compare.to_csv(r)
        assert csv_text.splitlines()[0].startswith("model,mode,a,b,scope,metric")
        assert any(line.split(",")[4:6] == ["chat", "alpha"] for line in csv_text.splitlines())


def test_two_drafters_side_by_side(fresh_db_url):
    with _seed(fresh_db_url, "drafter-side-by-side") as (s, session, now):
        r = compare.compare(session, model="meta-llama/Llama-3.1-70B-Instruct", a="eagle3", b="eagle3.1",
                            rng=Range(now - timedelta(seconds=SECONDS), now), now=now, settings=s)
        chat = _scope(r, "chat")
        a, sp = _metric(chat, "alpha"), _metric(chat, "measured_speedup")
        # collection stores no drafter name for these pools: each side is named by its spec mode
        assert (r["a"]["label"], r["b"]["label"]) == ("eagle3", "eagle3.1")
        assert a["a"] == pytest.approx(ALPHA_060, rel=0.03) and a["b"] == pytest.approx(ALPHA_072, rel=0.03)
        assert a["verdict"] == sp["verdict"] == "better"
        assert a["change_low"] < ALPHA_072 / ALPHA_060 - 1 < a["change_high"]
        assert sp["change_low"] < SPEEDUP_CHANGE < sp["change_high"]
        assert r["sentence"].startswith("eagle3.1 vs eagle3 on meta-llama/Llama-3.1-70B-Instruct: speedup +20 % (")


def test_quieter_week_control_is_not_better(fresh_db_url):
    with _seed(fresh_db_url, "quieter-week") as (s, session, now):
        at = now - timedelta(seconds=1800)
        r = compare.compare(session, model="meta-llama/Llama-3.1-8B-Instruct", at=at, span_seconds=1800, now=now,
                            settings=s)
        chat = _scope(r, "chat")
        assert sorted(chat["bands"]) == ["1-8", "33-128"]
        for m in chat["metrics"]:
            assert m["verdict"] != "better", m
        assert _metric(chat, "measured_speedup")["verdict"] == "no-significant-change"
