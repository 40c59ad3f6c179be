"""Sending the outbox to the local Slack-compatible receiver: Retry-After, 5xx backoff, pacing, strict
order, exactly once, permanent failures (channel broken + internal alert), in-doubt messages.

The sender's clock is the test's: deliver_due gets a clock that moves only when the sender sleeps, and the
receiver stamps each request with the same clock, so every wait (Retry-After, backoff, pacing) is measured
exactly and a busy machine changes nothing. HTTP, the outbox and Postgres are real."""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from backend.config import Settings
from backend.db import alert_repo as repo
from backend.db.models_alerts import AlertStateRow, Channel, DeliveryAttempt, OutboxMessage
from backend.db.session import session_scope
from backend.notify.delivery import SecretBox
from backend.services import dispatch, outbox
from tests.support.clock import FakeClock
from tests.support.deadline import deadline
from tests.support.stack import factory_for


@pytest.fixture
def env(fresh_db_url):
    settings = Settings(_env_file=None, database_url=fresh_db_url, alert_retry_base_seconds=0.5,
                        alert_min_send_interval_seconds=1.0, alert_deliver_max_run_seconds=20)
    factory = factory_for(fresh_db_url)
    yield settings, factory
    factory.kw["bind"].dispose()


class SenderClock(FakeClock):
    """The sender's time: starts at the wall clock and moves only when the sender sleeps."""


@pytest.fixture
def clock(slack_receiver) -> SenderClock:
    clock = SenderClock()
    slack_receiver.clock = clock
    return clock


def deliver(factory, settings, clock: SenderClock, **kw) -> dict:
    return dispatch.deliver_due(factory, settings, clock=clock, sleep=clock.sleep, **kw)


def add_channel(factory, settings, url, name="slack-main", **options) -> int:
    with session_scope(factory) as s:
        return outbox.create_channel(s, name=name, kind="slack", url=url, token=None, options=options, matchers={},
                                     box=SecretBox(settings.secret_key), now=datetime.now(UTC)).id


def enqueue(factory, channel_id: int, n: int, *, status="pending") -> list[int]:
    now = datetime.now(UTC)
    ids = []
    with session_scope(factory) as s:
        for i in range(n):
            ids.append(repo.enqueue(s, idempotency_key=f"k-{channel_id}-{i}", channel_id=channel_id, incident_id=None,
                                    kind="firing", status=status, attempts=0, next_attempt_at=now, created_at=now,
                                    in_doubt=False, payload={"title": f"message {i}", "model": "m",
                                                             "at": now.isoformat(), "items": []}))
    return ids


def titles(receiver) -> list[str]:
    return [r.json["blocks"][0]["text"]["text"] for r in receiver.delivered]


def test_429_and_500_then_every_message_exactly_once_in_order_paced(env, slack_receiver, clock):
    settings, factory = env
    ch = add_channel(factory, settings, slack_receiver.webhook_url)
    enqueue(factory, ch, 4)
    slack_receiver.fail_next("rate_limited", n=1, retry_after=2)
    slack_receiver.fail_next("rollup_error", n=2)  # then two 500s (backoff 0.5 s, then 1 s)
    result = deliver(factory, settings, clock)
    assert titles(slack_receiver) == [f"message {i}" for i in range(4)]
    reqs = slack_receiver.requests
    assert [r.status for r in reqs] == [429, 500, 500, 200, 200, 200, 200]
    assert reqs[1].at - reqs[0].at >= 2, "Retry-After honoured"
    assert reqs[2].at - reqs[1].at >= settings.alert_retry_base_seconds, "backoff after a 500"
    ok = [r.at for r in slack_receiver.delivered]
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(ok)), "at most 1 message/s per webhook"
    assert result["delivered"] == 4
    with session_scope(factory) as s:
        rows = list(s.scalars(select(OutboxMessage)))
        assert {r.status for r in rows} == {"delivered"}
        attempts = list(s.scalars(select(DeliveryAttempt)))
        assert {a.outcome for a in attempts} >= {"retry_after", "transient", "delivered"}
    deliver(factory, settings, clock)  # a second run sends nothing again
    assert len(slack_receiver.delivered) == 4


