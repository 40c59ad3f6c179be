"""Calculator glue shared by the CLI (``specwatch calc ...``) and the HTTP API (``POST /api/v1/calc/...``).

Each ``calc_*`` function takes plain parameters and returns a JSON-ready dict (floats, ints, bools,
strings, lists, ``None`` for undefined - never NaN/Inf). Invalid input raises :class:`CalcError`
(a ``ValueError``) with a message fit for an end user; the CLI maps it to exit code 2, the API to 422.
Every alpha here is alpha_s = A/(N K), which equals vLLM's draft acceptance rate r for full-length drafts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from backend.domain import acceptance as acc
from backend.domain import economics as eco
from backend.domain import k_advisor as ka
from backend.domain import mix
from backend.domain.decode_sim import simulate_grid

T = TypeVar("T")


class CalcError(ValueError):
    """Bad calculator input; the message is shown to the user as is."""


# Bounds of every calculator input (the API's request schemas use the same numbers). The work per call is
# linear in K, so K is bounded well above any real draft length (vLLM num_speculative_tokens) but far below
# anything that could keep a process busy; the others bound values that mean anything at all.
MAX_K = 64
MAX_OVERHEAD = 100.0  # eps: a drafter step 100x the target step is already far past break-even
MAX_SPEEDUP = 1000.0
MAX_SHARE = 1e9  # shares are relative weights (fractions, percentages or counts)
MAX_LENGTH = 1e7  # output tokens per request
MAX_CLASSES = 100
MAX_NAME = 120


def check_inputs(k: int, **numbers: float | None) -> None:
    """K in 1..MAX_K and every number finite (NaN and +-Infinity are refused, never computed with)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise CalcError(f"K must be an integer in 1..{MAX_K}, got {k!r}")
    for name, value in numbers.items():
        if value is not None and not (isinstance(value, int | float) and not isinstance(value, bool)
                                      and math.isfinite(value)):
            raise CalcError(f"{name} must be a finite number, got {value!r}")


