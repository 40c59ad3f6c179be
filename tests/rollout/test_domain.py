"""The stage machine and gate semantics, pure (no database)."""

from __future__ import annotations

import pytest

from backend.domain import rollout as ro

P = ro.GatePolicy(threshold=0.55, min_drafts=1000, failure_limit=1, consecutive_error_limit=2,
                  inconclusive_limit=1, consecutive_successes=2)
GOOD = ro.Facts(baseline=True, spec=True, spec_data=True, drafts=5000, alpha=0.7, latency_verdict="better")


def run(facts_seq, stage="spec_on", policy=P, counters=None):
    counters = counters or ro.Counters()
    out = []
    for f in facts_seq:
        d = ro.decide(stage, counters, f, policy)
        stage, counters = d.stage, d.counters
        out.append(d)
    return out


def test_main_path_one_step_per_evaluation():
    base = ro.decide("no_data", ro.Counters(), ro.Facts(baseline=True, spec=False), P)
    assert base.stage == "baseline" and base.gate_phase == "idle"
    low = ro.decide("baseline", ro.Counters(), ro.Facts(baseline=True, spec=True, spec_data=True, drafts=10, alpha=0.9), P)
    assert (low.stage, low.gate.result, low.counters.measurements) == ("spec_on", "inconclusive", 0)
    stages = [d.stage for d in run([GOOD] * 4)]
    assert stages == ["measuring", "gate_passed", "rolled_out", "rolled_out"]


def test_failures_are_cumulative_not_consecutive():
    bad = ro.Facts(baseline=True, spec=True, spec_data=True, drafts=5000, alpha=0.4)
    ds = run([bad, GOOD, bad])  # failure_limit 1: the 2nd failure in total aborts, a pass in between does not reset
    assert [d.gate.result for d in ds] == ["fail", "pass", "fail"]
    assert [d.stage for d in ds] == ["measuring", "measuring", "gate_failed"]
    assert ds[-1].counters.failures_total == 2


def test_error_is_separate_from_fail_and_consecutive():
    err = ro.Facts(baseline=True, spec=True, spec_data=False)
    ds = run([GOOD, err, GOOD, err, err, err])
    assert [d.gate.result for d in ds] == ["pass", "error", "pass", "error", "error", "error"]
    # Argo: Error once the consecutive errors exceed the limit (2 here), not when they reach it
    assert ds[2].counters.errors_in_row == 0 and ds[-2].stage != "gate_error" and ds[-1].stage == "gate_error"
    assert ds[-1].counters.failures_total == 0
    assert ro.measure_gate(ro.Facts(baseline=True, spec=True, error="timeout"), P).result == "error"


def test_inconclusive_holds_for_a_human_before_the_gate_passed_only():
    low = ro.Facts(baseline=True, spec=True, spec_data=True, drafts=10, alpha=0.7)
    ds = run([GOOD, low, low])
    assert [d.stage for d in ds] == ["measuring", "measuring", "held"]
    after = run([GOOD, GOOD, GOOD, low, low, low])
    assert after[-1].stage == "rolled_out"


def test_any_step_regresses_and_latency_fails():
    bad = ro.Facts(baseline=True, spec=True, spec_data=True, drafts=5000, alpha=0.4)
    ds = run([GOOD, GOOD, GOOD, bad, bad])
    assert [d.stage for d in ds][-1] == "gate_failed"
    worse = ro.Facts(baseline=True, spec=True, spec_data=True, drafts=5000, alpha=0.7, latency_verdict="worse")
    assert [d.stage for d in run([worse] * 3)] == ["measuring", "gate_passed", "latency_failed"]
    unsure = ro.Facts(baseline=True, spec=True, spec_data=True, drafts=5000, alpha=0.7, latency_verdict="inconclusive")
    assert run([unsure] * 3)[-1].stage == "gate_passed"
    # below the histogram's resolution: inconclusive, and held for a human once the latency step is reached
    why = "change below the histogram's resolution: both P99s in (10, 25] ms"
    unresolved = ro.Facts(baseline=True, spec=True, spec_data=True, drafts=5000, alpha=0.7,
                          latency_verdict="unresolved", latency_reason=why)
    ds = run([unresolved] * 4)
    assert [d.stage for d in ds] == ["measuring", "gate_passed", "held", "held"]
    assert ds[-1].latency.result == "inconclusive" and why in ds[-1].latency.reason and why in ds[-1].reason
    assert ro.validate_manual("held", "sign_off", "checked with finer buckets") == "rolled_out"
    kept = ro.decide("rolled_out", ro.Counters(3, 0, 0, 0, 3), unresolved, P)
    assert kept.stage == "rolled_out"  # an unresolved read does not undo a confirmation
    assert "P99 TPOT slower than baseline: P99" in ro.measure_latency(
        ro.Facts(baseline=True, spec=True, latency_verdict="worse", latency_reason="P99 (10, 25] ms vs ...")).reason
    gone = ro.decide("rolled_out", ro.Counters(3, 0, 0, 0, 3), ro.Facts(baseline=True, spec=False), P)
    assert gone.stage == "baseline"


def test_dry_run_never_moves_past_measuring_and_manual_sticks():
    dry = ro.GatePolicy(**{**P.__dict__, "dry_run": True})
    ds = run([GOOD] * 3, policy=dry)
    assert {d.stage for d in ds} == {"measuring"} and ds[-1].gate_phase == "passed"
    d = ro.decide("disabled", ro.Counters(), GOOD, P, manual=True)
    assert d.stage == "disabled" and d.counters.measurements == 1


def test_exactly_at_threshold_passes():
    f = ro.Facts(baseline=True, spec=True, spec_data=True, drafts=1000, alpha=0.55)
    assert ro.measure_gate(f, P).result == "pass"


def test_manual_transition_validation():
    assert ro.validate_manual("gate_failed", "domain_drafter", "training a code drafter") == "domain_drafter_training"
    assert ro.validate_manual("held", "resume", "volume is back") is None
    assert ro.validate_manual("gate_passed", "sign_off", "P99 checked by hand") == "rolled_out"
    with pytest.raises(ro.TransitionError, match="reason"):
        ro.validate_manual("held", "resume", "  ")
    with pytest.raises(ro.TransitionError, match="not allowed"):
        ro.validate_manual("spec_on", "sign_off", "too early")
    with pytest.raises(ro.TransitionError, match="unknown action"):
        ro.validate_manual("held", "promote", "x")
