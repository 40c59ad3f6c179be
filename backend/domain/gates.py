"""The progressive-delivery gate, pure: the rollout track's last gate measurement -> one decision an external
controller (Argo Rollouts' `web` metric provider, a Flagger webhook) can act on.

The measurement itself is the rollout recipe's (backend.domain.rollout.measure_gate for alpha, step 4;
measure_latency for the P99 TPOT confirmation, step 5): this module only names its result in the gate's
vocabulary and combines the checks asked for. Each answer is ONE measurement: the external controller
counts them with its own limits (Argo's count / failureLimit / inconclusiveLimit, Flagger's threshold),
exactly as specwatch's own gate run counts its measurements (docs/progressive-delivery.md).

Decisions: pass | fail | inconclusive | no_data.
  * a check's result: pass -> pass, fail -> fail, inconclusive (below the volume guard, or a P99 verdict
    that cannot decide) -> inconclusive, error (no spec-decode data in the window, a failed query, no
    baseline to compare against) -> no_data;
  * several checks: any fail -> fail; else all pass -> pass; else any no_data -> no_data; else inconclusive;
  * no evaluation of the scope yet, or the last one older than `max_age` -> no_data (a stopped evaluator
    never repeats an old pass).

How the controllers read a decision (the manifests in deploy/argo and deploy/flagger rely on this):
  * Argo (`ARGO_PHASE`): always HTTP 200 (the web provider marks any non-2xx an Error measurement) and the
    decision in JSON; successCondition `result == "pass"`, failureCondition `result == "fail"`: pass is
    Successful, fail Failed, inconclusive and no_data Inconclusive (neither condition holds);
  * Flagger (`FLAGGER_STATUS`): Flagger counts any status above 202 as a failed webhook, so pass is 200
    and each other decision its own 4xx (never a 5xx: Flagger's HTTP client retries those).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

DECISIONS = ("pass", "fail", "inconclusive", "no_data")
CHECKS = {"alpha": ("gate",), "latency": ("latency",), "all": ("gate", "latency")}
_FROM_RESULT = {"pass": "pass", "fail": "fail", "inconclusive": "inconclusive", "error": "no_data"}
ARGO_PHASE = {"pass": "Successful", "fail": "Failed", "inconclusive": "Inconclusive", "no_data": "Inconclusive"}
FLAGGER_STATUS = {"pass": 200, "fail": 412, "inconclusive": 425, "no_data": 424}
STALE_EVALUATIONS = 2  # the last evaluation is stale after this many evaluation intervals


@dataclass(frozen=True)
class Decision:
    decision: str
    reason: str


def from_result(result: str | None) -> str:
    """One check's recorded result (backend.domain.rollout.RESULTS; None: never measured) as a decision."""
    return _FROM_RESULT.get(result or "", "no_data")


def combine(decisions: Sequence[str]) -> str:
    if not decisions or any(d not in DECISIONS for d in decisions):
        raise ValueError(f"decisions must be some of {', '.join(DECISIONS)}: {list(decisions)}")
    if "fail" in decisions:
        return "fail"
    if all(d == "pass" for d in decisions):
        return "pass"
    return "no_data" if "no_data" in decisions else "inconclusive"


def max_age(eval_interval_seconds: float) -> timedelta:
    return timedelta(seconds=STALE_EVALUATIONS * eval_interval_seconds)


def decide(check: str, results: dict[str, str | None], reasons: dict[str, str | None], *,
           evaluated_at: datetime | None, now: datetime, eval_interval_seconds: float) -> Decision:
    """The decision for `check` (a key of CHECKS) from a track's last recorded results and reasons
    ({"gate": ..., "latency": ...}) evaluated at `evaluated_at` (None: never)."""
    if check not in CHECKS:
        raise ValueError(f"check must be one of {', '.join(CHECKS)}")
    if evaluated_at is None:
        return Decision("no_data", "no rollout evaluation of this scope yet")
    if now - evaluated_at > max_age(eval_interval_seconds):
        return Decision("no_data", f"the last rollout evaluation ({evaluated_at.isoformat()}) is older than "
                                   f"{STALE_EVALUATIONS} evaluation intervals: is the evaluator running?")
    parts = {name: from_result(results.get(name)) for name in CHECKS[check]}
    decision = combine(list(parts.values()))
    names = {"gate": "alpha", "latency": "latency"}
    why = "; ".join(f"{names[n]} {d}: {reasons.get(n) or 'not measured'}" for n, d in parts.items()
                    if decision == "pass" or d == decision)
    return Decision(decision, why)
