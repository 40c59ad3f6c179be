"""The 5-step rollout recipe as a state machine, pure: facts of one evaluation -> stage + gate result.

Recipe: 1 measure the baseline -> 2 enable the drafter -> 3 measure alpha on real traffic -> 4 gate:
alpha >= threshold on the production mix (else disable, or train a domain drafter) -> 5 confirm P99
latency did not get worse at production concurrency -> rolled out. Any step can regress.

Main path (step number in brackets): no_data [0] -> baseline [1] -> spec_on [2] -> measuring [3] ->
gate_passed [4] -> rolled_out [5]. Off the path: gate_failed, gate_error, held (gate Inconclusive, or
P99 TPOT "unresolved" at step 5: a human signs off, resumes or aborts), latency_failed, and the operator-only disabled / domain_drafter_training.

Gate measurement (one per evaluation, Argo Rollouts' vocabulary):
  * error        - the spec pool sent no data in the window, or the query failed (kept apart from fail);
  * inconclusive - fewer drafts than the volume guard (too little data to judge);
  * pass / fail  - alpha (acceptance rate A/D of the window) >= / < threshold.
Gate phase from the counters of the current gate run, exactly Argo's semantics:
  * failed       when failures_total > failure_limit            (CUMULATIVE, not consecutive)
  * error        when errors_in_row > consecutive_error_limit   (CONSECUTIVE; Argo: consecutiveError > limit)
  * inconclusive when inconclusive_total > inconclusive_limit   (CUMULATIVE; only before the gate passed)
  * passed       when successes_in_row >= consecutive_successes (CONSECUTIVE)
  * running      otherwise.
A gate run starts at the first evaluation with enough volume and restarts (counters to 0) when an
operator resumes the track or the candidate drafter (spec_mode) changes. After the gate passed the
background analysis continues: a later fail or error still regresses the track, a low-volume
(inconclusive) evaluation does not.

Forward progress is one stage per evaluation (each step's check runs on its own evaluation, like
sequential Argo steps); regressions and aborts apply at once. Dry-run: everything is measured and
recorded, but the gate never moves the stage past `measuring`. Manual stages stick (derivation keeps
measuring, the stage waits) until an operator resumes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from backend.domain import thresholds as thr
from backend.domain.wording import stage_text, verdict_text

MAIN = ("no_data", "baseline", "spec_on", "measuring", "gate_passed", "rolled_out")
OFF_PATH = {"gate_failed": 4, "gate_error": 4, "held": 4, "latency_failed": 5, "disabled": 2,
            "domain_drafter_training": 2}
STAGES = MAIN + tuple(OFF_PATH)
NEEDS_HUMAN = ("gate_failed", "gate_error", "held", "latency_failed")
ABORTS = ("gate_failed", "gate_error", "held")  # apply at once, whatever the current stage
MANUAL_STAGES = ("disabled", "domain_drafter_training")
RESULTS = ("pass", "fail", "inconclusive", "error")
GOOD_LATENCY = ("better", "no-significant-change")

# action -> (stages it is allowed from, stage it sets; None = hand the track back to derivation)
ACTIONS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "sign_off": (("gate_passed", "rolled_out", "held", "latency_failed"), "rolled_out"),
    "disable": (STAGES, "disabled"),
    "domain_drafter": (STAGES, "domain_drafter_training"),
    "hold": (MAIN[2:] + ("gate_error", "latency_failed"), "held"),
    "resume": (("held", "gate_failed", "gate_error", "latency_failed", "disabled", "domain_drafter_training"), None),
}


def step_number(stage: str) -> int:
    return MAIN.index(stage) if stage in MAIN else OFF_PATH[stage]


@dataclass(frozen=True)
class GatePolicy:
    """The gate's settings: the alpha threshold, the volume guard, the limits of a gate run (see above)."""

    threshold: float = 0.55
    min_drafts: float = 1000.0  # fewer drafts in the window: inconclusive
    failure_limit: int = 0
    consecutive_error_limit: int = 4
    inconclusive_limit: int = 3
    consecutive_successes: int = 2
    dry_run: bool = False  # measure and record, never move past `measuring`


