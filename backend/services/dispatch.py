"""Sending the outbox: one sender per channel, strict FIFO, paced, crash-safe.

Per channel the sender holds a session-level advisory lock on a dedicated connection (released by
Postgres when the process dies, even on SIGKILL), then repeats one step:

1. (tx) take the head of the channel's queue; wait while `next_send_at` (rate limit, Retry-After) or the
   message's `next_attempt_at` (backoff) lies ahead; mark it `sending`, count the attempt, reserve the
   next send slot (now + min interval: <= ~1 message/s per webhook); commit;
2. POST it (backend.notify.delivery.send: delivered / retry_after / transient / permanent);
3. (tx) record the outcome and the attempt row; commit.

Exactly once: a message is only sent by the holder of its channel's lock, and it is marked delivered
before the next one is taken. A worker killed anywhere except between Slack's answer and step 3's
commit leaves the message `pending` (never sent) or `delivered`. A message found still `sending` by
the next lock holder is *in doubt* (its sender died in that window), and so is a POST that went out
but got no answer (read timeout, connection dropped: delivery.send's `in_doubt`). Slack incoming
webhooks accept no idempotency key and offer no read-back, so it cannot be decided; per the channel's
`on_doubt` option it is re-sent ONCE (`resend`, alias `retry`, the default: one possible duplicate beats
a lost page, as in Alertmanager's HA design; a second doubt gives it up as failed, so a receiver that
always times out gets 2 copies, not one per retry) or given up at once (`skip`, alias `drop`), and
flagged `in_doubt` either way. Every send after a doubt is counted (`resent_after_doubt`, shown per
channel as `possible_duplicates`). Webhook receivers get the same key in the `Idempotency-Key` header on
every attempt and Alertmanager deduplicates by label set, so on those a doubt is retried like any
transient failure.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy.orm import Session, sessionmaker

from backend.config import Settings
from backend.db import alert_repo as repo
from backend.db.models_alerts import Channel
from backend.db.session import session_scope
from backend.notify.delivery import Outcome, SecretBox, render, scrub, send
from backend.services.outbox import raise_internal

log = logging.getLogger("specwatch.alerts.delivery")


def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


def backoff(attempts: int, settings: Settings) -> float:
    return min(settings.alert_retry_max_seconds, settings.alert_retry_base_seconds * 2 ** max(0, attempts - 1))


def _claim(factory: sessionmaker[Session], ch_id: int, now: float, box: SecretBox, settings: Settings,
           stats: Counter) -> tuple[str, Any]:
    """("send", job) | ("wait", due unix time) | ("empty", None) | ("skipped", None)."""
    with session_scope(factory) as s:
        ch = repo.get_channel(s, ch_id, for_update=True)
        if ch is None or ch.broken or not ch.enabled:
            return "empty", None
        msg = repo.head_of_queue(s, ch_id)
        if msg is None:
            return "empty", None
        if msg.status == "sending":  # its sender died between claiming and recording: in doubt
            msg.in_doubt, msg.status = True, "pending"
            stats["in_doubt"] += 1
            repo.add_attempt(s, outbox_id=msg.id, at=_dt(now), outcome="in_doubt", http_status=None,
                             detail="previous sender died mid-delivery")
            log.warning("outbox %s to channel %s is in doubt (sender died mid-delivery)", msg.id, ch.name)
            if on_doubt(ch) == "skip":
                msg.status, msg.last_error = "failed", "in doubt: not re-sent (on_doubt: skip)"
                return "skipped", None
        due = max(msg.next_attempt_at.timestamp(), ch.next_send_at.timestamp() if ch.next_send_at else 0.0)
        if due > now:
            return "wait", due
        msg.status, msg.attempts = "sending", msg.attempts + 1
        if msg.in_doubt:  # the receiver may have it already: this send is a possible duplicate
            msg.resent_after_doubt += 1
        ch.next_send_at = _dt(now + _min_interval(ch, settings))
        thread = repo.thread_ts(s, msg.incident_id, ch.id) if msg.incident_id and ch.kind == "slack_api" else None
        body = render(ch.kind, msg.payload, idempotency_key=msg.idempotency_key, options=ch.options or {},
                      thread_ts=thread)
        job = {"id": msg.id, "key": msg.idempotency_key, "kind": ch.kind, "secret": box.decrypt(ch.secret),
               "body": body, "channel": ch.name, "redacted": ch.redacted, "incident_id": msg.incident_id,
               "attempts": msg.attempts, "threaded": thread is not None}
        return "send", job


DEDUPLICATING = ("webhook", "alertmanager")  # receivers that drop a repeat (Idempotency-Key / label set)
MAX_DOUBT_RESENDS = 1


def on_doubt(ch: Channel) -> str:
    """The channel's policy for a message that may have been delivered: resend (default) | skip."""
    policy = (ch.options or {}).get("on_doubt", "resend")
    return {"retry": "resend", "drop": "skip"}.get(policy, policy)


def _min_interval(ch: Channel, settings: Settings) -> float:
    """Seconds between two sends to a channel: its `min_interval` option, else the setting."""
    return float((ch.options or {}).get("min_interval", settings.alert_min_send_interval_seconds))


