"""Every public known-answer case, run through the domain functions with the case's own tolerance.

``*_WRONG`` fields hold what a common mistake produces; each is asserted NOT to be produced.
"""

from __future__ import annotations

import json
import math

import pytest

from backend.domain import acceptance as acc
from backend.domain import economics as eco
from backend.domain import histogram as hist
from backend.domain import mix
from backend.domain.counters import promql_increase, reset_aware_increase, summed_increase
from tests.support.paths import FIXTURES

DATA = json.loads((FIXTURES / "known_answers_public.json").read_text())
CASES = DATA["cases"]


def _buckets(raw):
    return [(math.inf if le == "+Inf" else float(le), float(c)) for le, c in raw]


def _ka_acceptance_rate(inp):
    k = inp.get("K")
    if "samples_per_instance" in inp:
        inst = inp["samples_per_instance"].values()
        d = summed_increase(i["num_draft_tokens"] for i in inst)
        a = summed_increase(i["num_accepted_tokens"] for i in inst)
        return {"delta_draft_tokens": d, "delta_accepted": a, "acceptance_rate": acc.acceptance_rate(a, d),
                "sum_then_increase_draft_tokens_WRONG": d, "sum_then_increase_accepted_WRONG": a}
    s = inp["samples"]
    d = reset_aware_increase(s["num_draft_tokens"])
    a = reset_aware_increase(s["num_accepted_tokens"])
    out = {"delta_draft_tokens": d, "delta_accepted": a, "acceptance_rate": acc.acceptance_rate(a, d)}
    if "num_drafts" in s:
        n = reset_aware_increase(s["num_drafts"])
        out.update(delta_drafts=n, mean_acceptance_length=acc.mean_acceptance_length(a, n),
                   seed_alpha=acc.seed_alpha(a, n, k))
    return out


def _ka_counter_increase(inp):
    return {"increase": reset_aware_increase(inp["samples"])}


def _ka_promql_increase(inp):
    step, t = inp["scrape_interval_s"], inp["eval_time_s"]
    assert inp["range"] == "5m"
    samples = [(i * step, v) for i, v in enumerate(inp["values_from_t0"])]
    return {"increase": promql_increase(samples, t - 300, t)}


def _ka_mean_acceptance_length(inp):
    return {"mean_acceptance_length": acc.mean_acceptance_length(inp["delta_accepted"], inp["delta_drafts"])}


def _ka_per_position(inp):
    k, n, a, pos = inp["K"], inp["delta_drafts"], inp["delta_accepted"], inp["delta_accepted_per_pos"]
    u = acc.per_position_unconditional(pos, n)
    flags = acc.check_invariants(n, k * n, a, pos, k)
    return {
        "unconditional_u": u,
        "conditional_p": acc.per_position_conditional(pos, n),
        "sum_P": math.fsum(pos),
        "sum_per_pos_equals_accepted": acc.FLAG_SUM_NE_ACCEPTED not in flags,
        "monotone_non_increasing": acc.FLAG_PER_POS_INCREASING not in flags,
        "iid_alpha_mle": acc.mle_per_token(pos, n),
        "iid_alpha_from_r": acc.per_token_from_rate(acc.acceptance_rate(a, k * n), k),
    }


def _ka_mixed_alpha(inp):
    k, classes = inp["K"], inp["classes"]
    if "share_basis" in inp:
        assert inp["share_basis"] == "draft tokens"
        alpha = mix.mixed_alpha_from_shares([(c["alpha"], c["share"]) for c in classes.values()], k,
                                            basis=inp["share_basis"])
        return {"mixed_alpha": alpha, "mean_acceptance_length": 1 + k * alpha,
                "above_seed_threshold_0_55": alpha > 0.55}
    totals = [mix.ClassTotals(name, c["delta_drafts"], c["delta_draft_tokens"], c["delta_accepted"])
              for name, c in classes.items()]
    rates = mix.mixed_rates(totals, k)
    return {"mixed_alpha": rates.acceptance_rate, "mean_acceptance_length": rates.mean_acceptance_length,
            "mean_of_class_alphas_WRONG": rates.acceptance_rate}


