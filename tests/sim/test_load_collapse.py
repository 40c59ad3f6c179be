"""The simulator's load options: acceptance that swings above a load (the same draw within a swing period,
none at or below the load), records that carry the engine's running requests, the `load-collapse`
scenario, and named errors for bad values."""

from __future__ import annotations

import copy
import random

import pytest

from backend.sim.fleet import FleetSim
from backend.sim.scenario import ScenarioError, load_scenario
from backend.sim.server import request_record
from tests.alerts.test_load_instability_fleet import FLEET


def test_swing_is_one_draw_per_period_and_only_above_the_load() -> None:
    acc = load_scenario(FLEET).pools[0].per_request.classes[1].acceptance
    assert acc.conditional(32, 7.0) == (0.7, 0.7, 0.7)  # at the load: untouched
    # 64 running: scale max(0.5, 1 - 0.005·32) = 0.84, times 1 - 0.5·u with u the draw of period 7 // 5 = 1
    u = random.Random(1).random()
    assert acc.conditional(64, 7.0) == pytest.approx(tuple([0.7 * 0.84 * (1 - 0.5 * u)] * 3), abs=1e-12)
    assert acc.conditional(64, 5.0) == acc.conditional(64, 9.9)  # the same period, the same draw
    assert acc.conditional(64, 10.0) != acc.conditional(64, 9.9)


def test_records_carry_the_engines_running_requests() -> None:
    sim = FleetSim(load_scenario(FLEET), seed=1)
    sim.advance_to(500)  # 50 s: the 16-running phase (40 s), then the 64 one
    records = [request_record(r, 1_700_000_000 + r["finish_offset"]) for r in sim.take_requests()]
    running = {r["running_requests"] for r in records}
    assert min(running) >= 1 and max(running) <= 64 and any(x > 32 for x in running) and any(x <= 16 for x in running)
    plain = copy.deepcopy(FLEET)
    del plain["pools"][0]["per_request"]["report_running"]
    sim = FleetSim(load_scenario(plain), seed=1)
    sim.advance_to(100)
    assert all("running_requests" not in request_record(r, 1_700_000_000.0) for r in sim.take_requests())


def test_the_built_in_scenario_loads() -> None:
    s = load_scenario("load-collapse")
    code = s.pools[0].per_request.classes[1].acceptance
    assert s.pools[0].per_request.report_running and (code.conc_above, code.conc_swing) == (32, 0.6)


@pytest.mark.parametrize(("change", "message"), [
    ({"swing": 1.5}, r"classes\[1\]\.acceptance\.concurrency\.swing: must be between 0 and 1"),
    ({"swing_seconds": 0}, r"classes\[1\]\.acceptance\.concurrency\.swing_seconds"),
])
def test_bad_swing_is_named(change: dict, message: str) -> None:
    bad = copy.deepcopy(FLEET)
    bad["pools"][0]["per_request"]["classes"][1]["acceptance"]["concurrency"].update(change)
    with pytest.raises(ScenarioError, match=message):
        load_scenario(bad)


def test_bad_report_running_is_named() -> None:
    bad = copy.deepcopy(FLEET)
    bad["pools"][0]["per_request"]["report_running"] = "yes"
    with pytest.raises(ScenarioError, match=r"per_request\.report_running: must be true or false"):
        load_scenario(bad)
