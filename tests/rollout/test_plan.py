"""The plan generator's numbers are the calculator's (`specwatch calc`, backend.domain.calc) for the same
inputs; filled with measured values when the model has data; the API and CLI around it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import typer
from typer.testing import CliRunner

from backend.cli import calc as calc_cli
from backend.cli import rollout as rollout_cli
from backend.config import Settings
from backend.domain import calc as dcalc
from backend.domain import plan
from backend.services import rollout
from tests.factories import make_bucket, make_pool


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    calc_cli.register(app)
    rollout_cli.register(app)
    return app


RUNNER = CliRunner()


def cli_json(*args: str) -> dict:
    res = RUNNER.invoke(_app(), [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_plan_numbers_match_the_calculator_cli():
    out = cli_json("plan", "--model", "acme", "--k", "5", "--traffic", "chat=0.7,code=0.3", "--concurrency", "64",
                   "--alpha", "chat=0.7,code=0.4", "--offline")
    eps = Settings(_env_file=None).eps_default_by_band["33-128"]
    assert out["inputs"]["eps_step"] == eps and out["inputs"]["band"] == "33-128"
    mix = cli_json("calc", "mix", "--k", "5", "--class", "chat=0.7:0.7", "--class", "code=0.4:0.3",
                   "--share-basis", "requests", "--overhead", str(eps))
    assert out["numbers"]["mix"]["mixed_alpha"] == mix["mixed_alpha"] == pytest.approx(0.5826, abs=1e-4)
    assert out["numbers"]["mix"]["speedup"] == mix["speedup"]
    be = cli_json("calc", "breakeven", "--k", "5", "--overhead", str(eps))
    assert out["numbers"]["breakeven"]["alpha_breakeven"] == be["alpha_breakeven"]
    sp = cli_json("calc", "speedup", "--k", "5", "--alpha", "0.4", "--overhead", str(eps))
    assert out["numbers"]["per_class"]["code"] == sp
    assert out["numbers"]["needs"] == {"code": "domain drafter"}


def test_markdown_shows_the_calculator_values():
    inputs = plan.PlanInputs(model="acme", k=5, traffic={"chat": 0.7, "code": 0.3}, concurrency=64, eps_step=0.1,
                             eps_step_source="measured", band="33-128", alpha={"chat": 0.7, "code": 0.4},
                             alpha_source={"chat": "given", "code": "given"})
    md = plan.render(inputs, plan.numbers(inputs))
    mix = dcalc.calc_mix(5, [("chat", 0.7, 0.7), ("code", 0.4, 0.3)], "requests", None, 0.1)
    be = dcalc.calc_breakeven(5, 0.1)
    assert f"**{mix['mixed_alpha']:.3f}**" in md and f"**{mix['speedup']:.2f}x**" in md
    assert f"alpha = {be['alpha_breakeven']:.3f}" in md and "| code | 0.300 | 0.400 | given |" in md
    assert "**code**: alpha 0.400 < 0.55" in md and "cumulative, not consecutive" in md
    partial = plan.PlanInputs(model="new", k=3, traffic={"chat": 1.0}, concurrency=8, eps_step=0.1,
                              eps_step_source="default-for-band", band="1-8")
    assert "unknown until every class has an alpha" in plan.render(partial, plan.numbers(partial))
    with pytest.raises(dcalc.CalcError, match="not in --traffic"):
        plan.numbers(plan.PlanInputs(**{**partial.__dict__, "alpha": {"code": 0.3}}))
    with pytest.raises(dcalc.CalcError):
        plan.parse_shares("chat=x")


def test_plan_uses_measured_alpha_when_the_model_has_data(db, now):
    s = Settings(_env_file=None)
    chat = make_pool(db, model_name="acme", traffic_class="chat", num_spec_tokens=5)
    for i in range(3):
        make_bucket(db, chat, now - timedelta(minutes=10 + i), drafts=100, draft_tokens=500, accepted_tokens=325)
    inputs, nums = rollout.build_plan(db, model="acme", k=5, traffic={"chat": 0.7, "code": 0.3}, concurrency=64,
                                      alpha={"code": 0.4}, settings=s, now=now)
    assert inputs.alpha == {"code": 0.4, "chat": pytest.approx(0.65)}
    assert inputs.alpha_source == {"code": "given", "chat": "measured"}
    assert nums["mix"]["mixed_alpha"] == dcalc.calc_mix(5, [("chat", inputs.alpha["chat"], 0.7), ("code", 0.4, 0.3)],
                                                        "requests", None, inputs.eps_step)["mixed_alpha"]


def test_plan_gives_each_class_its_own_measured_eps_step(db, now):
    s = Settings(_env_file=None)
    base = make_pool(db, model_name="acme", traffic_class="chat", spec_mode="off")
    chat = make_pool(db, model_name="acme", traffic_class="chat", num_spec_tokens=3)
    code = make_pool(db, model_name="acme", traffic_class="code", num_spec_tokens=3)
    for i in range(3):  # band 1-8; plain steps 0.04 s, chat steps 0.05 s (eps_step 0.25), code 0.06 s (0.5)
        t = now - timedelta(minutes=10 + i)
        make_bucket(db, base, t, itl_sum=4.0, itl_count=100, running_mean=4.0)
        make_bucket(db, chat, t, drafts=1000, draft_tokens=3000, accepted_tokens=1800, itl_sum=5.0, itl_count=100,
                    running_mean=4.0)
        make_bucket(db, code, t, drafts=1000, draft_tokens=3000, accepted_tokens=1200, itl_sum=6.0, itl_count=100,
                    running_mean=4.0)
    inputs, nums = rollout.build_plan(db, model="acme", k=3, traffic={"chat": 0.7, "code": 0.3}, concurrency=4,
                                      alpha={}, settings=s, now=now)
    # the mixed row pools the classes' ITL: (5 + 6) / 200 = 0.055 s -> 0.375; each class keeps its own
    assert inputs.eps_step == pytest.approx(0.375) and inputs.eps_step_source == "measured"
    assert inputs.eps_step_by_class == {"chat": pytest.approx(0.25), "code": pytest.approx(0.5)}
    s_chat, s_code = (1 + 3 * 0.6) / 1.25, (1 + 3 * 0.4) / 1.5
    assert nums["per_class"]["chat"]["speedup"] == pytest.approx(s_chat)
    assert nums["per_class"]["code"]["speedup"] == pytest.approx(s_code)
    assert nums["per_class"]["code"]["alpha_breakeven"] == pytest.approx(0.5 / 3)
    # request shares at equal output length: total output over total time
    assert nums["mix"]["speedup"] == pytest.approx(1 / (0.7 / s_chat + 0.3 / s_code))
    adv = nums["k_advisor"]
    assert [c["overhead"]["eps_tok"] for c in adv["classes"]] == pytest.approx([0.25 / 3, 0.5 / 3])
    assert "classes at their own measured eps_step: chat 0.250, code 0.500" in plan.render(inputs, nums)


def test_plan_api(client):
    res = client.post("/api/v1/plan", json={"model": "acme", "k": 5, "traffic": {"chat": 0.7, "code": 0.3},
                                            "concurrency": 64, "alpha": {"chat": 0.7, "code": 0.4}})
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["markdown"].startswith("# Rollout plan: acme") and body["inputs"]["band"] == "33-128"
    assert body["numbers"]["mix"]["mixed_alpha"] == pytest.approx(0.5826, abs=1e-4)
    bad = client.post("/api/v1/plan", json={"model": "acme", "k": 5, "traffic": {"chat": 1}, "concurrency": 8,
                                            "alpha": {"code": 0.3}})
    assert bad.status_code == 422 and "not in --traffic" in bad.json()["detail"]


def test_plan_k_section_equals_the_k_advisor_with_measured_curves(db, now):
    s = Settings(_env_file=None)
    chat = make_pool(db, model_name="acme", traffic_class="chat", num_spec_tokens=3)
    for i in range(3):  # p = 0.8, 0.5, 0.5 measured at K = 3
        make_bucket(db, chat, now - timedelta(minutes=10 + i), drafts=1000, draft_tokens=3000, accepted_tokens=1400,
                    accepted_per_pos=[800.0, 400.0, 200.0])
    inputs, nums = rollout.build_plan(db, model="acme", k=3, traffic={"chat": 0.7, "code": 0.3}, concurrency=4,
                                      alpha={"code": 0.4}, settings=s, now=now)
    adv = nums["k_advisor"]
    assert inputs.curves["chat"] == pytest.approx([0.8, 0.5, 0.5])
    assert adv["curve_source"] == {"chat": "measured p_j", "code": "i.i.d. from alpha"}
    a_code = adv["classes"][1]["conditional"][0]
    expected = dcalc.calc_k_advisor(3, [("chat", [0.8, 0.5, 0.5], 0.7), ("code", [a_code] * 3, 0.3)], inputs.eps_step)
    assert adv["classes"] == expected["classes"] and adv["mix"] == expected["mix"]
    chat_rows = {r["k"]: r for r in adv["classes"][0]["rows"]}
    assert chat_rows[2]["tau"] == pytest.approx(2.2) and chat_rows[3]["tau"] == pytest.approx(2.4)
    # at the plan's K the mix's tokens/step is the plan's mean acceptance length
    assert adv["mix"]["rows"][1]["tau"] == pytest.approx(nums["mix"]["mean_acceptance_length"])
    md = plan.render(inputs, nums)
    assert "## Draft length K" in md and "| chat | measured p_j | 4* |" in md
    assert f"- **mix**: best K = {adv['mix']['best_k']}" in md


def test_plan_k_section_without_alphas_says_measure_first():
    partial = plan.PlanInputs(model="new", k=3, traffic={"chat": 0.5, "code": 0.5}, concurrency=8, eps_step=0.1,
                              eps_step_source="default-for-band", band="1-8", alpha={"chat": 0.7})
    nums = plan.numbers(partial)
    assert nums["k_advisor"]["mix"] is None and len(nums["k_advisor"]["classes"]) == 1
    assert "Mix: unknown until every class has a curve" in plan.render(partial, nums)
    empty = plan.PlanInputs(model="new", k=3, traffic={"chat": 1.0}, concurrency=8, eps_step=0.1,
                            eps_step_source="default-for-band", band="1-8")
    assert plan.numbers(empty)["k_advisor"] is None
    assert "No acceptance curve or alpha per class yet" in plan.render(empty, plan.numbers(empty))