@dataclass(frozen=True)
class Counters:
    """The current gate run's counters (reset when a run restarts)."""

    successes_in_row: int = 0
    failures_total: int = 0
    errors_in_row: int = 0
    inconclusive_total: int = 0
    measurements: int = 0


@dataclass(frozen=True)
class Facts:
    """What the data says for one model x scope over the evaluation window."""

    baseline: bool  # a baseline pool reported in the window, or a frozen snapshot exists
    spec: bool  # a spec pool exists for this scope
    spec_data: bool = False  # ... and reported in the window
    drafts: float | None = None
    alpha: float | None = None
    accepted: float | None = None  # A and D behind alpha: the gate compares them with the threshold exactly
    draft_tokens: float | None = None
    latency_verdict: str | None = None  # P99 TPOT verdict vs the baseline (None: no baseline)
    latency_reason: str | None = None  # the verdict's one-line reason, recorded with the decision
    error: str | None = None  # the query failed


@dataclass(frozen=True)
class Result:
    result: str  # pass | fail | inconclusive | error
    reason: str


@dataclass(frozen=True)
class Decision:
    stage: str
    gate_phase: str
    gate: Result
    latency: Result
    counters: Counters
    reason: str

    def changed(self, previous: str) -> bool:
        return self.stage != previous


def measure_gate(f: Facts, p: GatePolicy) -> Result:
    """One gate measurement. Edge cases: query error or no spec data -> error (never fail); alpha None
    with enough volume -> error; exactly at the threshold -> pass (compared exactly, thresholds.py: A*q >= p*D
    on the counts when known, else alpha's decimal value)."""
    if f.error:
        return Result("error", f"query failed: {f.error}")
    if not f.spec or not f.spec_data:
        return Result("error", "no spec-decode data in the window")
    if (f.drafts or 0) < p.min_drafts:
        return Result("inconclusive", f"{f.drafts or 0:.0f} drafts < volume guard {p.min_drafts:.0f}")
    if f.alpha is None:
        return Result("error", "acceptance undefined")
    if not thr.rate_below(f.alpha, p.threshold, num=f.accepted, den=f.draft_tokens):
        return Result("pass", f"alpha {f.alpha:.3f} >= {p.threshold:.2f}")
    return Result("fail", f"alpha {f.alpha:.3f} < {p.threshold:.2f}")


def measure_latency(f: Facts) -> Result:
    """P99 TPOT (per token) spec vs baseline, the verdict as the API shows it: better /
    no-significant-change pass, worse fails, unresolved (below the histogram's resolution) and
    inconclusive are inconclusive; no baseline at all (no pool, no snapshot) is an error (nothing to
    compare). The reason carries the verdict's own one-line reason."""
    if not f.baseline or f.latency_verdict is None:
        return Result("error", "no baseline to compare P99 TPOT against")
    why = f": {f.latency_reason}" if f.latency_reason else ""
    words = verdict_text(f.latency_verdict)  # the verdict as every surface words it
    if f.latency_verdict in GOOD_LATENCY:
        return Result("pass", f"P99 TPOT {words}{why}")
    if f.latency_verdict == "worse":
        return Result("fail", f"P99 TPOT {words}{why}")
    return Result("inconclusive", f"P99 TPOT {words}{why}")


