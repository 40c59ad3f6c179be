"""The progressive-delivery gate: the rollout track of a model x scope, read as one decision for an external
controller (backend.domain.gates) with the figures behind it. Reads only what the rollout evaluation
recorded (backend.services.rollout.evaluate_model): the same measurement, threshold and P99 verdicts the
rollout page and API show, never a second computation."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import queries
from backend.db import rollout_repo as repo
from backend.domain import gates, wording
from backend.domain import rollout as ro
from backend.services.errors import UnknownModel

_P99_KEYS = ("verdict", "reason", "delta_low", "delta_high", "spec", "base", "delta", "delta_rel")


def _p99(values: Any) -> dict[str, Any] | None:
    if not isinstance(values, dict):
        return None
    return {k: values.get(k) for k in _P99_KEYS}


def answer(session: Session, *, model: str, scope: str, check: str, settings: Settings,
           now: datetime) -> dict[str, Any]:
    """The gate's answer (the API's GateRead). An unknown model is UnknownModel (404); a known model
    whose scope has no track yet answers no_data."""
    t = repo.track(session, model, scope)
    if t is None and model not in (known := queries.model_names(session)):
        raise UnknownModel(model, known)
    v = (t.last_values or {}) if t is not None else {}
    results = {"gate": t.gate_result, "latency": t.latency_result} if t is not None else {}
    reasons = {"gate": v.get("gate_reason"), "latency": v.get("latency_reason")}
    d = gates.decide(check, results, reasons, evaluated_at=t.last_eval_at if t is not None else None, now=now,
                     eval_interval_seconds=settings.rollout_eval_interval_seconds)
    window = v.get("window") or {}
    return {
        "model": model, "scope": scope, "check": check, "decision": d.decision, "reason": d.reason,
        "argo_phase": gates.ARGO_PHASE[d.decision], "flagger_status": gates.FLAGGER_STATUS[d.decision],
        "evaluated_at": t.last_eval_at if t is not None else None, "generated_at": now,
        "max_age_seconds": gates.max_age(settings.rollout_eval_interval_seconds).total_seconds(),
        "window_start": window.get("start"), "window_end": window.get("end"),
        "gate_result": results.get("gate"), "latency_result": results.get("latency"),
        "gate_reason": reasons["gate"], "latency_reason": reasons["latency"],
        "spec_mode": t.spec_mode if t is not None else None,
        "alpha": v.get("alpha"), "threshold": v.get("threshold"), "min_drafts": v.get("min_drafts"),
        "drafts": v.get("drafts"), "margin": v.get("margin"),
        "tpot_p99": _p99(v.get("tpot_p99")), "itl_p99": _p99(v.get("itl_p99")),
        "baseline_source": v.get("baseline_source"),
        "stage": t.stage if t is not None else None,
        "stage_text": wording.stage_text(t.stage) if t is not None else None,
        "gate_phase": t.gate_phase if t is not None else None,
        "needs_human": t.stage in ro.NEEDS_HUMAN if t is not None else None,
    }