@pytest.mark.parametrize("failure", ["channel_not_found", "invalid_token", "gone", "invalid_payload"])
def test_permanent_failure_breaks_channel_and_raises_internal_alert(env, slack_receiver, clock, failure):
    settings, factory = env
    broken = add_channel(factory, settings, slack_receiver.webhook_url)
    other = add_channel(factory, settings, slack_receiver.url + "/services/OTHER/CHANNEL/x", name="slack-ops")
    enqueue(factory, broken, 2)
    slack_receiver.fail_next(failure, n=1)
    deliver(factory, settings, clock, max_run=5)
    reqs = slack_receiver.requests
    assert len([r for r in reqs if "/OTHER/" not in r.path]) == 1, "no retry of a permanent failure"
    [alert] = [r for r in reqs if "/OTHER/" in r.path]
    assert "channel slack-main refused" in alert.body.decode()
    with session_scope(factory) as s:
        ch = s.get(Channel, broken)
        assert ch.broken and "HTTP" in ch.broken_reason
        assert [m.status for m in s.scalars(select(OutboxMessage).where(OutboxMessage.channel_id == broken)
                                            .order_by(OutboxMessage.id))] == ["failed", "pending"]
        internal = s.scalar(select(AlertStateRow).where(AlertStateRow.kind == "internal"))
        assert internal.phase == "firing" and internal.labels["channel"] == "slack-main"
        # an admin repairs the channel: the internal alert resolves, the queue drains
        outbox.update_channel(s, ch, url=slack_receiver.webhook_url, token=None, options=None, matchers=None,
                              enabled=None, box=SecretBox(settings.secret_key), now=datetime.now(UTC), settings=settings)
    assert other
    deliver(factory, settings, clock, max_run=10)
    assert "message 1" in titles(slack_receiver)


@pytest.mark.parametrize("policy,expect", [("resend", 1), ("skip", 0)])
def test_message_left_sending_by_a_dead_sender_is_in_doubt(env, slack_receiver, clock, policy, expect):
    settings, factory = env
    ch = add_channel(factory, settings, slack_receiver.webhook_url, on_doubt=policy)
    enqueue(factory, ch, 1, status="sending")
    deliver(factory, settings, clock, max_run=3)
    assert len(slack_receiver.delivered) == expect
    with session_scope(factory) as s:
        [m] = list(s.scalars(select(OutboxMessage)))
        assert m.in_doubt and m.status == ("delivered" if expect else "failed")


def test_transient_failures_back_off(env, slack_receiver, clock):
    settings, factory = env
    ch = add_channel(factory, settings, slack_receiver.webhook_url, min_interval=0.05)
    enqueue(factory, ch, 1)
    slack_receiver.fail_next("rollup_error", n=3)
    deliver(factory, settings, clock, max_run=10)
    at = [r.at for r in slack_receiver.requests]
    gaps = [b - a for a, b in itertools.pairwise(at)]
    assert len(at) == 4 and gaps[1] > gaps[0] * 1.5 and gaps[2] > gaps[1] * 1.5, gaps
    assert len(slack_receiver.delivered) == 1
    with session_scope(factory) as s:
        assert s.scalar(select(OutboxMessage)).attempts == 4


def test_the_pace_counts_from_each_send_s_end_so_a_slow_send_never_bunches_the_next(env):
    """A fake clock; the first send takes 0.6 s and the webhook receives each message at the send's end
    (the latest it can). The next send may start only an interval after that end, so arrivals stay at
    least an interval apart; paced from the claim alone, the second message arrived 0.4 s after the first."""
    import httpx

    settings, factory = env
    t = [time.time()]
    arrivals: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        t[0] += 0.6 if not arrivals else 0.0
        arrivals.append(t[0])
        return httpx.Response(200, text="ok")

    ch = add_channel(factory, settings, "https://hooks.slack.com/services/T0/B0/x")
    enqueue(factory, ch, 3)

    def sleep(seconds: float) -> None:
        t[0] += seconds

    result = dispatch.deliver_due(factory, settings, clock=lambda: t[0], sleep=sleep,
                                  client=httpx.Client(transport=httpx.MockTransport(handler)))
    assert result["delivered"] == 3
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(gaps) >= 1.0 - 1e-6 and gaps[0] < 1.1, gaps