def _ka_mixed_speedup(inp):
    k, eps, classes = inp["K"], inp["eps"], inp["classes"].values()
    exact = mix.mixed_speedup([(eco.seed_speedup(k, c["alpha"], eps), c["output_token_share"]) for c in classes])
    alpha_mix = mix.mixed_alpha_from_shares([(c["alpha"], c["output_token_share"]) for c in classes], k,
                                            basis="output-tokens")
    pooled = eco.speedup(1 + k * alpha_mix, eps)
    return {"speedup_exact": exact, "speedup_from_pooled_tau": pooled,
            "speedup_from_naive_alpha_0_61_WRONG": exact, "token_weighted_arithmetic_mean_of_speedups_WRONG": pooled}


def _ka_seed_speedup(inp):
    s = eco.seed_speedup(inp["K"], inp["alpha"], inp["eps"])
    return {"speedup": s, "tokens_per_step": 1 + inp["K"] * inp["alpha"], "net_positive": s > 1}


def _ka_seed_breakeven(inp):
    return {"alpha_breakeven": eco.break_even_alpha(inp["K"], inp["eps"]), "tau_breakeven": eco.tau_breakeven(inp["eps"])}


def _ka_seed_breakeven_margin(inp):
    k, a, e = inp["K"], inp["alpha"], inp["eps"]
    s = eco.seed_speedup(k, a, e)
    return {"alpha_breakeven": eco.break_even_alpha(k, e), "margin_abs": eco.margin_alpha(a, k, e),
            "speedup": s, "speedup_margin": eco.speedup_margin(s)}


def _ka_effective_overhead(inp):
    k, tau = inp["K"], inp["mean_acceptance_length"]
    e = eco.effective_overhead(tau, inp["measured_speedup"])
    alpha_s = (tau - 1) / k
    return {"eps_effective": e, "seed_alpha": alpha_s, "alpha_breakeven": eco.break_even_alpha(k, e),
            "margin_abs": eco.margin_alpha(alpha_s, k, e), "tau_breakeven": eco.tau_breakeven(e)}


def _ka_alpha_for_target_speedup(inp):
    k, s = inp["K"], inp["target_speedup"]
    if inp["model"] == "seed":
        return {"alpha_required": eco.alpha_for_target_speedup(k, inp["eps"], s), "d_alpha_d_eps": s / k}
    a = eco.leviathan_alpha_for_target(k, inp["c"], inp["v"], s)
    return {"per_token_a_required": a, "equivalent_vllm_acceptance_rate": acc.rate_from_per_token(a, k)}


def _ka_leviathan_expected_tokens(inp):
    t = eco.leviathan_expected_tokens(inp["a"], inp["K"])
    return {"expected_tokens_per_step": t, "expected_accepted_per_step": t - 1,
            "implied_vllm_acceptance_rate": acc.rate_from_per_token(inp["a"], inp["K"])}


def _ka_leviathan_speedup(inp):
    return {"speedup": eco.leviathan_speedup(inp["a"], inp["K"], inp["c"], inp["v"])}


def _ka_leviathan_breakeven(inp):
    a = eco.leviathan_breakeven(inp["K"], inp["c"], inp["v"])
    return {"a_breakeven": a, "vllm_rate_breakeven": acc.rate_from_per_token(a, inp["K"])}


def _ka_alpha_conversion(inp):
    k = inp["K"]
    if "vllm_acceptance_rate" in inp:
        a = acc.per_token_from_rate(inp["vllm_acceptance_rate"], k)
        return {"per_token_a": a, "check_r_from_a": acc.rate_from_per_token(a, k),
                "tokens_per_step": acc.tau_from_per_token(a, k)}
    r = acc.rate_from_per_token(inp["per_token_a"], k)
    return {"vllm_acceptance_rate": r, "seed_alpha": r, "tokens_per_step": acc.tau_from_per_token(inp["per_token_a"], k)}


