"""Calculator (what-if) endpoints: backend.domain.calc, so the numbers equal `specwatch calc ... --json`."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Depends

from backend.api.auth import read_aggregate
from backend.domain import calc as dcalc
from backend.schemas.calc import (
    BreakevenCalcBody,
    CalcRead,
    ConvertCalcBody,
    KAdvisorCalcBody,
    MixCalcBody,
    OverheadCalcBody,
    RequiredAlphaCalcBody,
    SpeedupCalcBody,
)
from backend.services.errors import InvalidParameter

router = APIRouter(prefix="/calc", tags=["calc"], dependencies=[Depends(read_aggregate)])


def _run(operation: str, fn: Callable[[], dict]) -> CalcRead:
    try:
        result = fn()
    except dcalc.CalcError as exc:  # bad input: 422 with the calculator's own message
        raise InvalidParameter(str(exc)) from exc
    values = {k: (float(v) if v is not None else None) for k, v in result.items()
              if k != "inputs" and (v is None or (isinstance(v, int | float) and not isinstance(v, bool)))}
    notes = [result["note"]] if isinstance(result.get("note"), str) else []
    return CalcRead(operation=operation, inputs=result.get("inputs", {}), values=values, result=result,
                    notes=notes)


@router.post("/speedup", response_model=CalcRead, summary="Speedup from K, alpha and eps")
def calc_speedup(body: SpeedupCalcBody) -> CalcRead:
    """S = (1 + K alpha_s) / (1 + eps), break-even alpha eps/K and the margin; also what the same number
    would give if it were read as a per-token a."""
    return _run("speedup", lambda: dcalc.calc_speedup(body.k, body.alpha, body.overhead))


@router.post("/breakeven", response_model=CalcRead, summary="Break-even alpha")
def calc_breakeven(body: BreakevenCalcBody) -> CalcRead:
    """alpha_s,be = eps / K, tau_be = 1 + eps, and the per-token a at break-even."""
    return _run("breakeven", lambda: dcalc.calc_breakeven(body.k, body.overhead))


@router.post("/required-alpha", response_model=CalcRead, summary="Alpha needed for a target speedup")
def calc_required_alpha(body: RequiredAlphaCalcBody) -> CalcRead:
    """alpha_s,req = (S (1 + eps) - 1) / K; null when infeasible (S > (K+1)/(1+eps))."""
    return _run("required-alpha", lambda: dcalc.calc_required_alpha(body.k, body.speedup, body.overhead))


@router.post("/convert", response_model=CalcRead, summary="Convert acceptance rate <-> per-token a")
def calc_convert(body: ConvertCalcBody) -> CalcRead:
    """From r (solve a + ... + a^K = K r) or from a (r and tau under the i.i.d. model); give exactly one."""
    if (body.acceptance_rate is None) == (body.per_token is None):
        raise InvalidParameter("give exactly one of acceptance_rate or per_token")
    return _run("convert", lambda: dcalc.calc_convert(body.k, body.acceptance_rate, body.per_token))


@router.post("/mix", response_model=CalcRead, summary="Mixed-traffic alpha")
def calc_mix(body: MixCalcBody) -> CalcRead:
    """Draft-token shares: sum w_c alpha_c (70 % at 0.7 + 30 % at 0.4 -> 0.61); request shares (with
    optional output lengths): tau_mix = 1 / sum(s_c / tau_c). With `overhead`, the overall speedup."""
    classes = [(c.name, c.alpha, c.share) for c in body.classes]
    return _run("mix", lambda: dcalc.calc_mix(body.k, classes, body.share_basis, body.lengths, body.overhead))


@router.post("/overhead", response_model=CalcRead, summary="Effective overhead from a measured speedup")
def calc_overhead(body: OverheadCalcBody) -> CalcRead:
    """eps_eff = tau / S_meas - 1, then break-even alpha and margin (EO-01)."""
    return _run("overhead", lambda: dcalc.calc_overhead(body.k, body.tau, body.measured_speedup))


@router.post("/k-advisor", response_model=CalcRead, summary="Which K maximises the speedup")
def calc_k_advisor(body: KAdvisorCalcBody) -> CalcRead:
    """From each class's conditional acceptance p_1..p_K: tau(K') = 1 + sum of u_j = p_1...p_j up to K',
    eps(K') = eps0 + K' eps_tok and S = tau / (1 + eps) for K' = K-1..K+2, per class and for the mix
    (output-token shares; tau_mix = 1 / sum s_c / tau_c). Rows above K are flagged `extrapolated` (fitted
    decay of p_j). `values` holds the mix's best K, its speedup, the current K's speedup and the gain;
    422 when a class's p list is not K long. See docs/k-advisor.md."""
    classes = [(c.name, c.conditional, c.share) for c in body.classes]
    measured = [(m.k, m.overhead) for m in body.measured]
    return _run("k-advisor", lambda: dcalc.calc_k_advisor(body.k, classes, body.overhead,
                                                          eps0_share=body.eps0_share, measured=measured))
