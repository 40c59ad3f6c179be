"""The rollout plan generator: a staged Markdown plan whose numbers are the calculator's
(backend.domain.calc), filled with measured alphas and eps when the model has data."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, SessionDep, SettingsDep
from backend.domain import calc as dcalc
from backend.domain import plan
from backend.domain.calc import CalcError
from backend.schemas.calc import WholeNumber
from backend.services import rollout
from backend.services.errors import InvalidParameter

router = APIRouter(tags=["plan"], dependencies=[Depends(read_aggregate)])


ClassName = Annotated[str, Field(min_length=1, max_length=dcalc.MAX_NAME)]


class PlanCreate(BaseModel):
    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="forbid")

    model: str = Field(min_length=1, max_length=300)
    k: WholeNumber = Field(ge=1, le=16)
    traffic: dict[ClassName, Annotated[float, Field(ge=0, le=dcalc.MAX_SHARE)]] = Field(
        min_length=1, max_length=dcalc.MAX_CLASSES, description="Request share per class, e.g. {chat: 0.7, code: 0.3}.")
    concurrency: WholeNumber = Field(ge=1, le=1_000_000, description="Production running requests per engine.")
    alpha: dict[ClassName, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=dict, max_length=dcalc.MAX_CLASSES, description="Assumed alpha per class (else measured).")


class PlanRead(BaseModel):
    markdown: str
    inputs: dict[str, Any]
    numbers: dict[str, Any]


@router.post("/plan", response_model=PlanRead)
def create_plan(body: PlanCreate, session: SessionDep, settings: SettingsDep, now: NowDep) -> PlanRead:
    try:
        inputs, numbers = rollout.build_plan(session, model=body.model, k=body.k, traffic=body.traffic,
                                             concurrency=body.concurrency, alpha=body.alpha, settings=settings, now=now)
        md = plan.render(inputs, numbers)
    except (CalcError, ValueError) as exc:
        raise InvalidParameter(str(exc)) from None
    return PlanRead(markdown=md, numbers=numbers, inputs={
        "model": inputs.model, "k": inputs.k, "traffic": dict(inputs.traffic), "concurrency": inputs.concurrency,
        "eps_step": inputs.eps_step, "eps_step_source": inputs.eps_step_source,
        "eps_step_by_class": dict(inputs.eps_step_by_class), "band": inputs.band, "alpha": dict(inputs.alpha),
        "alpha_source": dict(inputs.alpha_source), "threshold": inputs.threshold})
