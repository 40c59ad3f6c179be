"""A model driven through the five stages by simulated history (the real scrape -> ingest path), a code
class failing the gate, the audit trail, manual transitions and a frozen baseline snapshot."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.db import rollout_repo as repo
from backend.db.session import session_scope
from backend.services import rollout
from backend.services.errors import InvalidParameter
from backend.services.history import seed_history
from backend.services.windows import Range
from tests.rollout.conftest import BASELINE, MODEL, SPEC, T0, pool, scenario


def at(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def evaluate(factory, settings, t: float) -> dict:
    with session_scope(factory) as s:
        return rollout.evaluate(s, settings=settings, now=at(t))


def stages(factory) -> dict[str, tuple[str, str | None, str | None]]:
    with session_scope(factory) as s:
        return {t.scope: (t.stage, t.gate_result, t.latency_result) for t in repo.tracks(s, model_name=MODEL)}


def test_five_stages_and_a_code_class_failing_the_gate(factory, rollout_settings):
    s = rollout_settings
    seed_history(factory, s, scenario=scenario(BASELINE), seconds=1200, end=T0, tick=1.0)
    evaluate(factory, s, T0)
    assert stages(factory) == {"chat": ("baseline", None, "error"), "code": ("baseline", None, "error"),
                               "mixed": ("baseline", None, "error")}

    timeline = [(120, "spec_on"), (1020, "measuring"), (1320, "gate_passed"), (1620, "rolled_out")]
    end = T0
    for until, expected in timeline:
        seed_history(factory, s, scenario=scenario(BASELINE + SPEC), seconds=int(T0 + until - end), end=T0 + until,
                     tick=1.0)
        end = T0 + until
        evaluate(factory, s, end)
        got = stages(factory)
        assert got["chat"][0] == expected and got["mixed"][0] == expected, (until, got)
        assert got["code"][0] == ("spec_on" if until == 120 else "gate_failed"), (until, got)

    with session_scope(factory) as sess:
        mixed = repo.track(sess, MODEL, "mixed")
        assert mixed.stage_since == at(T0 + 1620) and mixed.gate_phase == "passed" and mixed.latency_result == "pass"
        assert mixed.successes_in_row == 3 and mixed.failures_total == 0
        events = list(reversed(repo.events(sess, track_id=mixed.id)))
        assert [(e.from_stage, e.to_stage) for e in events] == [
            ("no_data", "baseline"), ("baseline", "spec_on"), ("spec_on", "measuring"),
            ("measuring", "gate_passed"), ("gate_passed", "rolled_out")]
        assert [e.at for e in events] == [at(T0 + x) for x in (0, 120, 1020, 1320, 1620)]
        assert all(e.actor == "specwatch" and e.kind == "derived" for e in events)
        spec_on = events[1].values
        assert spec_on["drafts"] < s.rollout_min_drafts and spec_on["gate"] == "inconclusive"
        gate = events[3].values
        assert gate["alpha"] >= 0.55 and gate["drafts"] >= s.rollout_min_drafts and gate["threshold"] == 0.55
        assert gate["counters"]["successes_in_row"] == 2 and gate["baseline_source"] == "pool"
        assert events[4].values["tpot_p99"]["verdict"] in ("better", "no-significant-change")
        assert len(repo.measurements(sess, track_id=mixed.id)) == 4  # every evaluation with a drafter on

        code = repo.track(sess, MODEL, "code")
        assert code.gate_phase == "failed" and code.failures_total == 3  # cumulative: 1020, 1320, 1620
        fail_ev = repo.events(sess, track_id=code.id)[0]
        assert (fail_ev.from_stage, fail_ev.to_stage, fail_ev.at) == ("spec_on", "gate_failed", at(T0 + 1020))
        assert 0.30 < fail_ev.values["alpha"] < 0.40 and "alpha" in fail_ev.reason

    # an operator decides for the code class; derivation keeps measuring, the stage waits
    with session_scope(factory) as sess, pytest.raises(InvalidParameter, match="not allowed"):
        rollout.transition(sess, model=MODEL, scope="code", action="sign_off", reason="no", actor="bob",
                           now=at(T0 + 1700), settings=s)
    with session_scope(factory) as sess:
        ev = rollout.transition(sess, model=MODEL, scope="code", action="domain_drafter", actor="alice",
                                reason="code drafter in training", now=at(T0 + 1700), settings=s)
        assert (ev.from_stage, ev.to_stage, ev.kind, ev.actor) == ("gate_failed", "domain_drafter_training", "manual", "alice")
        assert ev.values["alpha"] < 0.4  # the numbers at that moment
    seed_history(factory, s, scenario=scenario(BASELINE + SPEC), seconds=300, end=T0 + 1920, tick=1.0)
    evaluate(factory, s, T0 + 1920)
    assert stages(factory)["code"][0] == "domain_drafter_training"
    assert stages(factory)["chat"][0] == "rolled_out"


def test_frozen_snapshot_replaces_a_missing_baseline_pool(factory, rollout_settings):
    s = rollout_settings.model_copy(update={"rollout_window_seconds": 900})
    solo = "solo-8b"
    seed_history(factory, s, scenario=scenario([pool("chat", "off", model=solo)]), seconds=1200, end=T0, tick=1.0)
    with session_scope(factory) as sess:
        snaps = rollout.capture_snapshot(sess, model=solo, rng=Range(at(T0 - 1200), at(T0)), by="carol",
                                         reason="drafter goes on the same pool", now=at(T0), settings=s)
        assert len(snaps) == 1 and snaps[0].tpot_mean and snaps[0].bins["tpot"]
    evaluate(factory, s, T0)
    spec = [pool("chat", "eagle3", model=solo, k=3, acceptance={"mode": "rate", "r": 0.75})]
    seed_history(factory, s, scenario=scenario(spec), seconds=1800, end=T0 + 1800, tick=1.0)
    for t in (T0 + 1200, T0 + 1500, T0 + 1800):  # no baseline pool reports any more
        evaluate(factory, s, t)
    with session_scope(factory) as sess:
        chat = repo.track(sess, solo, "chat")
        assert chat.last_values["baseline_source"] == "snapshot"
        assert chat.last_values["snapshot_ids"] == [snaps[0].id]
        assert chat.last_values["tpot_p99"]["verdict"] is not None and chat.latency_result in ("pass", "fail", "inconclusive")
        stages_seen = [e.to_stage for e in reversed(repo.events(sess, track_id=chat.id))]
        assert stages_seen == ["baseline", "spec_on", "measuring", "gate_passed"]
    with session_scope(factory) as sess, pytest.raises(InvalidParameter, match="no baseline pool"):
        rollout.capture_snapshot(sess, model=solo, rng=Range(at(T0 + 1200), at(T0 + 1800)), by="carol", reason="",
                                 now=at(T0 + 1800), settings=s)
