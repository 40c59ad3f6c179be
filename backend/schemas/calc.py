"""Calculator bodies and answers (POST /calc/...)."""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from backend.domain import calc as dcalc
from backend.schemas.common import Wire


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
