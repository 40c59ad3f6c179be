"""A clock a test moves: code under test reads the time by calling it and waits by its `sleep`, which
records the wait and moves the clock instead of sleeping."""

from __future__ import annotations

import time


class FakeClock:
    def __init__(self, t: float | None = None) -> None:
        self.t = time.time() if t is None else t  # default: start at the wall clock
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds
