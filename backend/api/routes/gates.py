"""The progressive-delivery gate (docs/progressive-delivery.md): the rollout track of a model x scope as one
decision (pass | fail | inconclusive | no_data) for an external controller.

* `GET /gate`: always 200 with the decision and its figures in JSON, the form Argo Rollouts' `web` metric
  provider reads (it marks any non-2xx answer an Error measurement): deploy/argo/analysis-template.yaml.
* `GET|POST /gate/flagger`: the form a Flagger webhook reads: 200 on pass, 412 on fail, 425 on
  inconclusive, 424 on no data (Flagger fails a webhook on any status above 202), with a short JSON body
  naming why (Flagger puts it in its events): deploy/flagger/canary.yaml. Flagger POSTs its payload and
  can send no header, so the token may come in the payload's `metadata.token` instead of `Authorization`.

Who may read: a `gate` token (it may read nothing else), a viewer or above; anyone with anonymous_read."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from backend.api.auth import GATE_POLICY, Principal, credentials, read_gate, token_principal
from backend.api.deps import NowDep, SessionDep, SettingsDep
from backend.config import Settings
from backend.domain import gates
from backend.services import gates as svc

router = APIRouter(tags=["gate"])

Check = Literal["all", "alpha", "latency"]
ModelQ = Annotated[str, Query(min_length=1, max_length=300, description="model_name as served by vLLM")]
ScopeQ = Annotated[str, Query(min_length=1, max_length=120,
                              description="A traffic class, or 'mixed' (the production mix; the default).")]
CheckQ = Annotated[Check, Query(description="alpha: acceptance rate >= the threshold (recipe step 4); latency: "
                                            "P99 TPOT not worse than the baseline (step 5); all: both.")]
DECISION_DOC = ("pass | fail | inconclusive | no_data. One measurement: the rollout evaluation's last one "
                "(no_data when there is none yet or it is older than `max_age_seconds`).")


class P99Read(BaseModel):
    verdict: str | None = Field(None, description="better | no-significant-change | worse | unresolved | "
                                                  "inconclusive, as the summary shows it")
    reason: str | None = None
    delta_low: float | None = None
    delta_high: float | None = None
    spec: float | None = None
    base: float | None = None
    delta: float | None = None  # spec - base
    delta_rel: float | None = None  # delta / base


class GateRead(BaseModel):
    model: str
    scope: str
    check: Check
    decision: Literal["pass", "fail", "inconclusive", "no_data"] = Field(description=DECISION_DOC)
    reason: str = Field(description="Why, in one line (the rollout evaluation's own reasons).")
    argo_phase: Literal["Successful", "Failed", "Inconclusive"] = Field(
        description="What deploy/argo/analysis-template.yaml makes of the decision.")
    flagger_status: Literal[200, 412, 424, 425] = Field(description="What /gate/flagger answers for it.")
    evaluated_at: datetime | None = Field(None, description="When the rollout evaluation measured it.")
    generated_at: datetime
    max_age_seconds: float = Field(description="An evaluation older than this is no_data (two evaluation "
                                               "intervals, SPECWATCH_ROLLOUT_EVAL_INTERVAL_SECONDS).")
    window_start: datetime | None = None
    window_end: datetime | None = None
    gate_result: str | None = Field(None, description="The alpha check's result: pass | fail | inconclusive | "
                                                      "error (null: no drafter in this scope).")
    latency_result: str | None = Field(None, description="The P99 TPOT check's result, the same words.")
    gate_reason: str | None = None
    latency_reason: str | None = None
    spec_mode: str | None = None
    alpha: float | None = Field(None, description="Acceptance rate A/D over the window.")
    threshold: float | None = Field(None, description="The gate's alpha threshold for this scope.")
    min_drafts: float | None = Field(None, description="Volume guard: fewer drafts is inconclusive.")
    drafts: float | None = None
    margin: float | None = Field(None, description="alpha minus break-even alpha, as the summary shows it.")
    tpot_p99: P99Read | None = Field(None, description="P99 TPOT (per token) against the baseline.")
    itl_p99: P99Read | None = Field(None, description="P99 ITL (per engine step), with a live baseline pool.")
    baseline_source: str | None = Field(None, description="pool | snapshot | pool-other-class (null: none)")
    stage: str | None = Field(None, description="specwatch's own rollout stage (for information: the external "
                                                "controller applies its own limits).")
    stage_text: str | None = None
    gate_phase: str | None = None
    needs_human: bool | None = None


class FlaggerRead(BaseModel):
    decision: Literal["pass", "fail", "inconclusive", "no_data"] = Field(description=DECISION_DOC)
    reason: str
    model: str
    scope: str
    check: Check
    evaluated_at: datetime | None = None


MetaValue = Annotated[str, StringConstraints(max_length=1024)]


class FlaggerPayload(BaseModel):
    """What Flagger POSTs to a webhook (CanaryWebhookPayload); only `metadata.token` is read."""

    model_config = ConfigDict(extra="ignore")

    name: Annotated[str, StringConstraints(max_length=253)] | None = None
    namespace: Annotated[str, StringConstraints(max_length=253)] | None = None
    phase: Annotated[str, StringConstraints(max_length=64)] | None = None
    checksum: Annotated[str, StringConstraints(max_length=256)] | None = None
    metadata: dict[Annotated[str, StringConstraints(max_length=253)], MetaValue] | None = Field(
        None, max_length=32, description="The webhook's metadata; `token`: a specwatch API token (a `gate` "
                                         "token: it can read nothing else), for callers that send no header.")


@router.get("/gate", response_model=GateRead, dependencies=[Depends(read_gate)], summary="Rollout gate (Argo)")
def get_gate(session: SessionDep, settings: SettingsDep, now: NowDep, model: ModelQ, scope: ScopeQ = "mixed",
             check: CheckQ = "all") -> dict[str, Any]:
    """The gate's decision and figures, always with 200 (Argo's web provider: jsonPath `{$.decision}`,
    successCondition `result == "pass"`, failureCondition `result == "fail"`)."""
    return svc.answer(session, model=model, scope=scope, check=check, settings=settings, now=now)


_FLAGGER_RESPONSES: dict[int | str, dict[str, Any]] = {
    gates.FLAGGER_STATUS[d]: {"model": FlaggerRead, "description": f"decision {d}: Flagger halts or fails the "
                                                                   "webhook (any status above 202)"}
    for d in ("fail", "inconclusive", "no_data")}


def _flagger(session, settings: Settings, now: datetime, caller: Principal | None, *, model: str, scope: str,
             check: str, payload: FlaggerPayload | None) -> JSONResponse:
    token = (payload.metadata or {}).get("token") if payload is not None else None
    if caller is None and token and settings.auth_mode == "token":
        caller = token_principal(session, token, now)
    GATE_POLICY.check(caller, settings)
    a = svc.answer(session, model=model, scope=scope, check=check, settings=settings, now=now)
    body = FlaggerRead.model_validate({k: a[k] for k in FlaggerRead.model_fields})
    return JSONResponse(status_code=gates.FLAGGER_STATUS[a["decision"]], content=body.model_dump(mode="json"))


Caller = Annotated[Principal | None, Depends(credentials)]
FLAGGER_DOC = ("200 on pass; 412 fail, 425 inconclusive, 424 no data: Flagger proceeds on 200 and halts otherwise "
               "(confirm-rollout: waits; rollout / pre-rollout: counts a failed check).")


@router.post("/gate/flagger", response_model=FlaggerRead, responses=_FLAGGER_RESPONSES,
             summary="Rollout gate (Flagger webhook)", description=FLAGGER_DOC + " The credential: `Authorization`, "
             "or the payload's `metadata.token` (token mode): Flagger sends no header.")
def flagger_gate(session: SessionDep, settings: SettingsDep, now: NowDep, caller: Caller, model: ModelQ,
                 scope: ScopeQ = "mixed", check: CheckQ = "all", payload: FlaggerPayload | None = None) -> JSONResponse:
    return _flagger(session, settings, now, caller, model=model, scope=scope, check=check, payload=payload)


@router.get("/gate/flagger", response_model=FlaggerRead, responses=_FLAGGER_RESPONSES,
            summary="Rollout gate (Flagger form, GET)", description=FLAGGER_DOC + " The same as the POST, for a "
            "caller that sends its token in `Authorization` (a load tester's command, curl).")
def flagger_gate_get(session: SessionDep, settings: SettingsDep, now: NowDep, caller: Caller, model: ModelQ,
                     scope: ScopeQ = "mixed", check: CheckQ = "all") -> JSONResponse:
    return _flagger(session, settings, now, caller, model=model, scope=scope, check=check, payload=None)
