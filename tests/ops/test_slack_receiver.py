"""The local Slack receiver used by the alerting tests behaves as programmed."""

from __future__ import annotations

import httpx
import pytest

from tests.support.slack import SlackReceiver


@pytest.fixture
def slack():
    with SlackReceiver() as receiver:
        yield receiver


def test_records_posts_and_answers_ok(slack):
    r = httpx.post(slack.webhook_url, json={"text": "hello"}, headers={"X-Test": "1"})
    assert (r.status_code, r.text) == (200, "ok")
    api = httpx.post(slack.url + "/api/chat.postMessage", json={"channel": "C1", "text": "x"})
    assert api.status_code == 200 and api.json()["ok"] is True
    reqs = slack.wait_for(2)
    assert reqs[0].path.startswith("/services/") and reqs[0].json == {"text": "hello"}
    assert reqs[0].headers["X-Test"] == "1" and reqs[0].status == 200
    assert len(slack.delivered) == 2


@pytest.mark.parametrize("kind,status,error", [
    ("rate_limited", 429, "rate_limited"), ("rollup_error", 500, "rollup_error"),
    ("channel_not_found", 404, "channel_not_found"), ("invalid_token", 403, "invalid_token"),
    (410, 410, "channel_is_archived"), ("invalid_payload", 400, "invalid_payload"),
])
def test_fail_next_n_then_ok(slack, kind, status, error):
    slack.fail_next(kind, n=2, retry_after=7)
    answers = [httpx.post(slack.webhook_url, json={"text": str(i)}) for i in range(3)]
    assert [a.status_code for a in answers] == [status, status, 200]
    assert answers[0].json() == {"ok": False, "error": error}
    if status == 429:
        assert answers[0].headers["Retry-After"] == "7"
    assert [r.status for r in slack.requests] == [status, status, 200]
    assert len(slack.delivered) == 1


def test_fail_for_a_time_window(slack):
    t = [1_796_000_000.0]
    slack.clock = lambda: t[0]  # the receiver's clock is the test's: a slow request cannot end the window
    slack.fail_for("rate_limited", seconds=0.5)
    assert httpx.post(slack.webhook_url, json={}).status_code == 429
    t[0] += 0.4
    assert httpx.post(slack.webhook_url, json={}).status_code == 429
    t[0] += 0.2
    assert httpx.post(slack.webhook_url, json={}).status_code == 200
    assert [r.at - 1_796_000_000 for r in slack.requests] == pytest.approx([0.0, 0.4, 0.6])


def test_unknown_failure_is_rejected(slack):
    with pytest.raises(ValueError):
        slack.fail_next("teapot")
