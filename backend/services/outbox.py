"""The outbox side of notifications: group transitions into one message per model (incident), route
it to channels, enqueue one row per channel in the caller's transaction; channels (encrypted secrets)
and the internal alert raised when a channel breaks.

Idempotency key = hash(channel id, the transition ids in the message): it is derived from committed
rows, so a re-run can never mint a second key for the same notification, and the unique constraint
turns a repeated enqueue into a no-op.
"""

from __future__ import annotations

import fnmatch
import hashlib
from datetime import datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import alert_repo as repo
from backend.db.models_alerts import AlertStateRow, AlertTransition, Channel, Incident
from backend.domain import alerting as al
from backend.notify.delivery import KINDS, SecretBox, redact_url


def dashboard_url(settings: Settings, labels: dict[str, str]) -> str:
    keys = {k: labels[k] for k in ("model", "traffic_class", "spec_mode") if k in labels}
    return f"{settings.dashboard_base_url.rstrip('/')}/pools?{urlencode(keys)}" if keys else settings.dashboard_base_url


def _item(row: AlertStateRow | repo.StateRecord, tr: AlertTransition, settings: Settings) -> dict[str, Any]:
    values = tr.values or {}
    volume = values.get("drafts_long", values.get("drafts"))
    return {"event": tr.notification, "rule": row.rule, "kind": row.kind, "severity": row.severity,
            "labels": dict(row.labels), "fingerprint": row.fingerprint, "alert_id": row.id, "transition_id": tr.id,
            "value": tr.value, "threshold": tr.threshold, "reason": tr.reason, "window": values.get("window"),
            "volume": volume, "values": values, "runbook": values.get("runbook"),
            "dashboard_url": dashboard_url(settings, row.labels) if row.kind != "internal" else None,
            "since": row.firing_since.isoformat() if row.firing_since else None, "at": tr.at.isoformat()}


def routes(channel: Channel, labels_list: list[dict[str, str]]) -> bool:
    m = channel.matchers or {}
    return any(all(fnmatch.fnmatchcase(lab.get(k, ""), v) for k, v in m.items()) for lab in labels_list)


def open_incident(session: Session, group: str, *, now: datetime) -> Incident:
    return repo.open_incident(session, group) or repo.add(session, Incident(group_key=group, opened_at=now))


def enqueue_notification(session: Session, *, group: str,
                         items: list[tuple[AlertStateRow | repo.StateRecord, AlertTransition]], now: datetime, settings: Settings, exclude_channel: int | None = None,
                         incident: bool = True) -> int:
    """One message for the group's transitions of this cycle, one outbox row per routed channel."""
    inc = open_incident(session, group, now=now) if incident else None
    if inc is not None:
        for row, _ in items:
            row.incident_id = inc.id
    model = items[0][0].labels.get("model") if items else None
    title = f"{model}: incident #{inc.id}" if inc is not None else "specwatch: internal alert"
    body = {"group": group, "model": model, "incident_id": inc.id if inc else None, "title": title,
            "at": now.isoformat(), "items": [_item(r, t, settings) for r, t in items]}
    ids = ",".join(str(t.id) for _, t in items)
    n = 0
    for ch in repo.channels(session):
        if not ch.enabled or ch.id == exclude_channel or (inc is None and ch.broken):
            continue
        if inc is not None and not routes(ch, [r.labels for r, _ in items]):
            continue
        if (ch.options or {}).get("send_resolved", True) is False and all(t.notification == "resolved" for _, t in items):
            continue
        seq = repo.incident_sequence(session, inc.id, ch.id) + 1 if inc is not None else 1
        key = "n-" + hashlib.sha256(f"{ch.id}:{ids}".encode()).hexdigest()[:40]
        kind = items[0][1].notification if len({t.notification for _, t in items}) == 1 else "update"
        if items[0][0].kind == "internal":
            kind = "internal"
        n += repo.enqueue(session, idempotency_key=key, channel_id=ch.id, incident_id=inc.id if inc else None,
                          kind=kind or "update", payload={**body, "sequence": seq}, status="pending", attempts=0,
                          next_attempt_at=now, created_at=now, in_doubt=False) is not None
    return n


REFRESH_KINDS = ("alertmanager",)  # receivers that expire an alert nobody re-sends (endsAt)


