"""context_drift through the evaluator on a real migrated Postgres: the per-request records of a simulated
fleet whose code class drafts worse on long prompts fire it for that class only; the same fleet without the
drift never fires it (several seeds)."""

from __future__ import annotations

import copy
from datetime import datetime

import pytest
from sqlalchemy.orm import Session

from backend.config import Settings
from tests.alerts.conftest import state
from tests.support.per_request_sim import alpha_sides, firing_values, ingest_and_evaluate, shared_pool

SIM_SECONDS = 150.0
FLEET = shared_pool("long-context-drift", concurrency=24, output_len={"mean": 80, "sigma": 0.5, "max": 400},
                    per_request={"classes": [
                        {"name": "chat", "share": 0.5, "acceptance": {"mode": "iid", "a": 0.75},
                         "prompt_len": {"mean": 900, "sigma": 0.6, "max": 8000}},
                        # half of the code prompts at or above 32K: the long side of the rule
                        {"name": "code", "share": 0.5, "acceptance": {"mode": "iid", "a": 0.6},
                         "prompt_len": {"mean": 40000, "sigma": 1.0, "max": 400000},
                         "context_drift": {"from": 8192, "per_doubling": 0.15}},
                    ]})
RULES = {"version": 1, "rules": [{"name": "context-drift", "kind": "context_drift", "boundary": 32768,
                                  "margin": 0.05, "recover_margin": 0.02, "window": 600, "min_drafts": 500,
                                  "for": 0, "keep_firing_for": 0}]}


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(_env_file=None, alert_rules_file=tmp_path / "none.yaml")


def _run(db: Session, fleet: dict, *, seed: int, now: datetime, settings: Settings) -> list[dict]:
    return ingest_and_evaluate(db, fleet, RULES, seed=seed, seconds=SIM_SECONDS, field="prompt_tokens", now=now,
                               settings=settings)


def _sides(items: list[dict], cls: str) -> tuple[float, float]:
    return alpha_sides(items, cls, lambda r: r["prompt_tokens"] >= 32768)


def test_long_context_drift_fires_for_the_drifting_class(db: Session, settings: Settings, now: datetime) -> None:
    items = _run(db, FLEET, seed=3, now=now, settings=settings)
    v, short, long = firing_values(db, "context-drift", "code", items, lambda r: r["prompt_tokens"] >= 32768)
    assert v["alpha_short"] == pytest.approx(short, abs=1e-12) and v["alpha_long"] == pytest.approx(long, abs=1e-12)
    assert v["difference_interval"][0] > 0.05 and v["drafts_long"] >= 500
    chat = state(db, "context-drift", "chat")  # chat prompts are all short: nothing to compare
    assert chat.phase == "inactive" and chat.last_status == "no_data"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_drift_free_fleet_never_fires(db: Session, settings: Settings, now: datetime, seed: int) -> None:
    fleet = copy.deepcopy(FLEET)
    del fleet["pools"][0]["per_request"]["classes"][1]["context_drift"]
    items = _run(db, fleet, seed=seed, now=now, settings=settings)
    code = state(db, "context-drift", "code")
    short, long = _sides(items, "code")
    assert abs(short - long) < 0.05
    assert code.phase == "inactive" and code.last_status == "ok", code.last_values
