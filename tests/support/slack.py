"""The tests' Slack-compatible receiver is the product's (backend/sim/slack.py, also `specwatch slack-receiver`)."""

from backend.sim.slack import FAILURES, STATUS_KIND, Received, SlackReceiver

__all__ = ["FAILURES", "STATUS_KIND", "Received", "SlackReceiver"]
