"""Helpers for the simulator tests: a hand-driven clock and the shared reference files."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
FIXTURES = SHARED / "fixtures"
REFERENCE = SHARED / "reference"
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
