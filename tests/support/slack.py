"""The tests' Slack-compatible receiver: backend.sim.slack's (served by `specwatch slack-receiver` and the
demo too), with its hang deadline scaled by SPECWATCH_TEST_DEADLINE_SCALE (tests/support/deadline.py)."""

from __future__ import annotations

from backend.sim.slack import FAILURES, STATUS_KIND, Received
from backend.sim.slack import SlackReceiver as _Receiver
from tests.support.deadline import deadline as scaled

__all__ = ["FAILURES", "STATUS_KIND", "Received", "SlackReceiver"]


class SlackReceiver(_Receiver):
    def wait_for(self, n: int, timeout: float = 60) -> list[Received]:
        return super().wait_for(n, scaled(timeout))
