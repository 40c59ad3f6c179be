"""Deadlines for waits on real services: each wait returns as soon as its event happens (the row appears,
the message arrives, the target answers); the deadline only catches a hang, so it is generous (about ten
times what the wait takes on a busy 2-core machine) and never a verdict on speed.

SPECWATCH_TEST_DEADLINE_SCALE multiplies every deadline (e.g. 3 on a very slow runner, 0.3 to make a hang
show up sooner while debugging)."""

from __future__ import annotations

import os

ENV = "SPECWATCH_TEST_DEADLINE_SCALE"


def scale() -> float:
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{ENV}={raw!r}: want a positive number") from None
    if not value > 0:
        raise ValueError(f"{ENV}={raw!r}: want a positive number")
    return value


def deadline(seconds: float) -> float:
    """A hang-catching deadline of `seconds` (already generous), scaled by SPECWATCH_TEST_DEADLINE_SCALE."""
    return seconds * scale()


def deadline_ms(seconds: float) -> int:
    """The same in milliseconds (Playwright)."""
    return int(deadline(seconds) * 1000)