def doubt_env(fresh_db_url):
    settings = Settings(_env_file=None, database_url=fresh_db_url, alert_retry_base_seconds=0.2,
                        alert_min_send_interval_seconds=0.1, alert_http_timeout_seconds=0.5)
    return settings, factory_for(fresh_db_url)


def channel_status(factory, ch: int) -> tuple[int, int]:
    from backend.api.routes.channels import ChannelRead

    with session_scope(factory) as s:
        read = ChannelRead.model_validate(s.get(Channel, ch))
        return read.in_doubt, read.possible_duplicates


@pytest.mark.parametrize("policy,hangs,copies,status,duplicates", [
    ("resend", 1, 2, "delivered", 1),   # timed out, re-sent once: the receiver has 2 copies, 1 counted
    ("resend", 10, 2, "failed", 1),     # times out every time: 2 copies at most (was one per retry)
    ("skip", 10, 1, "failed", 0),       # never re-sent after a doubt
    ("drop", 10, 1, "failed", 0),
])
def test_a_slack_timeout_is_re_sent_only_per_on_doubt_and_duplicates_are_counted(fresh_db_url, slack_receiver, policy,
                                                                                 hangs, copies, status, duplicates):
    settings, factory = doubt_env(fresh_db_url)
    ch = add_channel(factory, settings, slack_receiver.webhook_url, on_doubt=policy)
    slack_receiver.hang_next(n=hangs, seconds=2.0)  # takes the message, answers after the 0.5 s timeout
    enqueue(factory, ch, 1)
    dispatch.deliver_due(factory, settings, max_run=15)
    assert len(slack_receiver.delivered) == copies
    with session_scope(factory) as s:
        [m] = list(s.scalars(select(OutboxMessage)))
        assert (m.status, m.in_doubt, m.resent_after_doubt) == (status, True, duplicates)
        outcomes = [a.outcome for a in s.scalars(select(DeliveryAttempt).order_by(DeliveryAttempt.id))]
    assert outcomes[0] == "in_doubt" and len(outcomes) == copies
    assert channel_status(factory, ch) == (1, duplicates)


def test_a_connect_failure_is_retried_as_never_sent(fresh_db_url, slack_receiver):
    settings, factory = doubt_env(fresh_db_url)
    ch = add_channel(factory, settings, "http://127.0.0.1:9/services/x", on_doubt="skip")  # nothing listens
    enqueue(factory, ch, 1)
    until = time.monotonic() + deadline(120)  # runs until the retry happened: a busy machine fits one per run
    while True:
        dispatch.deliver_due(factory, settings, max_run=1.5)
        with session_scope(factory) as s:
            [m] = list(s.scalars(select(OutboxMessage)))
            seen = (m.status, m.in_doubt, m.attempts)
        if seen[2] >= 2 or time.monotonic() > until:
            break
    assert seen[0] == "pending" and not seen[1] and seen[2] >= 2, seen


@pytest.mark.parametrize("kind", ["webhook", "alertmanager"])
def test_webhook_and_alertmanager_retries_carry_one_idempotency_key(fresh_db_url, slack_receiver, kind):
    settings, factory = doubt_env(fresh_db_url)
    with session_scope(factory) as s:
        ch = outbox.create_channel(s, name="hook", kind=kind, url=slack_receiver.url + "/hook", token=None,
                                   options={"on_doubt": "skip"}, matchers={}, box=SecretBox(settings.secret_key),
                                   now=datetime.now(UTC)).id
    slack_receiver.hang_next(n=2, seconds=2.0)
    [msg_id] = enqueue(factory, ch, 1)
    dispatch.deliver_due(factory, settings, max_run=15)
    # the receiver deduplicates by key: a doubt is retried until answered, every copy with the same key
    keys = [r.headers.get("Idempotency-Key") for r in slack_receiver.delivered]
    assert len(keys) == 3 and len(set(keys)) == 1 and keys[0] == f"k-{ch}-0"
    with session_scope(factory) as s:
        m = s.get(OutboxMessage, msg_id)
        assert (m.status, m.in_doubt) == ("delivered", True)
