"""`for:` and `keep_firing_for:` are met with the evaluation tick's tolerance (a tenth of the interval), on a
hand-driven clock: a condition first seen 0.2 s after its tick fires ten ticks later, not eleven."""

from __future__ import annotations

from datetime import timedelta

from backend.domain import alerting as al
from backend.services import alerts
from tests.alerts.conftest import rules, seed_minute, setup, state, transitions


def test_tolerance_is_a_tenth_of_the_interval() -> None:
    assert al.for_tolerance(60) == 6.0 and al.for_tolerance(15) == 1.5 and al.for_tolerance(0) == 0.0


def _fire_tick(ticks: list[float], *, for_seconds: float, tolerance: float) -> float | None:
    s = al.AlertState()
    for t in ticks:
        s, entered = al.step(s, "breached", t, for_seconds=for_seconds, keep_firing_for=0, tolerance=tolerance)
        if entered == "firing":
            return t
    return None


def test_for_ten_minutes_fires_at_the_tenth_tick_despite_jitter() -> None:
    ticks = [0.2] + [60.0 * k for k in range(1, 15)]  # the first breach seen 0.2 s late, then on time
    assert _fire_tick(ticks, for_seconds=600, tolerance=al.for_tolerance(60)) == 600.0  # 599.8 s: 10 min
    assert _fire_tick(ticks, for_seconds=600, tolerance=0.0) == 660.0  # without it: one tick (a minute) late


def test_tolerance_never_fires_a_duration_more_than_a_tenth_of_a_tick_early() -> None:
    tol = al.for_tolerance(60)
    # 594.1 s elapsed is within 6 s of 10 min: met; 593.9 s is not
    assert _fire_tick([0.0, 594.1], for_seconds=600, tolerance=tol) == 594.1
    assert _fire_tick([0.0, 593.9], for_seconds=600, tolerance=tol) is None
    # a `for` that is not a whole number of ticks still waits for it: 90 s fires at the 120 s tick
    assert _fire_tick([0.0, 60.0, 120.0], for_seconds=90, tolerance=tol) == 120.0


def test_keep_firing_for_uses_the_same_tolerance() -> None:
    tol = al.for_tolerance(60)
    s = al.AlertState("firing", 0.0, 0.0, 100.2)  # last bad evaluation 0.2 s after its tick
    s, entered = al.step(s, "ok", 160.0, for_seconds=0, keep_firing_for=120, tolerance=tol)
    assert entered is None
    _, entered = al.step(s, "ok", 220.0, for_seconds=0, keep_firing_for=120, tolerance=tol)
    assert entered == "resolved"  # 119.8 s after the last bad one


def test_evaluation_cycle_fires_for_10m_at_ten_minutes(db, settings, now) -> None:
    """The real cycle (Postgres, stored rules) on a hand-driven clock: ticks every 60 s; until the alert is
    pending each evaluation runs 0.2 s after its tick, then on time. `for: 10m` fires 599.8 s after pending."""
    pool = setup(db, settings, now, config=rules(**{"for": 600}))
    t = now - timedelta(hours=1)
    for _ in range(30):  # low acceptance from the start: both windows go below within a few minutes
        t += timedelta(seconds=60)
        seed_minute(db, pool, t, 0.45)
        alerts.evaluate(db, settings=settings, now=t + timedelta(seconds=0.2))
        if state(db).phase == "pending":
            break
    assert state(db).phase == "pending"
    pending_at = t + timedelta(seconds=0.2)
    phases = []
    for _ in range(11):
        t += timedelta(seconds=60)
        seed_minute(db, pool, t, 0.45)
        alerts.evaluate(db, settings=settings, now=t)
        phases.append(state(db).phase)
    assert phases == ["pending"] * 9 + ["firing"] * 2  # the tenth tick, not the eleventh
    trs = [tr for tr in transitions(db) if tr.alert_id == state(db).id]
    assert [(tr.from_phase, tr.to_phase) for tr in trs] == [("inactive", "pending"), ("pending", "firing")]
    assert trs[0].at == pending_at and trs[1].at - trs[0].at == timedelta(seconds=599.8)
