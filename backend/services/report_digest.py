"""The weekly Slack digest of the report, sent once per week through the alert outbox."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import alert_repo
from backend.db import rollout_repo as repo
from backend.domain import money, wording
from backend.schemas.summary import MIXED
from backend.services.report import previous_week, week_label, weekly
from backend.services.report_wording import duration

DIGEST_KINDS = ("slack", "slack_api", "webhook")


def digest_due(now: datetime, settings: Settings) -> str | None:
    """The week the digest reports on (the one before `now`'s), once the configured local day/time of
    `now`'s week has passed; None before that. With digest_week "current": `now`'s own week, so far (due
    at once; the outbox's key sends it once per week)."""
    tz = ZoneInfo(settings.report_timezone)
    local = now.astimezone(tz)
    if settings.digest_week == "current":
        return week_label(local.date())
    hh, mm = (int(x) for x in settings.digest_time.split(":"))
    monday = local.date() - timedelta(days=local.isoweekday() - 1)
    due = datetime.combine(monday + timedelta(days=settings.digest_weekday - 1), time(hh, mm), tz)
    return previous_week(week_label(local.date())) if local >= due else None


def saved_week_line(total: dict[str, Any]) -> str:
    """'saved this week so far (3 h of data): 12.80 USD (95 %: 3.47 USD to 23.47 USD)': the digest's and the
    report's prose line for week_money."""
    cur = total["currency"]
    lo, hi = total.get("saved_this_week_so_far_low"), total.get("saved_this_week_so_far_high")
    band = "" if lo is None or hi is None else f" (95 %: {money.interval_text(lo, hi, cur)})"
    return f"{total['label']}: {money.money_text(total['saved_this_week_so_far'], cur)}{band}"


def digest_payload(r: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Channel-neutral notification (the outbox's shape): one item per model, rendered by the Slack
    builder as a section with the stage, alpha vs the gate, the week and the volume."""
    url = f"{settings.dashboard_base_url.rstrip('/')}/report?week={r['week']}"
    at = r["end"] if r["complete"] else r.get("generated_at", r["end"])  # a week so far: as of when computed
    items = []
    for m in r["models"]:
        mixed = next((c for c in m["classes"] if c["scope"] == MIXED), {})
        delta = mixed.get("alpha_delta")
        alpha = "n/a" if mixed.get("alpha") is None else f"{mixed['alpha']:.3f}"
        lines = [f"alpha mixed {alpha}" + (f" ({delta:+.3f} vs last week)" if delta is not None else ""),
                 f"alerts fired {m['alerts']['fired']}, {duration(m['alerts']['seconds_in_alert'])} in alert",
                 f"{len(m['changes'])} change(s), {len(m['decisions'])} decision(s), {len(m['pending'])} pending"]
        lines += [f"pending: {p['scope']}: {wording.stage_text(p['stage'])}; to do: {p['action']}" for p in m["pending"]]
        total = (m.get("capacity") or {}).get("total") or {}
        if total.get("saved_this_week_so_far") is not None:
            lines.append(saved_week_line(total))
        items.append({"event": "digest", "rule": wording.stage_text(m["stage"]), "kind": "digest", "severity": "weekly",
                      "labels": {"model": m["model"], "traffic_class": MIXED, "spec_mode": mixed.get("spec_mode") or "-"},
                      "value": mixed.get("alpha"),
                      "threshold": r["threshold"] if mixed.get("threshold") is None else mixed["threshold"], "reason": "\n".join(lines),
                      "window": r["week"], "volume": mixed.get("drafts"), "since": None, "at": at,
                      "dashboard_url": url, "runbook": None})
    return {"group": "specwatch-digest", "model": None, "incident_id": None, "sequence": 1,
            "title": f"specwatch weekly rollout report {r['week']}" + ("" if r["complete"] else " (week so far)"),
            "at": at, "items": items}


def send_digest(session: Session, *, settings: Settings, now: datetime, week: str | None = None) -> dict[str, Any]:
    """Enqueue the weekly digest once per channel and week (the idempotency key makes re-runs no-ops)."""
    week = week or (digest_due(now, settings) if settings.digest_enabled else None)
    if week is None:
        return {"due": False}
    channels = [c for c in alert_repo.channels(session) if c.enabled and not c.broken and c.kind in DIGEST_KINDS
                and (c.options or {}).get("digest", True)]
    todo = [c for c in channels if not repo.outbox_key_exists(session, f"digest-{week}-{c.id}")]
    if not todo:
        return {"due": True, "week": week, "enqueued": 0}
    payload = digest_payload(weekly(session, week=week, now=now, settings=settings), settings)
    n = 0
    for c in todo:
        n += alert_repo.enqueue(session, idempotency_key=f"digest-{week}-{c.id}", channel_id=c.id, incident_id=None,
                                kind="digest", payload=payload, status="pending", attempts=0, next_attempt_at=now,
                                created_at=now, in_doubt=False) is not None
    return {"due": True, "week": week, "enqueued": n}
