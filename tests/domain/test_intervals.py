from datetime import UTC, datetime, timedelta

from backend.domain.intervals import covered_seconds

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)


def m(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_two_overlapping_eight_minute_alerts_are_twelve_minutes_not_sixteen():
    assert covered_seconds([(m(0), m(8)), (m(4), m(12))]) == 12 * 60


def test_the_same_eight_minutes_twice_is_eight_minutes():
    assert covered_seconds([(m(0), m(8)), (m(0), m(8))]) == 8 * 60


def test_disjoint_nested_touching_and_empty_spans():
    spans = [(m(30), m(40)), (m(0), m(10)), (m(2), m(5)), (m(10), m(15)), (m(50), m(50)), (m(60), m(55))]
    assert covered_seconds(spans) == (15 + 10) * 60
    assert covered_seconds([]) == 0.0
