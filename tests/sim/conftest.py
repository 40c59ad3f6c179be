"""Helpers for the simulator tests: a hand-driven clock and the shared reference files."""

from __future__ import annotations

import pytest

from tests.support.paths import FIXTURES

REFERENCE = FIXTURES  # the reference pages a test reads are copied beside the fixtures
START = 1_796_000_000.0


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, t: float = START):
        self.t = float(t)

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
