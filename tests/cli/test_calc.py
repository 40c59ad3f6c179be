"""``specwatch calc ...`` / ``specwatch simulate`` through typer's CliRunner, plus the shared calc glue."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from backend.cli.calc import register
from backend.domain import calc as dcalc
from tests.support.deadline import deadline

ROOT = Path(__file__).resolve().parents[2]


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    register(app)
    return app


APP = _app()
RUNNER = CliRunner()


def run_json(*args: str) -> dict:
    res = RUNNER.invoke(APP, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def run_fail(*args: str):
    res = RUNNER.invoke(APP, list(args))
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert "Traceback" not in res.output
    return res


def test_mix_draft_token_basis_gives_0_61():
    out = run_json("calc", "mix", "--k", "5", "--class", "chat=0.7:0.7", "--class", "code=0.4:0.3")
    assert out["mixed_alpha"] == pytest.approx(0.61, abs=1e-12)
    assert out["mean_acceptance_length"] == pytest.approx(4.05)
    assert out["inputs"]["basis"] == "draft-tokens"


def test_mix_request_basis_and_lengths():
    req = run_json("calc", "mix", "--k", "5", "--class", "chat=0.7:0.7", "--class", "code=0.4:0.3",
                   "--share-basis", "requests")
    assert req["mixed_alpha"] == pytest.approx(0.5826, abs=1e-4)
    longer = run_json("calc", "mix", "--k", "5", "--class", "chat=0.7:0.7", "--class", "code=0.4:0.3",
                      "--share-basis", "requests", "--lengths", "code=3", "--overhead", "0.1")
    assert longer["mixed_alpha"] == pytest.approx(0.5024, abs=1e-4)
    assert longer["mixed_alpha"] < 0.55
    assert longer["speedup"] == pytest.approx(longer["mean_acceptance_length"] / 1.1)


def test_averaging_class_ratios_is_wrong_when_volumes_differ():
    """Same classes, request shares: the share-weighted mean of class alphas (0.61) is not the pooled answer."""
    out = run_json("calc", "mix", "--k", "5", "--class", "chat=0.7:0.7", "--class", "code=0.4:0.3",
                   "--share-basis", "requests")
    assert out["share_weighted_mean_of_class_alphas"] == pytest.approx(0.61)
    assert out["unweighted_mean_of_class_alphas"] == pytest.approx(0.55)
    assert abs(out["mixed_alpha"] - 0.61) > 0.02 and abs(out["mixed_alpha"] - 0.55) > 0.02
    # the same numbers from counters: 700 chat / 300 code requests of 100 tokens, K = 5
    chat_drafts, code_drafts = 70000 / 4.5, 30000 / 3.0
    pooled = (chat_drafts * 5 * 0.7 + code_drafts * 5 * 0.4) / ((chat_drafts + code_drafts) * 5)
    assert out["mixed_alpha"] == pytest.approx(pooled)


def test_speedup_and_misreading():
    out = run_json("calc", "speedup", "--k", "5", "--alpha", "0.7", "--overhead", "0.1")
    assert out["speedup"] == pytest.approx(4.090909090909)
    assert out["tokens_per_step"] == pytest.approx(4.5)
    assert out["alpha_breakeven"] == pytest.approx(0.02)
    assert out["if_alpha_were_per_token"]["tokens_per_step"] == pytest.approx(2.94117)
    loss = run_json("calc", "speedup", "--k", "5", "--alpha", "0.4", "--overhead", "2.75")
    assert loss["speedup"] == pytest.approx(0.8) and loss["net_positive"] is False


def test_breakeven_required_alpha_overhead_convert():
    be = run_json("calc", "breakeven", "--k", "5", "--overhead", "0.15")
    assert be["alpha_breakeven"] == pytest.approx(0.03) and be["tau_breakeven"] == pytest.approx(1.15)
    req = run_json("calc", "required-alpha", "--k", "5", "--speedup", "2", "--overhead", "0.1")
    assert req["alpha_required"] == pytest.approx(0.24) and req["d_alpha_d_eps"] == pytest.approx(0.4)
    assert req["per_token_a_required"] == pytest.approx(0.55938035987, abs=1e-9)
    ov = run_json("calc", "overhead", "--k", "5", "--tau", "3.5", "--measured-speedup", "2")
    assert (ov["eps_effective"], ov["alpha_breakeven"], ov["margin_alpha"]) == pytest.approx((0.75, 0.15, 0.35))
    cv = run_json("calc", "convert", "--k", "5", "--acceptance-rate", "0.7")
    assert cv["per_token_a"] == pytest.approx(0.883379831226, abs=1e-9)
    back = run_json("calc", "convert", "--k", "5", "--per-token", "0.8")
    assert back["acceptance_rate"] == pytest.approx(0.537856) and back["tokens_per_step"] == pytest.approx(3.68928)


def test_infeasible_target_prints_null_not_zero():
    req = run_json("calc", "required-alpha", "--k", "5", "--speedup", "7", "--overhead", "0.1")
    assert req["alpha_required"] is None and req["feasible"] is False
    res = RUNNER.invoke(APP, ["calc", "required-alpha", "--k", "5", "--speedup", "7", "--overhead", "0.1"])
    assert res.exit_code == 0
    line = next(x for x in res.stdout.splitlines() if "alpha_required" in x)
    assert "undefined" in line and " 0 " not in line


def test_table_output_is_readable():
    res = RUNNER.invoke(APP, ["calc", "mix", "--k", "5", "--class", "chat=0.7:0.7", "--class", "code=0.4:0.3"])
    assert res.exit_code == 0
    assert "mixed_alpha" in res.stdout and "0.61" in res.stdout


@pytest.mark.parametrize("args", [
    ["calc", "speedup", "--k", "0", "--alpha", "0.7", "--overhead", "0.1"],
    ["calc", "speedup", "--k", "5", "--alpha", "1.7", "--overhead", "0.1"],
    ["calc", "speedup", "--k", "5", "--alpha", "abc", "--overhead", "0.1"],
    ["calc", "speedup", "--k", "5", "--alpha", "0.5", "--overhead", "-1"],
    ["calc", "breakeven", "--k", "5"],
    ["calc", "convert", "--k", "5"],
    ["calc", "convert", "--k", "5", "--acceptance-rate", "0.5", "--per-token", "0.6"],
    ["calc", "mix", "--k", "5", "--class", "chat0.7:0.7"],
    ["calc", "mix", "--k", "5", "--class", "chat=0.7:0.7", "--share-basis", "tokens"],
    ["calc", "mix", "--k", "5", "--class", "chat=0.7:0.7", "--lengths", "code=3", "--share-basis", "requests"],
    ["calc", "overhead", "--k", "5", "--tau", "3.5", "--measured-speedup", "0"],
    ["simulate", "--alpha", "0.4,x"],
    ["simulate", "--k", "0"],
])
def test_bad_input_exits_2_with_a_message(args):
    res = run_fail(*args)
    assert res.output.strip()


def test_domain_errors_are_reported_with_error_prefix():
    res = run_fail("calc", "speedup", "--k", "0", "--alpha", "0.7", "--overhead", "0.1")
    assert "error: K must be an integer in 1..64" in res.output


def test_simulate_json_and_table():
    out = run_json("simulate", "--alpha", "0.7", "--k", "5", "--eps", "0.1", "--seed", "3", "--requests", "500")
    (cell,) = out["cells"]
    assert cell["tokens_per_step_model"] == pytest.approx(4.5)
    assert cell["speedup_model"] == pytest.approx(4.5 / 1.1)
    assert cell["speedup_sim"] == pytest.approx(4.5 / 1.1, rel=0.03)
    assert out["params"]["seed"] == 3
    again = run_json("simulate", "--alpha", "0.7", "--k", "5", "--overhead", "0.1", "--seed", "3", "--requests", "500")
    assert again == out
    # --eps: the old name of --overhead (calc's name for the same eps), hidden, still accepted
    res = RUNNER.invoke(APP, ["simulate", "--help"])
    assert "--overhead" in res.stdout and "--eps" not in res.stdout
    res = RUNNER.invoke(APP, ["simulate"])
    assert res.exit_code == 0 and "P99 spec ms" in res.stdout
    assert res.stdout.count("│ ") > 9 * 5  # 9 default cells


def test_calc_glue_is_json_safe_and_raises_calc_error():
    assert dcalc.json_safe({"a": float("inf"), "b": [float("nan"), 1.0]}) == {"a": None, "b": [None, 1.0]}
    with pytest.raises(dcalc.CalcError):
        dcalc.calc_speedup(5, 2.0, 0.1)
    with pytest.raises(dcalc.CalcError):
        dcalc.calc_mix(5, [("a", 0.5, 1.0), ("a", 0.6, 1.0)])
    assert dcalc.parse_class_spec("chat=0.7:0.3") == ("chat", 0.7, 0.3)
    out = dcalc.calc_mix(5, [("chat", 0.7, 0.7), ("code", 0.4, 0.3)], eps=0.1)
    assert out["speedup"] == pytest.approx(4.05 / 1.1)
    json.dumps(dcalc.calc_simulate([0.5], [3], seed=1, n_requests=100), allow_nan=False)


def test_real_entry_point_exit_code_2():
    exe = Path(sys.executable).with_name("specwatch")
    if not exe.exists():
        pytest.skip("specwatch console script not installed in this interpreter's bin")
    ok = subprocess.run([str(exe), "calc", "breakeven", "--k", "5", "--overhead", "0.15", "--json"],
                        check=False, capture_output=True, text=True, cwd=ROOT,
                        timeout=deadline(600))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["alpha_breakeven"] == pytest.approx(0.03)
    bad = subprocess.run([str(exe), "calc", "breakeven", "--k", "-3", "--overhead", "0.15"],
                         check=False, capture_output=True, text=True, cwd=ROOT,
                        timeout=deadline(600))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "error:" in bad.stderr


def test_k_advisor_cli_matches_the_calculator_and_prints_a_table():
    out = run_json("calc", "k-advisor", "--k", "3", "--class", "code=0.9,0.45,0.225", "--overhead", "0.35",
                   "--measured", "5=0.55")
    assert out == dcalc.calc_k_advisor(3, [("code", [0.9, 0.45, 0.225], 1.0)], 0.35, measured=[(5, 0.55)])
    assert out["classes"][0]["best_k"] == 2 and out["gain"] == pytest.approx(1.844 / (2.396125 / 1.35) - 1)
    res = RUNNER.invoke(APP, ["calc", "k-advisor", "--k", "3", "--class", "chat=0.9,0.9,0.9:0.7", "--overhead", "0.06"])
    assert res.exit_code == 0, res.output
    assert "chat: best K = 5 (+31.3 % speedup vs K = 3) [extrapolated]" in res.stdout
    assert "note: assumed: 0 of the measured eps is fixed, the rest grows with K" in res.stdout


@pytest.mark.parametrize("args, msg", [
    (["--class", "chat=0.9,0.9", "--overhead", "0.1"], "give 3 conditional"),
    (["--class", "chat=0.9,x,0.9", "--overhead", "0.1"], "NAME=P1,P2"),
    (["--class", "chat=0.9,0.9,0.9", "--overhead", "0.1", "--measured", "5"], "K=EPS"),
    (["--class", "chat=0.9,0.9,1.9", "--overhead", "0.1"], "p_3 must be in"),
    (["--class", "chat=0.9,0.9,0.9", "--overhead", "-1"], "overhead must be in"),
])
def test_k_advisor_cli_refuses_bad_input(args, msg):
    res = run_fail("calc", "k-advisor", "--k", "3", *args)
    assert msg in res.output