def _guard(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except CalcError:
        raise
    except (ValueError, TypeError, OverflowError) as exc:
        raise CalcError(str(exc)) from None


def json_safe(value: Any) -> Any:
    """Recursively replace NaN/+-Inf floats by ``None`` (undefined) so the result is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def calc_speedup(k: int, alpha: float, eps: float) -> dict:
    """S = (1 + K alpha_s)/(1 + eps), margins, and what the same number would give if it were a per-token a."""
    def run() -> dict:
        check_inputs(k, alpha=alpha, overhead=eps)
        s = eco.seed_speedup(k, alpha, eps)
        a_reading = eco.leviathan_speedup(alpha, k, 0.0, eps)
        return {
            "inputs": {"k": k, "alpha": alpha, "eps": eps},
            "tokens_per_step": 1 + k * alpha,
            "speedup": s,
            "speedup_margin": eco.speedup_margin(s),
            "net_positive": s > 1,
            "alpha_breakeven": eco.break_even_alpha(k, eps),
            "margin_alpha": eco.margin_alpha(alpha, k, eps),
            "if_alpha_were_per_token": {
                "tokens_per_step": eco.leviathan_expected_tokens(alpha, k),
                "speedup": a_reading,
                "acceptance_rate": acc.rate_from_per_token(alpha, k),
            },
            "note": "alpha = accepted per draft / K (vLLM acceptance rate for full-length drafts)",
        }
    return json_safe(_guard(run))


def calc_breakeven(k: int, eps: float) -> dict:
    """Break-even alpha_s = eps/K, tau = 1 + eps, and the per-token a that breaks even (Leviathan, v = eps)."""
    def run() -> dict:
        check_inputs(k, overhead=eps)
        a_be = eco.leviathan_breakeven(k, 0.0, eps) if eps >= 0 else 0.0
        be = eco.break_even_alpha(k, eps)
        return {
            "inputs": {"k": k, "eps": eps},
            "alpha_breakeven": be,
            "tau_breakeven": eco.tau_breakeven(eps),
            "per_token_a_breakeven": a_be,
            "feasible": be <= 1.0,
            "note": None if be <= 1.0 else "no acceptance rate breaks even at this K and overhead",
        }
    return json_safe(_guard(run))


def calc_required_alpha(k: int, target: float, eps: float) -> dict:
    """alpha_s needed for a target speedup, its sensitivity to eps, and the equivalent per-token a."""
    def run() -> dict:
        check_inputs(k, speedup=target, overhead=eps)
        if not 0 < target <= MAX_SPEEDUP:
            raise CalcError(f"target speedup must be in (0, {MAX_SPEEDUP:g}], got {target!r}")
        req = eco.alpha_for_target_speedup(k, eps, target)
        max_s = (k + 1) / (1 + eps)
        note = None
        if req is None:
            note = f"infeasible: at K={k} and eps={eps} the speedup cannot exceed {max_s:.4g}x"
        elif req <= 0:
            note = "any acceptance rate reaches this target"
            req = 0.0  # a rate below 0 is no answer: the least rate that reaches it is 0
        a = eco.leviathan_alpha_for_target(k, 0.0, eps, target) if eps >= 0 else None
        return {
            "inputs": {"k": k, "target_speedup": target, "eps": eps},
            "alpha_required": req,
            "d_alpha_d_eps": target / k,
            "feasible": req is not None,
            "max_speedup": max_s,
            "per_token_a_required": a,
            "note": note,
        }
    return json_safe(_guard(run))


def calc_convert(k: int, acceptance_rate: float | None = None, per_token: float | None = None) -> dict:
    """Convert between vLLM's rate r and the per-token a (i.i.d. model, full-length drafts); give exactly one."""
    def run() -> dict:
        check_inputs(k, acceptance_rate=acceptance_rate, per_token=per_token)
        if (acceptance_rate is None) == (per_token is None):
            raise CalcError("give exactly one of --acceptance-rate or --per-token")
        if acceptance_rate is not None:
            r = float(acceptance_rate)
            if not 0.0 <= r <= 1.0:
                raise CalcError(f"acceptance rate must be in [0, 1], got {r!r}")
            a = acc.per_token_from_rate(r, k)
        else:
            a = float(per_token)
            r = acc.rate_from_per_token(a, k)
        return {
            "inputs": {"k": k, "acceptance_rate": acceptance_rate, "per_token": per_token},
            "acceptance_rate": r,
            "seed_alpha": r,
            "per_token_a": a,
            "tokens_per_step": acc.tau_from_per_token(a, k),
            "note": "assumes full-length chain drafts and position-independent acceptance",
        }
    return json_safe(_guard(run))


def parse_class_spec(text: str) -> tuple[str, float, float]:
    """'NAME=ALPHA:SHARE' -> (name, alpha, share). ``CalcError`` on anything else."""
    name, sep, rest = text.partition("=")
    alpha_s, sep2, share_s = rest.partition(":")
    if not sep or not sep2 or not name.strip():
        raise CalcError(f"class must look like NAME=ALPHA:SHARE, got {text!r}")
    try:
        return name.strip(), float(alpha_s), float(share_s)
    except ValueError:
        raise CalcError(f"class must look like NAME=ALPHA:SHARE with numbers, got {text!r}") from None


def parse_length_spec(text: str) -> tuple[str, float]:
    """'NAME=L' -> (name, L). ``CalcError`` on anything else."""
    name, sep, val = text.partition("=")
    if not sep or not name.strip():
        raise CalcError(f"length must look like NAME=L, got {text!r}")
    try:
        return name.strip(), float(val)
    except ValueError:
        raise CalcError(f"length must look like NAME=L with a number, got {text!r}") from None


def calc_mix(k: int, classes: Sequence[tuple[str, float, float]], basis: str = "draft-tokens",
             lengths: dict[str, float] | None = None, eps: float | None = None) -> dict:
    """Mixed alpha of classes given as (name, alpha_s, share) on a share basis (see mix.mixed_alpha_from_shares).

    Also returns the naive mean of class alphas (labelled as wrong unless it coincides) and, with ``eps``,
    the overall speedup 1/sum(s_c/S_c).
    """
    def run() -> dict:
        check_inputs(k, overhead=eps)
        if not classes:
            raise CalcError("give at least one --class NAME=ALPHA:SHARE")
        if len(classes) > MAX_CLASSES:
            raise CalcError(f"at most {MAX_CLASSES} classes, got {len(classes)}")
        for name, alpha, share in classes:
            check_inputs(k, **{f"alpha of {name}": alpha, f"share of {name}": share})
        for name, length in (lengths or {}).items():
            check_inputs(k, **{f"length of {name}": length})
        names = [c[0] for c in classes]
        if len(set(names)) != len(names):
            raise CalcError("class names must be unique")
        b = mix.normalize_basis(basis)
        lens = None
        if lengths:
            unknown = set(lengths) - set(names)
            if unknown:
                raise CalcError(f"--lengths names unknown classes: {', '.join(sorted(unknown))}")
            lens = [float(lengths.get(n, 1.0)) for n in names]
        items = [(a, s) for _, a, s in classes]
        alpha_mix = mix.mixed_alpha_from_shares(items, k, basis=b, lengths=lens)
        total = math.fsum(s for _, s in items)
        out = {
            "inputs": {"k": k, "basis": b, "classes": [{"name": n, "alpha": a, "share": s} for n, a, s in classes],
                       "lengths": dict(zip(names, lens)) if lens else None, "eps": eps},
            "mixed_alpha": alpha_mix,
            "mean_acceptance_length": None if alpha_mix is None else 1 + k * alpha_mix,
            "unweighted_mean_of_class_alphas": math.fsum(a for a, _ in items) / len(items),
            "share_weighted_mean_of_class_alphas": math.fsum(a * s for a, s in items) / total if total else None,
            "speedup": None,
        }
        if eps is not None:
            if b == "draft-tokens":
                out["speedup"] = eco.speedup(out["mean_acceptance_length"], eps)
            else:
                raw = [s * (lens[i] if lens else 1.0) for i, (_, s) in enumerate(items)]
                out["speedup"] = mix.mixed_speedup([(eco.seed_speedup(k, a, eps), w) for (a, _), w in zip(items, raw)])
        return out
    return json_safe(_guard(run))


def calc_overhead(k: int, tau: float, measured_speedup: float) -> dict:
    """Effective overhead eps = tau/S_meas - 1 and what follows from it (EO-01)."""
    def run() -> dict:
        check_inputs(k, tau=tau, measured_speedup=measured_speedup)
        if not (math.isfinite(tau) and tau >= 1.0):
            raise CalcError(f"tau (mean acceptance length) must be >= 1, got {tau!r}")
        if not (math.isfinite(measured_speedup) and measured_speedup > 0):
            raise CalcError(f"measured speedup must be > 0, got {measured_speedup!r}")
        e = eco.effective_overhead(tau, measured_speedup)
        alpha_s = (tau - 1.0) / k
        return {
            "inputs": {"k": k, "tau": tau, "measured_speedup": measured_speedup},
            "eps_effective": e,
            "seed_alpha": alpha_s,
            "alpha_breakeven": eco.break_even_alpha(k, e),
            "tau_breakeven": eco.tau_breakeven(e),
            "margin_alpha": eco.margin_alpha(alpha_s, k, e),
            "speedup_margin": eco.speedup_margin(measured_speedup),
        }
    return json_safe(_guard(run))


def calc_simulate(alphas: Sequence[float], ks: Sequence[int], eps_values: Sequence[float] = (0.1,), *,
                  seed: int = 0, alpha_kind: str = "rate", jitter: float = 0.0, n_requests: int = 2000,
                  tokens_per_request: int = 256, t_base: float = 0.02) -> dict:
    """Decode-loop simulation over the grid (see decode_sim.simulate_grid); JSON-ready."""
    return json_safe(_guard(lambda: simulate_grid(
        alphas, ks, eps_values, alpha_kind=alpha_kind, t_base=t_base, jitter=jitter, n_requests=n_requests,
        tokens_per_request=tokens_per_request, seed=seed).to_dict()))


def advice_dict(advice: ka.Advice) -> dict:
    """A k_advisor.Advice as JSON: rows per candidate K', the best K and the gain over the current K."""
    fit = advice.fit
    out = {
        "name": advice.name,
        "current_k": advice.current_k,
        "rows": [{"k": r.k, "tau": r.tau, "eps": r.eps, "speedup": r.speedup, "extrapolated": r.extrapolated}
                 for r in advice.rows],
        "best_k": advice.best_k,
        "best_speedup": advice.best_speedup,
        "current_speedup": advice.current_speedup,
        "gain": advice.gain,
        "best_is_extrapolated": advice.best_is_extrapolated,
        "flags": list(advice.flags),
    }
    if fit is not None:
        out["conditional"] = list(advice.conditional)
        out["fit"] = {"method": fit.method, "positions": list(fit.positions), "log_intercept": fit.intercept,
                      "log_slope": fit.slope, "decay_per_position": None if fit.slope is None else math.exp(fit.slope),
                      "rising": fit.rising}
    return out


def overhead_dict(ov: ka.Overhead) -> dict:
    return {"eps0": ov.eps0, "eps_tok": ov.eps_tok, "source": ov.source,
            "points": [{"k": k, "eps": e} for k, e in ov.points], "note": ov.note}


K_ADVISOR_NOTE = ("tau(K') = 1 + sum of u_j = p_1...p_j up to K'; rows with K' above the measured K are "
                  "extrapolated from a fitted decay of p_j; S = tau / (1 + eps0 + K' eps_tok)")


def parse_curve_spec(text: str) -> tuple[str, list[float], float]:
    """'NAME=p1,p2,...[:SHARE]' -> (name, [p...], share); the share defaults to 1. ``CalcError`` otherwise."""
    name, sep, rest = text.partition("=")
    values, sep2, share_s = rest.partition(":")
    if not sep or not name.strip() or not values.strip():
        raise CalcError(f"class must look like NAME=P1,P2,...[:SHARE], got {text!r}")
    try:
        return name.strip(), [float(x) for x in values.split(",")], float(share_s) if sep2 else 1.0
    except ValueError:
        raise CalcError(f"class must look like NAME=P1,P2,...[:SHARE] with numbers, got {text!r}") from None


def calc_k_advisor(k: int, classes: Sequence[tuple[str, Sequence[float], float]], eps: float, *,
                   eps0_share: float = 0.0, measured: Sequence[tuple[int, float]] = (),
                   class_eps: Mapping[str, float] | None = None) -> dict:
    """Expected tokens per step and speedup for K-1..K+2 per class (given p_1..p_K and an output-token share)
    and for the mix; eps measured at K, split by ``eps0_share`` or fitted with ``measured`` (K, eps) points.
    ``class_eps`` gives classes their own eps at K (the others use ``eps``); each class then carries its own
    ``overhead`` and the mix pools the classes' step time (k_advisor.advise_mix)."""
    def run() -> dict:
        check_inputs(k, overhead=eps, eps0_share=eps0_share)
        if not 0 <= eps <= MAX_OVERHEAD:
            raise CalcError(f"overhead must be in [0, {MAX_OVERHEAD:g}], got {eps!r}")
        if not classes:
            raise CalcError("give at least one class with its conditional acceptances p_1..p_K")
        if len(classes) > MAX_CLASSES or len(measured) > MAX_CLASSES:
            raise CalcError(f"at most {MAX_CLASSES} classes and {MAX_CLASSES} measurements")
        names = [c[0] for c in classes]
        if len(set(names)) != len(names):
            raise CalcError("class names must be unique")
        for kk, e in measured:
            check_inputs(kk, **{f"eps at K={kk}": e})
            if not 0 <= e <= MAX_OVERHEAD:
                raise CalcError(f"eps at K={kk} must be in [0, {MAX_OVERHEAD:g}], got {e!r}")
        for name, p, share in classes:
            check_inputs(k, **{f"share of {name}": share})
            if not 0 <= share <= MAX_SHARE:
                raise CalcError(f"share of {name} must be in [0, {MAX_SHARE:g}], got {share!r}")
            if len(p) != k:
                raise CalcError(f"class {name}: give {k} conditional acceptances p_1..p_{k}, got {len(p)}")
        own = dict(class_eps or {})
        unknown = set(own) - set(names)
        if unknown:
            raise CalcError(f"eps given for unknown classes: {', '.join(sorted(unknown))}")
        for name, e in own.items():
            check_inputs(k, **{f"eps of {name}": e})
            if not 0 <= e <= MAX_OVERHEAD:
                raise CalcError(f"eps of {name} must be in [0, {MAX_OVERHEAD:g}], got {e!r}")
        ov = ka.calibrate(eps, k, eps0_share=eps0_share, points=measured)
        ovs = {name: ka.calibrate(own[name], k, eps0_share=eps0_share, points=measured) if name in own else ov
               for name in names}
        per = [(ka.advise_class(name, list(p), k, ovs[name]), share) for name, p, share in classes]
        mix = ka.advise_mix(per) if sum(s for _, s in per) > 0 else None
        mixd = advice_dict(mix) if mix else None
        return {
            "inputs": {"k": k, "eps": eps, "eps0_share": eps0_share,
                       "classes": [{"name": n, "conditional": list(p), "share": s} for n, p, s in classes],
                       "measured": [{"k": kk, "eps": e} for kk, e in measured]},
            "overhead": overhead_dict(ov),
            "classes": [advice_dict(a) | ({"overhead": overhead_dict(ovs[a.name])} if own else {}) for a, _ in per],
            "mix": mixd,
            "best_k": mixd and mixd["best_k"],
            "best_speedup": mixd and mixd["best_speedup"],
            "current_speedup": mixd and mixd["current_speedup"],
            "gain": mixd and mixd["gain"],
            "note": K_ADVISOR_NOTE,
        }
    return json_safe(_guard(run))
