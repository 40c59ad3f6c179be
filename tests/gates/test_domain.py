"""The gate's decision from the rollout's recorded results (backend.domain.gates), by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backend.domain import gates
from backend.domain import rollout as ro

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _decide(check, gate, latency, *, age=0.0):
    return gates.decide(check, {"gate": gate, "latency": latency}, {"gate": "g-why", "latency": "l-why"},
                        evaluated_at=NOW - timedelta(seconds=age), now=NOW, eval_interval_seconds=900)


def test_every_result_of_the_rollout_has_a_decision() -> None:
    assert {r: gates.from_result(r) for r in ro.RESULTS} == {
        "pass": "pass", "fail": "fail", "inconclusive": "inconclusive", "error": "no_data"}
    assert gates.from_result(None) == "no_data"


@pytest.mark.parametrize("gate,latency,expected", [
    ("pass", "pass", "pass"), ("pass", "fail", "fail"), ("fail", "pass", "fail"), ("fail", "error", "fail"),
    ("pass", "inconclusive", "inconclusive"), ("inconclusive", "pass", "inconclusive"),
    ("pass", "error", "no_data"), ("inconclusive", "error", "no_data"), ("error", "error", "no_data"),
    (None, None, "no_data")])
def test_all_combines_both_checks(gate, latency, expected) -> None:
    assert _decide("all", gate, latency).decision == expected


def test_alpha_and_latency_read_one_check_each_and_name_why() -> None:
    assert _decide("alpha", "pass", "fail") == gates.Decision("pass", "alpha pass: g-why")
    assert _decide("latency", "pass", "fail") == gates.Decision("fail", "latency fail: l-why")
    assert _decide("all", "pass", "pass") == gates.Decision("pass", "alpha pass: g-why; latency pass: l-why")
    assert _decide("all", "pass", "inconclusive").reason == "latency inconclusive: l-why"


def test_no_evaluation_or_a_stale_one_is_no_data() -> None:
    never = gates.decide("all", {}, {}, evaluated_at=None, now=NOW, eval_interval_seconds=900)
    assert never == gates.Decision("no_data", "no rollout evaluation of this scope yet")
    assert _decide("alpha", "pass", None, age=1800).decision == "pass"  # two intervals: still current
    assert _decide("alpha", "pass", None, age=1800.5).decision == "no_data"


def test_the_controllers_vocabularies_cover_every_decision() -> None:
    assert set(gates.ARGO_PHASE) == set(gates.FLAGGER_STATUS) == set(gates.DECISIONS)
    assert gates.FLAGGER_STATUS["pass"] == 200
    # Flagger: any status above 202 fails a webhook; 5xx would be retried by its HTTP client
    assert all(400 <= s < 500 for d, s in gates.FLAGGER_STATUS.items() if d != "pass")
    assert len(set(gates.FLAGGER_STATUS.values())) == 4
    with pytest.raises(ValueError, match="check must be one of alpha, latency, all"):
        _decide("speed", "pass", "pass")
    with pytest.raises(ValueError):
        gates.combine([])