def count(c: Counters, result: str, *, passed_before: bool) -> Counters:
    """Add one measurement to the counters (see the module doc for what is cumulative)."""
    if result == "pass":
        return replace(c, successes_in_row=c.successes_in_row + 1, errors_in_row=0, measurements=c.measurements + 1)
    if result == "fail":
        return replace(c, successes_in_row=0, errors_in_row=0, failures_total=c.failures_total + 1,
                       measurements=c.measurements + 1)
    if result == "error":
        return replace(c, successes_in_row=0, errors_in_row=c.errors_in_row + 1, measurements=c.measurements + 1)
    extra = 0 if passed_before else 1
    return replace(c, inconclusive_total=c.inconclusive_total + extra, errors_in_row=0,
                   measurements=c.measurements + 1)


def gate_phase(c: Counters, p: GatePolicy, *, passed_before: bool = False) -> str:
    if c.measurements == 0:
        return "idle"
    if c.failures_total > p.failure_limit:
        return "failed"
    if c.errors_in_row > p.consecutive_error_limit:
        return "error"
    if passed_before:
        return "passed"
    if c.inconclusive_total > p.inconclusive_limit:
        return "inconclusive"
    if c.successes_in_row >= p.consecutive_successes:
        return "passed"
    return "running"


_PHASE_STAGE = {"failed": "gate_failed", "error": "gate_error", "inconclusive": "held", "running": "measuring"}


def decide(stage: str, counters: Counters, facts: Facts, policy: GatePolicy, *, manual: bool = False) -> Decision:
    """The next state of one track. `stage`/`counters`/`manual` are its current state."""
    gate = measure_gate(facts, policy)
    lat = measure_latency(facts)
    if not facts.spec:
        target = "baseline" if facts.baseline else "no_data"
        why = "baseline pool reporting, no drafter" if facts.baseline else "no pool reports for this scope"
        return Decision(stage if manual else target, "idle", gate, lat, Counters(), why)
    started = counters.measurements > 0
    if not started and gate.result in ("inconclusive", "error"):
        return Decision(stage if manual else "spec_on", "idle", gate, lat, counters,
                        f"drafter on, gate not started: {gate.reason}")
    passed_before = stage in ("gate_passed", "rolled_out", "latency_failed") or (
        manual and gate_phase(counters, policy) == "passed")
    new = count(counters, gate.result, passed_before=passed_before)
    phase = gate_phase(new, policy, passed_before=passed_before)
    if phase == "passed":
        target = {"pass": "rolled_out", "fail": "latency_failed"}.get(lat.result, "gate_passed")
        if facts.latency_verdict == "unresolved" and stage in ("gate_passed", "held"):
            target = "held"  # below the histogram's resolution: more data will not decide it, a human does
        if target == "gate_passed" and stage == "rolled_out":
            target = "rolled_out"  # an inconclusive / missing latency read does not undo a confirmation
        why = f"gate passed ({new.successes_in_row} in a row); latency: {lat.reason}"
    else:
        target = _PHASE_STAGE[phase]
        why = f"gate {phase}: {gate.reason}"
    if policy.dry_run and target not in ("measuring",):
        target, why = "measuring", f"dry-run (would be: {stage_text(target)}): {why}"
    if manual:
        return Decision(stage, phase, gate, lat, new, f"manual stage kept; {why}")
    if target not in ABORTS and step_number(target) > step_number(stage) + 1:
        target = MAIN[min(step_number(stage) + 1, len(MAIN) - 1)]  # one forward step per evaluation
        why = f"{why} (advancing one step per evaluation)"
    return Decision(target, phase, gate, lat, new, why)


class TransitionError(ValueError):
    """A manual transition that is not allowed; the message says why."""


def validate_manual(stage: str, action: str, reason: str) -> str | None:
    """The stage an operator action sets (None: back to derivation, counters reset). Raises
    TransitionError for an unknown action, an empty reason or a stage the action is not allowed from."""
    if action not in ACTIONS:
        raise TransitionError(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
    if not reason or not reason.strip():
        raise TransitionError("a reason is required")
    allowed, target = ACTIONS[action]
    if stage not in allowed:
        raise TransitionError(f"{action} is not allowed from stage {stage} (allowed from {', '.join(allowed)})")
    return target
