"""Rollout plan generator, pure: model, K, traffic shares, concurrency (+ alpha per class, measured or
assumed) -> a staged Markdown plan. Every number comes from backend.domain.calc (the calculator behind
`specwatch calc` and POST /api/v1/calc/*), so the plan and the calculator agree for the same inputs.

Traffic shares are request shares at equal output length (calc mix basis "requests"): the low-acceptance
class weighs more than its request share because it needs more steps per output token (spec-math §6).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from backend.domain import acceptance as acc
from backend.domain import calc as dcalc
from backend.domain import mix as mixmod
from backend.domain import thresholds as thr


@dataclass(frozen=True)
class PlanInputs:
    model: str
    k: int
    traffic: Mapping[str, float]  # class -> request share (normalised)
    concurrency: int
    eps_step: float  # the step overhead: measured from ITL against the baseline, or the band default
    eps_step_source: str  # "measured" | "default-for-band"
    band: str | None
    threshold: float = 0.55
    min_drafts: int = 1000
    consecutive_successes: int = 2
    failure_limit: int = 0
    alpha: Mapping[str, float] = field(default_factory=dict)  # class -> alpha (draft acceptance rate)
    alpha_source: Mapping[str, str] = field(default_factory=dict)  # class -> "given" | "measured"
    curves: Mapping[str, Sequence[float | None]] = field(default_factory=dict)  # class -> measured p_1..p_K
    eps0_share: float = 0.0  # K advisor: fixed share of eps (the rest grows with K)
    eps_step_by_class: Mapping[str, float] = field(default_factory=dict)  # class -> its own eps_step measured in the band


def class_eps(p: PlanInputs, cls: str) -> float:
    """The class's own measured eps_step, else the plan's (the mix's measured one, or the band default)."""
    return p.eps_step_by_class.get(cls, p.eps_step)


def parse_shares(text: str, *, name: str = "traffic", hi: float | None = None) -> dict[str, float]:
    """'chat=0.7,code=0.3' -> {'chat': 0.7, 'code': 0.3}. CalcError on anything malformed, not finite,
    negative or above `hi`."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, val = part.partition("=")
        try:
            num = float(val)
        except ValueError:
            num = math.nan
        if not sep or not key.strip():
            raise dcalc.CalcError(f"--{name} must look like chat=0.7,code=0.3, got {text!r}")
        if not math.isfinite(num) or num < 0 or (hi is not None and num > hi):
            words = f"a number in [0, {hi:g}]" if hi is not None else "a number >= 0"
            raise dcalc.CalcError(f"--{name} {key.strip()}: must be {words}, got {val.strip()}")
        out[key.strip()] = num
    if not out:
        raise dcalc.CalcError(f"--{name} is empty")
    return out


def numbers(p: PlanInputs) -> dict:
    """Every number of the plan, each from the calculator (JSON-ready)."""
    if p.k < 1 or p.concurrency < 1:
        raise dcalc.CalcError("K and concurrency must be >= 1")
    if sum(p.traffic.values()) <= 0:
        raise dcalc.CalcError("traffic shares must not all be 0")
    unknown = set(p.alpha) - set(p.traffic)
    if unknown:
        raise dcalc.CalcError(f"--alpha names classes not in --traffic: {', '.join(sorted(unknown))}")
    be = dcalc.calc_breakeven(p.k, p.eps_step)
    per_class = {c: dcalc.calc_speedup(p.k, a, class_eps(p, c)) for c, a in p.alpha.items()}
    known = [(c, p.alpha[c], p.traffic[c]) for c in p.traffic if c in p.alpha]
    mix = dcalc.calc_mix(p.k, known, "requests", None, p.eps_step) if known and len(known) == len(p.traffic) else None
    if mix and p.eps_step_by_class:  # each class at its own step cost: total output / time
        mix["speedup"] = mixmod.mixed_speedup([(per_class[c].get("speedup"), s) for c, _, s in known])
    need = {c: ("disable" if a < (per_class[c].get("alpha_breakeven") or 0) else "domain drafter")
            for c, a in p.alpha.items() if thr.value_below(a, p.threshold)}
    return {"breakeven": be, "per_class": per_class, "mix": mix, "needs": need,
            "itl_ratio": 1 + p.eps_step, "required_for_threshold": dcalc.calc_speedup(p.k, p.threshold, p.eps_step),
            "k_advisor": k_advice(p)}


def k_advice(p: PlanInputs) -> dict | None:
    """The K advisor on the plan's classes: measured p_1..p_K where the model has them at this K, else the
    i.i.d. curve p_j = a from the class's alpha (labelled); the mix only when every class has a curve."""
    curves, sources = {}, {}
    for c in p.traffic:
        measured = p.curves.get(c)
        if measured is not None and len(measured) == p.k and all(x is not None for x in measured):
            curves[c], sources[c] = list(measured), "measured p_j"
        elif c in p.alpha:
            a = acc.per_token_from_rate(p.alpha[c], p.k)
            if a is not None:
                curves[c], sources[c] = [a] * p.k, "i.i.d. from alpha"
    if not curves or p.eps_step < 0:
        return None
    own = {c: e for c, e in p.eps_step_by_class.items() if c in curves and e >= 0}
    out = dcalc.calc_k_advisor(p.k, [(c, curves[c], p.traffic[c]) for c in curves], p.eps_step,
                               eps0_share=p.eps0_share, class_eps=own or None)
    out["curve_source"] = sources
    if len(curves) < len(p.traffic):
        out["mix"] = None
        out["best_k"] = out["best_speedup"] = out["current_speedup"] = out["gain"] = None
    return out


def _k_section(n: dict) -> list[str]:
    adv = n.get("k_advisor")
    if not adv:
        return ["## Draft length K", "", "- No acceptance curve or alpha per class yet: measure first (step 3).", ""]
    ov = adv["overhead"]
    lines = ["## Draft length K", "",
             (f"eps(K) = {_f(ov['eps0'])} + K x {_f(ov['eps_tok'])} ({ov['source']}); tokens/step = 1 + u_1 + ... "
              "+ u_K'; rows marked * are extrapolated beyond the measured K from a fitted decay of p_j."), "",
             "| class | curve | K' | tokens/step | speedup | |", "|---|---|---:|---:|---:|---|"]
    for a in [*adv["classes"], *([adv["mix"]] if adv["mix"] else [])]:
        src = adv["curve_source"].get(a["name"], "output-token shares")
        for r in a["rows"]:
            lines.append(f"| {a['name']} | {src} | {r['k']}{'*' if r['extrapolated'] else ''} | {_f(r['tau'], 2)} "
                         f"| {_f(r['speedup'], 2)} | {'best' if r['k'] == a['best_k'] else ''} |")
    lines.append("")
    for a in [*adv["classes"], *([adv["mix"]] if adv["mix"] else [])]:
        gain = a["gain"]
        lines.append(f"- **{a['name']}**: best K = {a['best_k'] if a['best_k'] is not None else 'n/a'}"
                     + ("" if gain is None else f" ({gain * 100:+.1f} % speedup vs K = {a['current_k']})")
                     + (" (extrapolated)" if a["best_is_extrapolated"] else ""))
    if adv["mix"] is None:
        lines.append("- Mix: unknown until every class has a curve.")
    return [*lines, ""]


def _f(v: float | None, d: int = 3, sign: str = "") -> str:
    """Rates, shares and eps with 3 decimals, as every page writes them (tau and speedups: 2; margins signed)."""
    return "n/a" if v is None else f"{v:{sign}.{d}f}"


def render(p: PlanInputs, n: dict) -> str:
    """The plan as Markdown (stable: no timestamps, fixed number formats)."""
    be, mix = n["breakeven"], n["mix"]
    total = sum(p.traffic.values())
    rescaled = (f"Request shares as given ({', '.join(f'{c}={_f(v, 3)}' for c, v in p.traffic.items())}) add "
                f"up to {_f(total, 3)}, not 1: rescaled to the shares below." if abs(total - 1) > 1e-9 else None)
    lines = [f"# Rollout plan: {p.model}", "", *([rescaled, ""] if rescaled else []),
             (f"K = {p.k} speculative tokens, production concurrency {p.concurrency} running requests "
             f"(band {p.band or 'n/a'}), step overhead eps_step = {_f(p.eps_step)} ({p.eps_step_source})"
             + ("" if not p.eps_step_by_class else "; classes at their own measured eps_step: "
                + ", ".join(f"{c} {_f(e)}" for c, e in sorted(p.eps_step_by_class.items())))
             + "."), "",
             "| class | request share | alpha | alpha source | tokens/step | speedup | margin vs break-even |",
             "|---|---:|---:|---|---:|---:|---:|"]
    for c, share in p.traffic.items():
        r = n["per_class"].get(c)
        lines.append(f"| {c} | {_f(share / total, 3)} | {_f(p.alpha.get(c))} | {p.alpha_source.get(c, 'to measure')} "
                     f"| {_f(r and r['tokens_per_step'], 2)} | {_f(r and r['speedup'], 2)} | {_f(r and r['margin_alpha'], sign='+')} |")
    lines += ["", "## Expected at this traffic mix", ""]
    if mix:
        lines += [(f"- Mixed alpha (request shares, equal output length): **{_f(mix['mixed_alpha'])}** "
                  f"(naive mean of class alphas {_f(mix['unweighted_mean_of_class_alphas'])} overstates it)"),
                  f"- Mean accepted length tau: {_f(mix['mean_acceptance_length'], 2)}",
                  f"- Expected overall speedup: **{_f(mix['speedup'], 2)}x** (1 / sum of share / class speedup)"]
    else:
        lines.append("- Mixed alpha and speedup: unknown until every class has an alpha (step 3 measures it).")
    lines += [f"- Break-even at concurrency {p.concurrency}: alpha = {_f(be['alpha_breakeven'])}, "
              f"tau = {_f(be['tau_breakeven'], 2)}" + ("" if be["feasible"] else " (not reachable at this K)"),
              "", "## Go / no-go", "",
              (f"- Gate: mixed alpha >= **{p.threshold:.2f}** on the production mix (a speedup of "
              f"{_f(n['required_for_threshold']['speedup'], 2)}x at this eps), over at least {p.min_drafts} drafts; "
              f"{p.consecutive_successes} passing evaluations in a row; more than {p.failure_limit} failed "
              "evaluation(s) in total (cumulative, not consecutive) aborts."),
              "- No data / query failure is an Error, not a Fail; too few drafts is Inconclusive and holds for a human.",
              "- Margin must stay positive: alpha above break-even, i.e. speculation faster than the baseline.", ""]
    lines[lines.index("## Go / no-go"):lines.index("## Go / no-go")] = _k_section(n)
    if n["needs"]:
        lines.append("Classes below the gate:")
        for c, what in n["needs"].items():
            lines.append(f"- **{c}**: alpha {_f(p.alpha[c])} < {p.threshold:.2f} -> "
                         + ("disable speculation (below break-even)" if what == "disable"
                            else "train a domain drafter, or disable speculation for this class"))
    else:
        lines.append("No class is below the gate on the alphas known so far.")
    lines += ["", "## Steps", "",
              (f"1. **Baseline**: measure TTFT, TPOT and ITL P50/P99 and throughput at {p.concurrency} running "
              "requests per class with the drafter off (or capture a frozen baseline snapshot)."),
              f"2. **Enable the drafter** (speculative_config, num_speculative_tokens={p.k}) on a canary pool per class.",
              f"3. **Measure alpha** per class on real traffic until each has >= {p.min_drafts} drafts.",
              f"4. **Gate**: mixed alpha >= {p.threshold:.2f}; classes below it get a domain drafter or are disabled.",
              (f"5. **Confirm P99** at concurrency {p.concurrency}: TPOT P99 not worse than the baseline (bootstrap "
              "verdict), then sign off."), "", "## P99 watch items", "",
              "- TPOT P99 (per token): must be better or unchanged vs the baseline; this is the user's speedup.",
              (f"- ITL P99 (per engine step) rises by design: expect about {_f(n['itl_ratio'], 2)}x the baseline "
              "step time (1 + eps); alert only beyond that."),
              f"- TTFT P99: drafting must not delay prefill; watch queueing at {p.concurrency} running requests.",
              "- Long prompts past the drafter's max_model_len collapse acceptance (zero-filled drafts).", ""]
    return "\n".join(lines)
