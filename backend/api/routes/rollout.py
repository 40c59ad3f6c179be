"""Rollout status: the stage per model x scope (derived from the data), its gate history and audit log,
operators' manual transitions (sign-off, disable, domain drafter, hold, resume) and frozen baseline
snapshots. Reads are open like the analytics endpoints; every write needs the operator role."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from backend.api.auth import Operator, read_aggregate
from backend.api.deps import NowDep, SessionDep, SettingsDep
from backend.db import rollout_repo as repo
from backend.domain import rollout as ro
from backend.domain import wording
from backend.schemas.common import DURATION_FORM, INSTANT_FORM, Duration, Instant, Wire
from backend.services import rollout
from backend.services.windows import Range, parse_duration, parse_instant

router = APIRouter(tags=["rollout"], dependencies=[Depends(read_aggregate)])


class TrackRead(Wire):
    id: int
    model_name: str
    scope: str = Field(description="A traffic class, or 'mixed' (the production mix).")
    spec_mode: str | None = None
    stage: str
    stage_text: str = Field(description="The stage in plain words (the one mapping every surface uses).")
    step: int = Field(description="Recipe step 0-5 the stage belongs to.")
    stage_since: datetime
    manual: bool  # an operator set the stage; derivation waits
    needs_human: bool
    gate_phase: str  # idle | running | passed | failed | error | inconclusive
    gate_result: str | None = None
    latency_result: str | None = None
    successes_in_row: int  # the gate run's counters (SEMANTICS)
    failures_total: int
    errors_in_row: int
    inconclusive_total: int
    measurements: int  # evaluations in the gate run
    reason: str
    last_eval_at: datetime | None = None
    window_start: datetime | None = Field(None, description="Start of the window the last evaluation measured.")
    window_end: datetime | None = Field(None, description="End of that window (the evaluation's time).")
    gate_reason: str | None = None
    latency_reason: str | None = None
    gate_explanation: str | None = Field(None, description="What went wrong and what to do, when the gate could "
                                                           "not judge (error / inconclusive).")
    latency_explanation: str | None = Field(None, description="The same for the P99 latency check.")
    last_values: dict[str, Any] | None = None


class TracksRead(Wire):
    generated_at: datetime
    threshold: float
    window_seconds: int = Field(description="Trailing window of one gate evaluation.")
    eval_interval_seconds: float = Field(description="How often the evaluation runs.")
    semantics: dict[str, str]
    tracks: list[TrackRead]


class EventRead(Wire):
    id: int
    track_id: int
    at: datetime
    kind: str  # derived | manual | snapshot
    action: str | None = None  # manual: sign_off | disable | domain_drafter | hold | resume
    from_stage: str | None = None
    to_stage: str
    actor: str
    reason: str
    values: dict[str, Any] | None = None


class MeasurementRead(Wire):
    id: int
    at: datetime
    window_start: datetime
    window_end: datetime
    result: str  # pass | fail | inconclusive | error
    latency_result: str | None = None
    alpha: float | None = None
    threshold: float
    drafts: float | None = None
    dry_run: bool
    reason: str


class TransitionCreate(BaseModel):
    model: str
    scope: str = "mixed"
    action: str = Field(description="sign_off | disable | domain_drafter | hold | resume")
    reason: str = Field(min_length=1)


class SnapshotCreate(BaseModel):
    model: str
    traffic_class: str | None = None
    window: Duration | None = Field("24h", description="Trailing duration, or give start and end. " + DURATION_FORM)
    start: Instant | None = Field(None, description=INSTANT_FORM)
    end: Instant | None = Field(None, description=INSTANT_FORM)
    reason: str = ""


class SnapshotRead(Wire):
    id: int
    model_name: str
    traffic_class: str
    window_start: datetime
    window_end: datetime
    captured_at: datetime
    captured_by: str  # the operator's name
    reason: str
    tpot_mean: float | None = None
    itl_mean: float | None = None
    running_mean: float | None = None
    samples: int


SEMANTICS = {
    "failure_limit": "cumulative over the gate run (Argo failureLimit): more failed evaluations than this aborts",
    "consecutive_error_limit": "the gate is Error once more consecutive evaluations than this have no data / a query failure (Argo: > limit)",
    "inconclusive_limit": "cumulative low-volume evaluations before the gate holds for a human (before it passed)",
    "consecutive_successes": "passing evaluations in a row for the gate to pass",
    "forward_progress": "one stage per evaluation; regressions and aborts apply at once",
}


def _instant(v: Any) -> datetime | None:
    return datetime.fromisoformat(v) if isinstance(v, str) else None


def _track(t) -> TrackRead:
    v = t.last_values or {}
    window = v.get("window") or {}
    gate_why, lat_why = v.get("gate_reason"), v.get("latency_reason")
    return TrackRead.model_validate({
        **{c: getattr(t, c) for c in TrackRead.model_fields if hasattr(t, c)},
        "step": ro.step_number(t.stage), "needs_human": t.stage in ro.NEEDS_HUMAN,
        "stage_text": wording.stage_text(t.stage),
        "window_start": _instant(window.get("start")), "window_end": _instant(window.get("end")),
        "gate_reason": gate_why, "latency_reason": lat_why,
        "gate_explanation": wording.explain("gate", t.gate_result, gate_why),
        "latency_explanation": wording.explain("latency", t.latency_result, lat_why, model=t.model_name)})


@router.get("/rollout", response_model=TracksRead)
def list_tracks(session: SessionDep, settings: SettingsDep, now: NowDep, model: str | None = None) -> TracksRead:
    return TracksRead(generated_at=now, threshold=settings.rollout_gate_alpha, semantics=SEMANTICS,
                      window_seconds=settings.rollout_window_seconds,
                      eval_interval_seconds=settings.rollout_eval_interval_seconds,
                      tracks=[_track(t) for t in repo.tracks(session, model_name=model)])


@router.get("/rollout/events", response_model=list[EventRead])
def list_events(session: SessionDep, model: str | None = None, scope: str | None = None,
                limit: int = Query(200, ge=1, le=5000)) -> list[EventRead]:
    track_id = rollout.get_track(session, model, scope).id if model and scope else None
    return [EventRead.model_validate(e) for e in repo.events(session, model_name=model, track_id=track_id, limit=limit)]


@router.get("/rollout/measurements", response_model=list[MeasurementRead])
def list_measurements(session: SessionDep, model: str, scope: str = "mixed",
                      limit: int = Query(200, ge=1, le=5000)) -> list[MeasurementRead]:
    t = rollout.get_track(session, model, scope)
    return [MeasurementRead.model_validate(m) for m in repo.measurements(session, track_id=t.id, limit=limit)]


@router.post("/rollout/transitions", response_model=EventRead, status_code=201)
def create_transition(body: TransitionCreate, session: SessionDep, settings: SettingsDep, now: NowDep,
                      who: Operator) -> EventRead:
    ev = rollout.transition(session, model=body.model, scope=body.scope, action=body.action, reason=body.reason,
                            actor=who.name, now=now, settings=settings)
    return EventRead.model_validate(ev)


@router.post("/rollout/evaluate")
def evaluate_now(session: SessionDep, settings: SettingsDep, now: NowDep, who: Operator,
                 model: str | None = None) -> dict[str, Any]:
    return rollout.evaluate(session, settings=settings, now=now, model=model)


@router.get("/rollout/snapshots", response_model=list[SnapshotRead])
def list_snapshots(session: SessionDep, model: str | None = None) -> list[SnapshotRead]:
    return [SnapshotRead.model_validate(s) for s in repo.snapshots(session, model_name=model)]


@router.post("/rollout/snapshots", response_model=list[SnapshotRead], status_code=201)
def create_snapshot(body: SnapshotCreate, session: SessionDep, settings: SettingsDep, now: NowDep,
                    who: Operator) -> list[SnapshotRead]:
    if body.start:
        rng = Range(parse_instant(body.start, name="start"), parse_instant(body.end, name="end") if body.end else now)
    else:
        rng = Range(now - timedelta(seconds=parse_duration(body.window or "24h")), now)
    snaps = rollout.capture_snapshot(session, model=body.model, rng=rng, by=who.name, reason=body.reason, now=now,
                                     settings=settings, traffic_class=body.traffic_class)
    return [SnapshotRead.model_validate(s) for s in snaps]
