"""The calculator (POST /calc/...) and the K advisor from measured acceptance (GET /k-advice)."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from backend.domain import calc as dcalc
from backend.schemas.common import WindowRead, Wire


class _CalcBody(BaseModel):
    """Calculator inputs: bounded (backend.domain.calc's limits), finite (NaN and +-Infinity refused), and
    strict about types (`false` is not 0, "5" is not 5); unknown fields are refused rather than ignored."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="forbid")


def _whole(value: Any) -> Any:
    """A float with no fractional part as the int it is: JSON (and so OpenAPI's `integer`) does not tell 3.0
    from 3, while a strict model refuses 3.0; `true` and "3" stay refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# an integer input of a strict body: JSON's integer, 3.0 included (bounds go before it: Annotated[int,
# Field(...), BeforeValidator(_whole)], or `x: WholeNumber = Field(...)`, so that they reach the document)
WholeNumber = Annotated[int, BeforeValidator(_whole)]
K = Annotated[int, Field(ge=1, le=dcalc.MAX_K, description=f"num_speculative_tokens, 1..{dcalc.MAX_K}."),
              BeforeValidator(_whole)]
Overhead = Annotated[float, Field(ge=0, le=dcalc.MAX_OVERHEAD,
                                  description="eps: spec step time / plain step time - 1.")]
Probability = Annotated[float, Field(ge=0, le=1)]


class SpeedupCalcBody(_CalcBody):
    k: K
    alpha: Probability = Field(description="Seed alpha (accepted per draft / K).")
    overhead: Overhead


class BreakevenCalcBody(_CalcBody):
    k: K
    overhead: Overhead


class RequiredAlphaCalcBody(_CalcBody):
    k: K
    speedup: float = Field(gt=0, le=dcalc.MAX_SPEEDUP)
    overhead: Overhead


class ConvertCalcBody(_CalcBody):
    k: K
    acceptance_rate: Probability | None = None
    per_token: Probability | None = None


class MixClassBody(_CalcBody):
    name: str = Field(min_length=1, max_length=dcalc.MAX_NAME)
    alpha: Probability
    share: float = Field(ge=0, le=dcalc.MAX_SHARE)


class MixCalcBody(_CalcBody):
    k: K
    classes: list[MixClassBody] = Field(min_length=1, max_length=dcalc.MAX_CLASSES)
    share_basis: Literal["draft-tokens", "requests"] = "draft-tokens"
    lengths: dict[Annotated[str, Field(max_length=dcalc.MAX_NAME)],
                  Annotated[float, Field(gt=0, le=dcalc.MAX_LENGTH)]] | None = Field(
        None, max_length=dcalc.MAX_CLASSES, description="Output length per class name (requests basis).")
    overhead: Overhead | None = Field(None, description="eps, to also get the overall speedup.")


class OverheadCalcBody(_CalcBody):
    k: K
    tau: float = Field(ge=1, le=dcalc.MAX_K + 1)
    measured_speedup: float = Field(gt=0, le=dcalc.MAX_SPEEDUP)


class KAdvisorClassBody(_CalcBody):
    name: str = Field(min_length=1, max_length=dcalc.MAX_NAME)
    conditional: list[Probability] = Field(
        min_length=1, max_length=dcalc.MAX_K,
        description="Measured conditional acceptance p_1..p_K (P(token j accepted | tokens before it accepted)).")
    share: float = Field(1.0, ge=0, le=dcalc.MAX_SHARE,
                         description="Output-token share in the mix (request share at equal output length).")


class KAdvisorMeasuredBody(_CalcBody):
    k: K
    overhead: Overhead


class KAdvisorCalcBody(_CalcBody):
    k: K
    classes: list[KAdvisorClassBody] = Field(min_length=1, max_length=dcalc.MAX_CLASSES)
    overhead: Overhead = Field(description="eps measured at K (spec step time / plain step time - 1).")
    eps0_share: Probability = Field(0.0, description="Assumed fixed share of eps (eps0 = share * eps); the "
                                    "rest grows with K. Ignored when `measured` spans another K.")
    measured: list[KAdvisorMeasuredBody] = Field(
        default_factory=list, max_length=dcalc.MAX_CLASSES,
        description="eps measured at other K for the same model and drafter: eps(K) becomes the "
                    "least-squares line through all points (a linear solve for two K).")


class CalcRead(Wire):
    """Result of one calculator operation. `result` is exactly what `specwatch calc ... --json` prints
    (backend.domain.calc); `values` repeats its top-level numbers (null = undefined/infeasible)."""

    operation: str
    inputs: dict[str, Any]
    values: dict[str, float | None]
    result: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class KRowRead(Wire):
    k: int = Field(description="Candidate draft length K'.")
    tau: float | None = Field(None, description="Expected tokens per step 1 + u_1 + ... + u_K'.")
    eps: float | None = Field(None, description="Modelled step overhead eps(K') = eps0 + K' eps_tok of the "
                              "class; for the mix, the classes' pooled step time (null where tau is).")
    speedup: float | None = Field(None, description="tau / (1 + eps).")
    extrapolated: bool = Field(description="K' above the measured K: p_j beyond K come from the fitted decay.")


class KFitRead(Wire):
    method: str
    positions: list[int] = Field(description="Positions (1-based) the fit used.")
    log_intercept: float | None = None
    log_slope: float | None = None
    decay_per_position: float | None = Field(None, description="exp(log_slope): p_{j+1} / p_j of the fit.")
    rising: bool = False


class KOverheadRead(Wire):
    eps0: float
    eps_tok: float
    source: str
    points: list[dict[str, float]] = Field(default_factory=list, description="(k, eps) measurements used.")
    note: str | None = None


class KAdviceRead(Wire):
    name: str = Field(description="Traffic class, or 'mixed' for the traffic mix.")
    current_k: int
    rows: list[KRowRead]
    best_k: int | None = None
    best_speedup: float | None = None
    current_speedup: float | None = None
    gain: float | None = Field(None, description="best / current speedup - 1.")
    best_is_extrapolated: bool = False
    flags: list[str] = Field(default_factory=list)
    conditional: list[float | None] | None = Field(None, description="Measured p_1..p_K.")
    fit: KFitRead | None = None
    drafts: float | None = None
    output_tokens: float | None = Field(None, description="N + A: the class's weight in the mix.")
    eps_step: float | None = Field(None, description="The class's step overhead at the current K: mean ITL spec / "
                                   "baseline - 1 in its band, or the band default (see eps_step_source); for "
                                   "the mix, its classes' pooled step time at K.")
    eps_step_source: str | None = Field(None, description="measured | default-for-band; 'pooled from classes' "
                                        "for the mix.")
    overhead: KOverheadRead | None = Field(None, description="eps(K) = eps0 + K eps_tok used for these rows "
                                           "(null for the mix: each class keeps its own).")


class KAdviceModeRead(Wire):
    spec_mode: str
    drafter: str | None = None
    k: int | None = Field(None, description="The K every class runs (null when they differ).")
    concurrency_band: str | None = None
    classes: list[KAdviceRead] = Field(default_factory=list)
    mix: KAdviceRead | None = None
    unavailable: dict[str, str] = Field(default_factory=dict, description="Class -> why it has no advice.")
    incomplete: bool = Field(False, description="The mix leaves out classes without a per-position curve.")


class KAdviceSetRead(Wire):
    model_name: str
    window: WindowRead
    generated_at: datetime
    modes: list[KAdviceModeRead]
    note: str
