"""load_instability through the evaluator on a real migrated Postgres: a simulated fleet whose code class
drafts worse and unsteadily above 32 running requests fires it for that class (the API's finding agrees);
the same fleet without the collapse never fires it (several seeds). The load alternates between 16 and 64
running requests every 40 s with 5-second buckets, so each side has some 30 buckets in 320 s."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.services import per_request as svc
from backend.services.windows import Range
from tests.alerts.conftest import state
from tests.support.per_request_sim import alpha_sides, firing_values, ingest_and_evaluate, shared_pool

SIM_SECONDS = 320.0
LOAD = {"points": [[0, 16], [40, 64]], "interp": "step", "period": 80}
FLEET = shared_pool("load-collapse", concurrency=LOAD, output_len={"mean": 60, "sigma": 0.5, "max": 300},
                    per_request={"report_running": True, "classes": [
                        {"name": "chat", "share": 0.5, "acceptance": {"mode": "iid", "a": 0.75}},
                        {"name": "code", "share": 0.5, "acceptance": {
                            "mode": "iid", "a": 0.7, "concurrency": {
                                "above": 32, "slope": 0.005, "min_scale": 0.5, "swing": 0.5, "swing_seconds": 5}}},
                    ]})
RULES = {"version": 1, "rules": [{"name": "load-instability", "kind": "load_instability", "boundary": 32,
                                  "margin": 0.05, "recover_margin": 0.02, "dispersion_ratio": 2.0,
                                  "recover_dispersion_ratio": 1.5, "window": 600, "min_drafts": 500,
                                  "for": 0, "keep_firing_for": 0}]}


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(_env_file=None, alert_rules_file=tmp_path / "none.yaml", bucket_seconds=5)


def _run(db: Session, fleet: dict, *, seed: int, now: datetime, settings: Settings) -> list[dict]:
    return ingest_and_evaluate(db, fleet, RULES, seed=seed, seconds=SIM_SECONDS, field="running_requests", now=now,
                               settings=settings)


def _sides(items: list[dict], cls: str) -> tuple[float, float]:
    return alpha_sides(items, cls, lambda r: r["running_requests"] > 32)


def test_collapse_above_32_fires_for_that_class(db: Session, settings: Settings, now: datetime) -> None:
    items = _run(db, FLEET, seed=3, now=now, settings=settings)
    v, low, high = firing_values(db, "load-instability", "code", items, lambda r: r["running_requests"] > 32)
    assert v["alpha_low_load"] == pytest.approx(low, abs=1e-12)
    assert v["alpha_high_load"] == pytest.approx(high, abs=1e-12)
    assert v["falls"] and v["unstable"] and v["dispersion_ratio_interval"][0] > 2.0, v
    chat = state(db, "load-instability", "chat")
    assert chat.phase == "inactive" and chat.last_status == "ok", chat.last_values
    # the page's finding is the same function with the same parameters (the stored rule's)
    page = {k["traffic_class"]: k for k in svc.distribution(
        db, model="m1", rng=Range(now - timedelta(seconds=600), now), settings=settings)["classes"]}
    finding = page["code"]["load_stability"]
    assert finding["finding"] and finding["status"] == "breached" and finding["unstable"]
    assert finding["alpha_high_load"] == pytest.approx(high, abs=1e-12)
    assert finding["dispersion_ratio"] == pytest.approx(v["dispersion_ratio"], rel=1e-12)
    assert not page["chat"]["load_stability"]["finding"]
    assert {b["band"] for b in page["code"]["by_concurrency"]} == {"9-32", "33-128"}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_stable_fleet_never_fires(db: Session, settings: Settings, now: datetime, seed: int) -> None:
    fleet = copy.deepcopy(FLEET)
    del fleet["pools"][0]["per_request"]["classes"][1]["acceptance"]["concurrency"]
    items = _run(db, fleet, seed=seed, now=now, settings=settings)
    for cls in ("code", "chat"):
        low, high = _sides(items, cls)
        assert abs(low - high) < 0.05
        st = state(db, "load-instability", cls)
        assert st.phase == "inactive" and st.last_status == "ok", st.last_values
