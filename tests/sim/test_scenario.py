"""Scenario validation: every bad field is named, with the problem; the CLI exits 2 with that message."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from backend.cli import sim as sim_cli
from backend.sim.scenario import (
    ScenarioError,
    builtin_names,
    load_scenario,
    parse_scenario,
)
from backend.sim.scenario_fields import solve_iid_a
from tests.support.deadline import deadline

GOOD = {
    "name": "t",
    "pools": [
        {"id": "chat-spec", "model": "m", "traffic_class": "chat", "spec_mode": "eagle3", "k": 3,
         "acceptance": {"mode": "iid", "a": 0.8}, "concurrency": 4},
        {"id": "chat-base", "model": "m", "traffic_class": "chat", "spec_mode": "off", "concurrency": 4},
    ],
}


def bad(mutate) -> str:
    raw = copy.deepcopy(GOOD)
    mutate(raw)
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(raw)
    return str(exc.value)


def test_good_scenario_parses() -> None:
    sc = parse_scenario(copy.deepcopy(GOOD))
    assert [p.id for p in sc.pools] == ["chat-spec", "chat-base"]
    assert sc.pools[0].k == 3 and sc.pools[0].acceptance.p == (0.8, 0.8, 0.8)
    assert sc.pools[1].k == 0 and sc.pools[1].acceptance is None


def test_builtins_load() -> None:
    names = builtin_names()
    assert {"steady", "drift", "restart", "long-context"} <= set(names)
    for name in names:
        sc = load_scenario(name)
        assert sc.pools and sc.name == name
        assert any(p.spec_mode == "off" for p in sc.pools)


@pytest.mark.parametrize(("mutate", "expected"), [
    # out of range
    (lambda r: r["pools"][0]["acceptance"].update(a=1.3), "pools[0].acceptance.a: must be between 0 and 1, got 1.3"),
    (lambda r: r["pools"][1].update(concurrency=-2), "pools[1].concurrency: must be >= 0, got -2"),
    (lambda r: r["pools"][0].update(k=0), "pools[0].k: must be between 1 and 16, got 0"),
    (lambda r: r.update(tick=0), "tick: must be between 0.001 and 60, got 0"),
    # wrong type
    (lambda r: r["pools"][0].update(k="three"), "pools[0].k: must be an integer, got a string 'three'"),
    (lambda r: r["pools"][0].update(k=2.5), "pools[0].k: must be an integer, got 2.5"),
    (lambda r: r["pools"][0].update(concurrency=True), "pools[0].concurrency: must be a number or a mapping"),
    (lambda r: r.update(pools={"a": 1}), "pools: must be a non-empty list, got a mapping"),
    (lambda r: r["pools"][0].update(step_time="fast"), "pools[0].step_time: must be a mapping, got a string"),
    # unknown keys (typo protection)
    (lambda r: r["pools"][0].update(concurency=4), "pools[0].concurency: unknown key"),
    (lambda r: r["pools"][0]["acceptance"].update(alpha=0.5), "pools[0].acceptance.alpha: unknown key"),
    (lambda r: r.update(pool=[]), "pool: unknown key"),
    (lambda r: r["pools"][1].update(jitter={"sigma": 0.1, "stal_prob": 0.1}), "pools[1].jitter.stal_prob: unknown key"),
    # missing required
    (lambda r: r["pools"][0].pop("model"), "pools[0].model: required field is missing"),
    (lambda r: r["pools"][0].pop("k"), "pools[0].k: required field is missing"),
    (lambda r: r["pools"][0].pop("acceptance"), "pools[0].acceptance: required field is missing"),
    (lambda r: r["pools"][0]["acceptance"].pop("a"), "pools[0].acceptance.a: required field is missing"),
    (lambda r: r.pop("pools"), "pools: required field is missing"),
    # cross-field
    (lambda r: r["pools"][0]["acceptance"].update(mode="list", p=[0.9, 0.8]) or r["pools"][0]["acceptance"].pop("a"),
     "pools[0].acceptance.p: must have k=3 entries"),
    (lambda r: r["pools"][1].update(k=3), "pools[1].k: a baseline pool (spec_mode off) has no draft length"),
    (lambda r: r["pools"][1].update(id="chat-spec"), "pools[1].id: duplicate pool id 'chat-spec'"),
    (lambda r: r.update(events=[{"pool": "nope", "at": 5, "restart": True}]), "events[0].pool: unknown pool 'nope'"),
    (lambda r: r.update(events=[{"pool": "chat-spec", "at": -5, "restart": True}]), "events[0].at: must be >= 0, got -5"),
    (lambda r: r.update(events=[{"pool": "chat-base", "at": 5, "acceptance": {"mode": "iid", "a": 0.5}}]),
     "events[0].acceptance: cannot set acceptance on a baseline"),
    (lambda r: r["pools"][0].update(concurrency={"points": [[0, 4], [0, 8]]}),
     "pools[0].concurrency.points[1][0]: times must increase"),
    (lambda r: r["pools"][0].update(spec_mode="off"), "pools[0].k: a baseline pool (spec_mode off) has no draft length"),
])
def test_bad_scenarios_name_the_field(mutate, expected: str) -> None:
    assert expected in bad(mutate)


def test_yaml_off_is_read_as_off(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent("""
        pools:
          - {model: m, traffic_class: chat, spec_mode: off, concurrency: 2}
    """))
    sc = load_scenario(path)
    assert sc.pools[0].spec_mode == "off" and sc.pools[0].id == "chat-off"


def test_rate_mode_solves_iid_a() -> None:
    # spec-math §2.1: K = 3, r = 0.50 -> a = 0.691414 (AC-03); K = 5, r = 0.70 -> a = 0.883380 (AC-01)
    assert solve_iid_a(0.5, 3) == pytest.approx(0.691414, abs=1e-6)
    assert solve_iid_a(0.7, 5) == pytest.approx(0.883380, abs=1e-6)


def test_unknown_builtin_and_missing_file() -> None:
    with pytest.raises(ScenarioError, match="no built-in of that name"):
        load_scenario("no-such-scenario")
    with pytest.raises(ScenarioError, match="file not found"):
        load_scenario("/nonexistent/x.yaml")


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _main() -> None:
        pass

    sim_cli.register(app)
    return app


def test_cli_bad_scenario_exits_2_with_message(tmp_path: Path) -> None:
    raw = copy.deepcopy(GOOD)
    raw["pools"][0]["acceptance"]["a"] = 1.3
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = CliRunner().invoke(_app(), ["sim", "--scenario", str(path), "--port", "0"])
    assert result.exit_code == 2
    assert "pools[0].acceptance.a: must be between 0 and 1, got 1.3" in result.output
    assert "Traceback" not in result.output


def test_cli_subprocess_exits_2_without_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("pools:\n  - {model: m, traffic_class: chat, spec_mode: eagle3, k: 3, concurrency: 2,\n"
                    "     acceptance: {mode: iid, a: 0.8}, concurency: 3}\n")
    code = ("import typer; from backend.cli import sim\n"
            "app = typer.Typer()\n@app.callback()\ndef m():\n    pass\n"
            "sim.register(app); app()")
    proc = subprocess.run([sys.executable, "-c", code, "sim", "--scenario", str(path)],
                          check=False, capture_output=True, text=True, timeout=deadline(300))
    assert proc.returncode == 2
    assert "pools[0].concurency: unknown key" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_cli_list_scenarios() -> None:
    result = CliRunner().invoke(_app(), ["sim", "--list-scenarios"])
    assert result.exit_code == 0
    for name in ("steady", "drift", "restart", "long-context"):
        assert name in result.output


def test_drafter_change_events() -> None:
    sc = load_scenario("drafter-upgrade")
    assert sc.pool("chat-eagle3").drafter == "EAGLE-3"
    assert sc.drafter_at("chat-eagle3", 1799.0) == "EAGLE-3"
    assert sc.drafter_at("chat-eagle3", 1800.0) == "EAGLE-3.1"
    ev = next(e for e in sc.events if e.pool_ids == ("chat-eagle3",))
    assert ev.drafter == "EAGLE-3.1" and ev.acceptance.p == (0.72, 0.72, 0.72)
    assert sc.drafter_at("chat-off", 3000.0) is None
    raw = copy.deepcopy(GOOD)
    raw["events"] = [{"at": 10, "pool": "chat-spec", "drafter": "v2"}]
    with pytest.raises(ScenarioError, match=r"events\[0\]\.drafter: a drafter change needs acceptance"):
        parse_scenario(raw)
    raw = copy.deepcopy(GOOD)
    raw["pools"][1]["drafter"] = "x"
    with pytest.raises(ScenarioError, match=r"pools\[1\]\.drafter: a baseline pool"):
        parse_scenario(raw)


def test_truth_names_the_drafter_in_force() -> None:
    from backend.sim.server import Simulator

    class Clock:
        t = 1_000_000.0 + 1900.0

        def __call__(self) -> float:
            return self.t

    sim = Simulator("drafter-upgrade", seed=1, clock=Clock(), tick=10.0, history_seconds=3000, start=1_000_000.0)
    before, after = (sim.truth(at=1_000_000.0 + t) for t in (1700.0, 1900.0))
    chat = [{p["pool_id"]: (p["drafter"], p["acceptance_conditional"]) for p in d["pools"]} for d in (before, after)]
    assert chat[0]["chat-eagle3"] == ("EAGLE-3", [0.6, 0.6, 0.6])
    assert chat[1]["chat-eagle3"] == ("EAGLE-3.1", [0.72, 0.72, 0.72])
    assert chat[1]["chat-off"] == (None, None)


def test_vllm_upgrade_events_and_config_labels() -> None:
    from backend.sim.server import Simulator

    raw = copy.deepcopy(GOOD)
    raw["config_labels"] = True
    raw["pools"][0]["vllm_version"] = "0.11.0"
    raw["events"] = [{"at": 10, "pool": "chat-spec", "restart": True,
                      "vllm_version": "0.12.0"}]
    sc = parse_scenario(raw)
    pid = sc.pools[0].id
    assert (sc.vllm_version_at(pid, 9.9), sc.vllm_version_at(pid, 10.0)) == ("0.11.0", "0.12.0")
    assert sc.vllm_version_at(sc.pools[1].id, 50.0) is None

    class Clock:
        t = 1_000_000.0 + 12.0

        def __call__(self) -> float:
            return self.t

    sim = Simulator(sc, seed=1, clock=Clock(), tick=1.0, history_seconds=100, start=1_000_000.0)
    text = sim.metrics().decode()
    first = next(line for line in text.splitlines() if line.startswith("vllm:num_requests_running{")
                 and 'spec_mode="eagle3"' in line)
    assert 'vllm_version="0.12.0"' in first and "drafter=" not in first  # the pool names no drafter
    raw["events"][0].pop("restart")
    with pytest.raises(ScenarioError, match=r"events\[0\]\.vllm_version: a vLLM upgrade restarts the server"):
        parse_scenario(raw)
    raw["events"][0]["restart"] = True
    raw["config_labels"] = "yes"
    with pytest.raises(ScenarioError, match="config_labels: must be true or false"):
        parse_scenario(raw)