def _record(factory: sessionmaker[Session], ch_id: int, job: dict, out: Outcome, now: float, settings: Settings,
            stats: Counter) -> None:
    with session_scope(factory) as s:
        ch = repo.get_channel(s, ch_id, for_update=True)
        msg = repo.head_of_queue(s, ch_id)
        if ch is None or msg is None or msg.id != job["id"]:
            return
        reason = scrub(out.reason)
        repo.add_attempt(s, outbox_id=msg.id, at=_dt(now), outcome=out.kind, http_status=out.http_status, detail=reason)
        stats[out.kind] += 1
        # the pace also counts from the send's end: the receiver had this message by `now`, so the next one,
        # sent no earlier than now + interval, reaches it at least an interval later (counted only from the
        # claim, a send slowed between claim and arrival let the next one arrive sooner)
        interval = _min_interval(ch, settings)
        if ch.next_send_at is None or ch.next_send_at.timestamp() < now + interval:
            ch.next_send_at = _dt(now + interval)
        if out.kind == "delivered":
            msg.status, msg.delivered_at, msg.last_error = "delivered", _dt(now), None
            if out.ts and job["incident_id"] and not job["threaded"]:
                repo.set_thread_ts(s, job["incident_id"], ch.id, out.ts)
            log.info("delivered outbox %s to channel %s (%s)", msg.id, ch.name, ch.redacted)
            return
        msg.last_error = f"{out.kind}: {reason}"
        if out.kind == "in_doubt":
            msg.in_doubt = True
            if ch.kind not in DEDUPLICATING:
                if on_doubt(ch) == "skip" or msg.resent_after_doubt >= MAX_DOUBT_RESENDS:
                    msg.status = "failed"
                    msg.last_error = (f"in doubt ({reason}): not re-sent (on_doubt: {on_doubt(ch)}, "
                                      f"{msg.resent_after_doubt} re-sent after a doubt)")
                    log.error("outbox %s to channel %s in doubt, given up: %s", msg.id, ch.name, msg.last_error)
                    return
                log.warning("outbox %s to channel %s in doubt (%s): re-sending once (on_doubt: resend)",
                            msg.id, ch.name, reason)
            out = Outcome("transient", out.http_status, reason)
        if out.kind == "retry_after":
            wait = max(out.retry_after or 1.0, settings.alert_min_send_interval_seconds)
            msg.status, ch.next_send_at = "pending", _dt(now + wait)
            log.info("channel %s rate limited: waiting %.1fs (Retry-After)", ch.name, wait)
        elif out.kind == "transient":
            msg.status = "pending"
            msg.next_attempt_at = _dt(now + backoff(msg.attempts, settings))
            if msg.attempts >= settings.alert_max_attempts:
                msg.status = "failed"
                log.error("outbox %s to channel %s given up after %d attempts: %s", msg.id, ch.name, msg.attempts, reason)
            else:
                log.info("outbox %s to channel %s: %s, retry in %.1fs", msg.id, ch.name, reason,
                         msg.next_attempt_at.timestamp() - now)
        else:
            msg.status = "failed"
            ch.broken, ch.broken_reason, ch.broken_at = True, f"HTTP {out.http_status}: {reason}", _dt(now)
            log.error("channel %s (%s) is broken: HTTP %s %s", ch.name, ch.redacted, out.http_status, reason)
            raise_internal(s, name="channel-broken", labels={"channel": ch.name}, firing=True,
                           reason=f"channel {ch.name} refused a notification permanently (HTTP {out.http_status} "
                                  f"{reason}); fix its URL and re-enable it", now=_dt(now), settings=settings,
                           exclude_channel=ch.id)


def deliver_due(factory: sessionmaker[Session], settings: Settings, *, clock: Callable[[], float] = time.time,
                sleep: Callable[[float], None] = time.sleep, client: httpx.Client | None = None,
                max_run: float | None = None) -> dict[str, Any]:
    """Send what is due, pacing per channel, for at most max_run seconds. Returns counts and
    `next_due_in` (seconds until the earliest waiting message, or None when nothing waits)."""
    deadline = clock() + (settings.alert_deliver_max_run_seconds if max_run is None else max_run)
    box = SecretBox(settings.secret_key)
    stats: Counter = Counter()
    with session_scope(factory) as s:
        candidates = repo.channels_with_work(s)
    engine = factory.kw["bind"]
    next_due: float | None = None
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as lock_conn:
        locked = [c for c in candidates if repo.try_channel_lock(lock_conn, c)]
        owned = list(locked)
        try:
            while owned:
                progressed, waits = False, []
                for ch_id in list(owned):
                    now = clock()
                    what, job = _claim(factory, ch_id, now, box, settings, stats)
                    if what == "empty":
                        owned.remove(ch_id)
                    elif what == "wait":
                        waits.append(job)
                    elif what == "send":
                        out = send(job["kind"], job["secret"], job["body"], idempotency_key=job["key"],
                                   timeout=settings.alert_http_timeout_seconds, client=client)
                        _record(factory, ch_id, job, out, clock(), settings, stats)
                        progressed = True
                    else:
                        progressed = True
                if progressed:  # new work may have appeared (an internal alert for another channel)
                    with session_scope(factory) as s:
                        fresh = [c for c in repo.channels_with_work(s) if c not in locked]
                    for c in fresh:
                        if repo.try_channel_lock(lock_conn, c):
                            locked.append(c)
                            owned.append(c)
                if progressed or not owned:
                    continue
                next_due = min(waits)
                if next_due > deadline:
                    break
                sleep(max(0.0, next_due - clock()))
                next_due = None
        finally:
            for c in locked:
                repo.channel_unlock(lock_conn, c)
    stats_out = dict(stats)
    stats_out["next_due_in"] = max(0.0, next_due - clock()) if next_due is not None else None
    return stats_out
