"""Per-request records from the simulator: the one-pool fleet the alert and simulator tests build on, its
records ingested and the alerts evaluated on them, and the α of a class on each side of a boundary."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.services import alerts, request_ingest
from backend.sim.fleet import FleetSim
from backend.sim.scenario import load_scenario
from backend.sim.server import request_record


def shared_pool(name: str, *, concurrency, output_len: dict, per_request: dict) -> dict:
    """A scenario of one pool (m1, EAGLE-3, K = 3, α 0.7) whose requests carry per-request classes."""
    return {"name": name, "tick": 0.1, "pools": [{
        "id": "shared", "model": "m1", "traffic_class": "default", "spec_mode": "eagle3", "k": 3,
        "acceptance": {"mode": "iid", "a": 0.7}, "concurrency": concurrency, "output_len": output_len,
        "per_request": per_request}]}


def ingest_and_evaluate(db: Session, scenario: dict, rules: dict, *, seed: int, seconds: float, field: str,
                        now: datetime, settings: Settings) -> list[dict]:
    """Simulate `seconds` of the scenario ending 30 s before `now`, ingest its records (each carrying
    `field`), store `rules` and evaluate them once; the records."""
    sim = FleetSim(load_scenario(scenario), seed=seed)
    sim.advance_to(int(seconds / sim.tick))
    base = (now - timedelta(seconds=30)).timestamp() - seconds
    items = [request_record(r, base + r["finish_offset"]) for r in sim.take_requests()]
    assert len(items) > 2000 and all(field in i for i in items)
    for i in range(0, len(items), 5000):
        request_ingest.ingest(db, items[i:i + 5000], settings=settings, now=now)
    alerts.store_config(db, rules, source="test", by="test", now=now)
    alerts.evaluate(db, settings=settings, now=now)
    return items


def alpha_sides(items: list[dict], cls: str, high: Callable[[dict], bool]) -> tuple[float, float]:
    """The α of `cls`'s drafting records where `high` is false, and where it is true."""
    def alpha(rs):
        return sum(r["speculative_decoding"]["num_accepted_draft_tokens"] for r in rs) / \
            sum(r["speculative_decoding"]["num_draft_tokens"] for r in rs)
    mine = [r for r in items if r["labels"]["traffic_class"] == cls and r["speculative_decoding"]["num_spec_steps"]]
    return alpha([r for r in mine if not high(r)]), alpha([r for r in mine if high(r)])


def firing_values(db: Session, rule: str, cls: str, items: list[dict],
                  high: Callable[[dict], bool]) -> tuple[dict, float, float]:
    """Assert `rule` fires for `cls` and that its records' α falls by more than 0.1 where `high` holds; the
    alert's last values and the two sides' α (from the records themselves)."""
    from tests.alerts.conftest import state

    low_side, high_side = alpha_sides(items, cls, high)
    assert low_side - high_side > 0.1, (low_side, high_side)
    st = state(db, rule, cls)
    assert st.phase == "firing" and st.last_status == "breached", st.last_values
    return st.last_values, low_side, high_side