def enqueue_refresh(session: Session, *, now: datetime, settings: Settings) -> int:
    """Re-send every firing alert whose firing was notified to each Alertmanager channel it routes to, once
    per `alertmanager_resend_seconds` (as Prometheus re-sends firing alerts every resend delay): Alertmanager
    resolves an alert on its own once its `endsAt` passes, so an alert firing longer than that, with no
    transition to notify, would show resolved there while specwatch still has it firing. Internal alerts go
    (as when they fired) to every channel but the one they are about. One outbox row per
    channel and period (the key names both, so a re-run in the same period is a no-op); it queues behind
    the channel's earlier messages and before any later resolve."""
    period = settings.alertmanager_resend_seconds
    targets = [ch for ch in repo.channels(session) if ch.kind in REFRESH_KINDS and ch.enabled and not ch.broken]
    if not targets or period <= 0:
        return 0
    firing = repo.notified_firing_states(session)
    last = repo.last_notified_transitions(session, [r.id for r in firing], "firing")
    slot = int(now.timestamp() // period)
    n = 0
    for ch in targets:
        items = [{**_item(r, last[r.id], settings), "at": now.isoformat()} for r in firing if r.id in last and (
            r.labels.get("channel") != ch.name if r.kind == "internal" else routes(ch, [r.labels]))]
        if not items:
            continue
        body = {"group": "refresh", "model": None, "incident_id": None, "title": "specwatch: firing alerts",
                "at": now.isoformat(), "items": items, "sequence": 0}
        n += repo.enqueue(session, idempotency_key=f"refresh-{ch.id}-{slot}", channel_id=ch.id, incident_id=None,
                          kind="refresh", payload=body, status="pending", attempts=0, next_attempt_at=now,
                          created_at=now, in_doubt=False) is not None
    return n


def raise_internal(session: Session, *, name: str, labels: dict[str, str], firing: bool, reason: str,
                   now: datetime, settings: Settings, exclude_channel: int | None = None) -> None:
    """An alert about specwatch itself (a channel went broken, or was repaired): its state, its audit row,
    and a notification to every other healthy channel."""
    labels = {**labels, "rule": name}
    fp = al.fingerprint(labels)
    row = repo.state_by_fingerprint(session, fp) or repo.add(session, AlertStateRow(
        fingerprint=fp, rule=name, kind="internal", severity="page", labels=labels, group_key="specwatch",
        phase="inactive", notified_firing=False))
    target = "firing" if firing else "resolved"
    if row.phase == target or (not firing and row.phase != "firing"):
        return
    old = row.phase
    row.phase, row.last_eval_at, row.notified_firing = target, now, firing
    row.firing_since = now if firing else row.firing_since
    row.resolved_at = None if firing else now
    row.last_values = {"reason": reason}
    tr = repo.add(session, AlertTransition(alert_id=row.id, at=now, from_phase=old, to_phase=target,
                                           status="breached" if firing else "ok", reason=reason,
                                           values={"reason": reason}, notification=target))
    enqueue_notification(session, group="specwatch", items=[(row, tr)], now=now, settings=settings,
                         exclude_channel=exclude_channel, incident=False)


# --- channels -------------------------------------------------------------------------------------------


class ChannelError(ValueError):
    pass


MAX_URL = 2048


def check_url(url: str) -> None:
    """An absolute http(s) URL with a host (and a valid port), printable ASCII, at most MAX_URL characters."""
    if not url.startswith(("http://", "https://")):
        raise ChannelError("url must be an http(s) URL")
    if len(url) > MAX_URL or not url.isascii() or not url.isprintable() or " " in url:
        raise ChannelError(f"url must be printable ASCII without spaces, at most {MAX_URL} characters")
    try:
        parts = urlsplit(url)
        _ = parts.port  # a non-numeric or out-of-range port raises ValueError
    except ValueError:
        raise ChannelError("url is not a valid URL (host or port)") from None
    if not parts.hostname:
        raise ChannelError("url has no host")


def _secret(kind: str, url: str, token: str | None) -> tuple[str, str]:
    if kind not in KINDS:
        raise ChannelError(f"kind must be one of {', '.join(KINDS)}")
    check_url(url)
    if kind == "slack_api":
        if not token:
            raise ChannelError("a slack_api channel needs a bot token")
        return f"{token} {url}", f"{redact_url(url)} (bot token {token[:5]}…)"
    return url, redact_url(url)


ON_DOUBT = ("resend", "retry", "skip", "drop")


def _check_options(options: dict) -> dict:
    if options.get("on_doubt", "resend") not in ON_DOUBT:
        raise ChannelError(f"options.on_doubt must be one of {', '.join(ON_DOUBT)}")
    return options


def create_channel(session: Session, *, name: str, kind: str, url: str, token: str | None, options: dict,
                   matchers: dict, box: SecretBox, now: datetime) -> Channel:
    _check_options(options)
    if repo.channel_by_name(session, name) is not None:
        raise ChannelError(f"a channel named {name!r} exists")
    secret, redacted = _secret(kind, url, token)
    return repo.add(session, Channel(name=name, kind=kind, secret=box.encrypt(secret), redacted=redacted,
                                     options=options, matchers=matchers, enabled=True, broken=False, created_at=now))


def update_channel(session: Session, channel: Channel, *, url: str | None, token: str | None, options: dict | None,
                   matchers: dict | None, enabled: bool | None, box: SecretBox, now: datetime,
                   settings: Settings) -> Channel:
    """Change a channel; a new URL (or `enabled: true`) repairs a broken one and resolves its internal alert."""
    if url is not None:
        secret, channel.redacted = _secret(channel.kind, url, token)
        channel.secret = box.encrypt(secret)
    if options is not None:
        channel.options = _check_options(options)
    if matchers is not None:
        channel.matchers = matchers
    if enabled is not None:
        channel.enabled = enabled
    if channel.broken and (url is not None or enabled):
        channel.broken, channel.broken_reason, channel.broken_at = False, None, None
        raise_internal(session, name="channel-broken", labels={"channel": channel.name}, firing=False,
                       reason=f"channel {channel.name} repaired", now=now, settings=settings)
    return channel
