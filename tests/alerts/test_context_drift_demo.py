"""The per-request demo shows long-context drift: the built-in scenario `per-request` (what `specwatch demo
--per-request` runs) drafts worse on long code prompts, and with the demo's own rules (demo_setup.demo_rules)
the real evaluation path fires `context_drift` for code, with the α of each side equal to the records'
own, and never for chat (all its prompts are short)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from backend.cli import demo_per_request, demo_setup
from backend.config import Settings
from backend.domain.alert_config import parse_config
from backend.services import alerts, request_ingest
from backend.sim.fleet import FleetSim
from backend.sim.scenario import load_scenario
from backend.sim.server import request_record
from tests.alerts.conftest import state

SIM_SECONDS = 150.0
BUCKET = 60
BOUNDARY = 32768


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(_env_file=None, alert_rules_file=tmp_path / "none.yaml", bucket_seconds=BUCKET)


def _sides(items: list[dict], cls: str) -> tuple[float, float]:
    """Σ accepted / Σ drafted of the class's drafting records below and at or above the boundary."""
    def alpha(rs):
        return sum(r["speculative_decoding"]["num_accepted_draft_tokens"] for r in rs) / \
            sum(r["speculative_decoding"]["num_draft_tokens"] for r in rs)
    mine = [r for r in items if r["labels"]["traffic_class"] == cls and r["speculative_decoding"]["num_spec_steps"]]
    return (alpha([r for r in mine if r["prompt_tokens"] < BOUNDARY]),
            alpha([r for r in mine if r["prompt_tokens"] >= BOUNDARY]))


def test_the_demo_rules_read_an_hour_and_fire_after_one_bucket() -> None:
    raw = next(r for r in demo_setup.demo_rules(BUCKET)["rules"] if r["kind"] == "context_drift")
    assert (raw["window"], raw["for"], raw["boundary"]) == ("1h", f"{BUCKET}s", BOUNDARY)
    rule = next(r for r in parse_config(demo_setup.demo_rules(BUCKET)).rules if r.kind == "context_drift")
    assert (rule.params["window"], rule.for_seconds) == (3600.0, 60.0)


def test_the_per_request_demo_fires_context_drift_for_code(db: Session, settings: Settings, now: datetime) -> None:
    sim = FleetSim(load_scenario(demo_per_request.SCENARIO), seed=3)
    sim.advance_to(int(SIM_SECONDS / sim.tick))
    base = (now - timedelta(seconds=30)).timestamp() - SIM_SECONDS
    items = [request_record(r, base + r["finish_offset"]) for r in sim.take_requests()]
    assert {i["model"] for i in items} == {"Qwen/Qwen3-8B"} and all("prompt_tokens" in i for i in items)
    for i in range(0, len(items), 5000):
        request_ingest.ingest(db, items[i:i + 5000], settings=settings, now=now)
    short, long = _sides(items, "code")
    assert short - long > 0.1  # the scenario's drift, read from the records themselves
    assert max(i["prompt_tokens"] for i in items if i["labels"]["traffic_class"] == "chat") < BOUNDARY

    alerts.store_config(db, demo_setup.demo_rules(BUCKET), source="test", by="test", now=now)
    alerts.evaluate(db, settings=settings, now=now)
    code = state(db, "context-drift", "code")
    assert code.phase == "pending" and code.last_status == "breached"  # `for`: one bucket
    alerts.evaluate(db, settings=settings, now=now + timedelta(seconds=BUCKET))
    code = state(db, "context-drift", "code")
    assert code.phase == "firing" and code.last_status == "breached"
    v = code.last_values
    assert v["alpha_short"] == pytest.approx(short, abs=1e-12) and v["alpha_long"] == pytest.approx(long, abs=1e-12)
    assert v["difference_interval"][0] > v["margin"] == 0.05 and v["window"] == "1h"
    chat = state(db, "context-drift", "chat")
    assert chat.phase == "inactive" and chat.last_status == "no_data"
