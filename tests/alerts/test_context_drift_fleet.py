"""context_drift through the evaluator on a real migrated Postgres: the per-request records of a simulated
fleet whose code class drafts worse on long prompts fire it for that class only; the same fleet without the
drift never fires it (several seeds)."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.services import alerts, request_ingest
from backend.sim.fleet import FleetSim
from backend.sim.scenario import load_scenario
from backend.sim.server import request_record
from tests.alerts.conftest import state

SIM_SECONDS = 150.0
FLEET = {
    "name": "long-context-drift",
    "tick": 0.1,
    "pools": [{
        "id": "shared", "model": "m1", "traffic_class": "default", "spec_mode": "eagle3", "k": 3,
        "acceptance": {"mode": "iid", "a": 0.7},
        "concurrency": 24,
        "output_len": {"mean": 80, "sigma": 0.5, "max": 400},
        "per_request": {"classes": [
            {"name": "chat", "share": 0.5, "acceptance": {"mode": "iid", "a": 0.75},
             "prompt_len": {"mean": 900, "sigma": 0.6, "max": 8000}},
            # half of the code prompts at or above 32K: the long side of the rule
            {"name": "code", "share": 0.5, "acceptance": {"mode": "iid", "a": 0.6},
             "prompt_len": {"mean": 40000, "sigma": 1.0, "max": 400000},
             "context_drift": {"from": 8192, "per_doubling": 0.15}},
        ]},
    }],
}
RULES = {"version": 1, "rules": [{"name": "context-drift", "kind": "context_drift", "boundary": 32768,
                                  "margin": 0.05, "recover_margin": 0.02, "window": 600, "min_drafts": 500,
                                  "for": 0, "keep_firing_for": 0}]}


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(_env_file=None, alert_rules_file=tmp_path / "none.yaml")


def _ingest(db: Session, scenario: dict, *, seed: int, now: datetime, settings: Settings) -> list[dict]:
    sim = FleetSim(load_scenario(scenario), seed=seed)
    sim.advance_to(int(SIM_SECONDS / sim.tick))
    end = now - timedelta(seconds=30)
    base = end.timestamp() - SIM_SECONDS
    items = [request_record(r, base + r["finish_offset"]) for r in sim.take_requests()]
    assert len(items) > 2000 and all("prompt_tokens" in i for i in items)
    for i in range(0, len(items), 5000):
        request_ingest.ingest(db, items[i:i + 5000], settings=settings, now=now)
    return items


def _sides(items: list[dict], cls: str) -> tuple[float, float]:
    def alpha(rs):
        return sum(r["speculative_decoding"]["num_accepted_draft_tokens"] for r in rs) / \
            sum(r["speculative_decoding"]["num_draft_tokens"] for r in rs)
    mine = [r for r in items if r["labels"]["traffic_class"] == cls and r["speculative_decoding"]["num_spec_steps"]]
    return alpha([r for r in mine if r["prompt_tokens"] < 32768]), alpha([r for r in mine if r["prompt_tokens"] >= 32768])


def test_long_context_drift_fires_for_the_drifting_class(db: Session, settings: Settings, now: datetime) -> None:
    items = _ingest(db, FLEET, seed=3, now=now, settings=settings)
    alerts.store_config(db, RULES, source="test", by="test", now=now)
    alerts.evaluate(db, settings=settings, now=now)
    code = state(db, "context-drift", "code")
    short, long = _sides(items, "code")
    assert short - long > 0.1  # the simulated drift, from the records themselves
    assert code.phase == "firing" and code.last_status == "breached"
    v = code.last_values
    assert v["alpha_short"] == pytest.approx(short, abs=1e-12) and v["alpha_long"] == pytest.approx(long, abs=1e-12)
    assert v["difference_interval"][0] > 0.05 and v["drafts_long"] >= 500
    chat = state(db, "context-drift", "chat")  # chat prompts are all short: nothing to compare
    assert chat.phase == "inactive" and chat.last_status == "no_data"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_drift_free_fleet_never_fires(db: Session, settings: Settings, now: datetime, seed: int) -> None:
    fleet = copy.deepcopy(FLEET)
    del fleet["pools"][0]["per_request"]["classes"][1]["context_drift"]
    items = _ingest(db, fleet, seed=seed, now=now, settings=settings)
    alerts.store_config(db, RULES, source="test", by="test", now=now)
    alerts.evaluate(db, settings=settings, now=now)
    code = state(db, "context-drift", "code")
    short, long = _sides(items, "code")
    assert abs(short - long) < 0.05
    assert code.phase == "inactive" and code.last_status == "ok", code.last_values
