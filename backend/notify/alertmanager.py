"""Forwarding to an Alertmanager (`POST /api/v2/alerts`, a list of postable alerts) for teams that route
there. Alertmanager keys alerts by their label set, so a redelivered post is idempotent by construction.

A firing item is posted with `startsAt` (when it started firing) and `endsAt` FIRING_TTL after the post;
Alertmanager resolves an alert on its own once `endsAt` passes, so every firing alert is posted again every
`SPECWATCH_ALERTMANAGER_RESEND_SECONDS` (services/outbox.enqueue_refresh), as Prometheus re-sends firing
alerts every resend delay: an alert stays firing there as long as specwatch has it firing, and expires
FIRING_TTL after specwatch stops sending. A resolved item has `endsAt` = the resolve time. A channel's test
message is one `SpecwatchTest` alert that expires after TEST_TTL.
Alertmanager's own Slack integration does not honour 429 (alertmanager#2205); specwatch's does, so prefer
the Slack channel for Slack.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

API_PATH = "/api/v2/alerts"
FIRING_TTL = timedelta(hours=4)
TEST_ALERTNAME = "SpecwatchTest"
TEST_TTL = timedelta(minutes=5)


def endpoint(base_url: str) -> str:
    return base_url if base_url.rstrip("/").endswith(API_PATH) else base_url.rstrip("/") + API_PATH


def _test_alert(n: dict[str, Any]) -> dict[str, Any]:
    """A channel's test message (no items): one alert Alertmanager routes like any other (so its receivers
    show the path works) that expires on its own after TEST_TTL."""
    at = datetime.fromisoformat(n["at"])
    return {"labels": {"alertname": TEST_ALERTNAME, "severity": "info", "source": "specwatch"},
            "annotations": {"summary": str(n.get("title") or "specwatch test message")},
            "startsAt": at.isoformat(), "endsAt": (at + TEST_TTL).isoformat()}


def build_alerts(n: dict[str, Any]) -> list[dict[str, Any]]:
    """Alertmanager's postable alerts for one notification; annotations without a value are left out."""
    if not n.get("items"):
        return [_test_alert(n)]
    out = []
    for item in n.get("items", []):
        labels = {"alertname": str(item.get("rule")), "severity": str(item.get("severity", "warning")),
                  "source": "specwatch"}
        labels.update({k: str(v) for k, v in item.get("labels", {}).items() if k != "rule"})
        at = datetime.fromisoformat(item.get("at") or n["at"])
        starts = item.get("since") or at.isoformat()
        ends = at if item.get("event") == "resolved" else at + FIRING_TTL
        out.append({
            "labels": labels,
            "annotations": {k: str(v) for k, v in {
                "summary": item.get("reason") or item.get("rule"), "value": item.get("value"),
                "threshold": item.get("threshold"), "window": item.get("window"),
                "runbook": item.get("runbook")}.items() if v is not None and v != ""},
            "startsAt": starts,
            "endsAt": ends.isoformat(),
            "generatorURL": item.get("dashboard_url") or "",
        })
    return out
