"""Forwarding to an Alertmanager (`POST /api/v2/alerts`, a list of postable alerts) for teams that route
there. Alertmanager keys alerts by their label set, so a redelivered post is idempotent by construction.

A firing item is posted with `startsAt` (when it started firing) and `endsAt` FIRING_TTL after the post;
Alertmanager resolves an alert on its own once `endsAt` passes, so every firing alert is posted again every
`SPECWATCH_ALERTMANAGER_RESEND_SECONDS` (services/outbox.enqueue_refresh), as Prometheus re-sends firing
alerts every resend delay: an alert stays firing there as long as specwatch has it firing, and expires
FIRING_TTL after specwatch stops sending. A resolved item has `endsAt` = the resolve time.
Alertmanager's own Slack integration does not honour 429 (alertmanager#2205); specwatch's does, so prefer
the Slack channel for Slack.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

API_PATH = "/api/v2/alerts"
FIRING_TTL = timedelta(hours=4)


def endpoint(base_url: str) -> str:
    return base_url if base_url.rstrip("/").endswith(API_PATH) else base_url.rstrip("/") + API_PATH


def build_alerts(n: dict[str, Any]) -> list[dict[str, Any]]:
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
            "annotations": {"summary": str(item.get("reason") or item.get("rule")),
                            "value": str(item.get("value")), "threshold": str(item.get("threshold")),
                            "window": str(item.get("window") or ""), "runbook": str(item.get("runbook") or "")},
            "startsAt": starts,
            "endsAt": ends.isoformat(),
            "generatorURL": item.get("dashboard_url") or "",
        })
    return out