def _ka_histogram_quantile(inp):
    q = inp["q"]
    if "buckets_cumulative" in inp:
        res = hist.histogram_quantile(q, _buckets(inp["buckets_cumulative"]))
        return {"quantile_value": res.value, "in_inf_bucket": res.lower_bound, "forced_monotonic": res.fixed_monotonicity}
    inst = [_buckets(inp[name]) for name in ("instance_1", "instance_2")]
    res = hist.histogram_quantile(q, hist.sum_histograms(inst))
    per = [hist.histogram_quantile(q, b) for b in inst]
    return {"quantile_value": res.value, "in_inf_bucket": res.lower_bound,
            "per_instance_p99": [p.value for p in per], "instance_2_in_inf_bucket": per[1].lower_bound,
            "mean_of_instance_p99_WRONG": res.value}


def _ka_p99_delta(inp):
    q = inp["q"]
    base = hist.histogram_quantile(q, _buckets(inp["baseline"]))
    spec = hist.histogram_quantile(q, _buckets(inp["spec"]))
    d = hist.quantile_delta(spec, base)
    out = {"p99_baseline": base.value, "p99_spec": spec.value, "spec_in_inf_bucket": spec.lower_bound,
           "delta_is_lower_bound": d.kind == "lower_bound"}
    if d.kind == "exact":
        out.update(delta_abs_s=d.delta, delta_rel=d.delta_rel)
    if d.kind == "lower_bound":
        out["delta_abs_s_lower_bound"] = d.delta
    return out


def _assert_close(field, got, want, tol):
    if want is None:
        assert got is None, f"{field}: expected null (undefined), got {got!r}"
    elif isinstance(want, bool):
        assert got is want, f"{field}: expected {want}, got {got!r}"
    elif isinstance(want, list):
        assert got is not None and len(got) == len(want), f"{field}: {got!r} vs {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_close(f"{field}[{i}]", g, w, tol)
    else:
        assert got is not None, f"{field}: expected {want}, got None"
        assert abs(got - want) <= tol, f"{field}: expected {want} +- {tol}, got {got!r}"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_known_answer(case):
    computed = globals()[f"_ka_{case['kind']}"](case["input"])
    tol = case["tolerance"]
    checked = 0
    for field, want in case["expected"].items():
        if field.endswith("_WRONG"):
            got = computed[field]
            assert got is not None and abs(got - want) > max(tol, 1e-6), \
                f"{field}: produced the known-wrong value {want}"
        else:
            assert field in computed, f"{case['id']}: no computation for expected field {field}"
            _assert_close(field, computed[field], want, tol)
        checked += 1
    assert checked == len(case["expected"]) > 0


def test_every_case_is_covered():
    assert DATA["case_count"] == len(CASES) == 42
    kinds = {c["kind"] for c in CASES}
    assert all(f"_ka_{k}" in globals() for k in kinds)


def test_wrong_values_are_what_the_mistakes_give():
    """The *_WRONG numbers really are what the naive computations produce (so the NOT-asserts mean something)."""
    by_id = {c["id"]: c for c in CASES}
    inst = by_id["AR-07"]["input"]["samples_per_instance"]
    summed_raw = [a + b for a, b in zip(inst["a"]["num_draft_tokens"], inst["b"]["num_draft_tokens"])]
    assert reset_aware_increase(summed_raw) == by_id["AR-07"]["expected"]["sum_then_increase_draft_tokens_WRONG"]
    chat, code = by_id["MIX-04"]["input"]["classes"].values()
    naive = (chat["delta_accepted"] / chat["delta_draft_tokens"] + code["delta_accepted"] / code["delta_draft_tokens"]) / 2
    assert naive == pytest.approx(by_id["MIX-04"]["expected"]["mean_of_class_alphas_WRONG"])
    assert eco.seed_speedup(5, 0.61, 0.1) == pytest.approx(
        by_id["MIX-06"]["expected"]["speedup_from_naive_alpha_0_61_WRONG"])
    i1, i2 = (_buckets(by_id["HQ-13"]["input"][n]) for n in ("instance_1", "instance_2"))
    mean_p99 = (hist.histogram_quantile(0.99, i1).value + hist.histogram_quantile(0.99, i2).value) / 2
    assert mean_p99 == pytest.approx(by_id["HQ-13"]["expected"]["mean_of_instance_p99_WRONG"])
