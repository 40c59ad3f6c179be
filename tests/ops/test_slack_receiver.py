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


def test_page_renders_block_kit_as_slack_would(slack):
    from backend.notify.slack import build_message

    note = {"model": "m", "incident_id": 7, "sequence": 2, "items": [
        {"event": "firing", "rule": "alpha-low", "severity": "page", "value": 0.301, "threshold": 0.55,
         "window": "5m", "volume": 12000, "labels": {"model": "m", "traffic_class": "chat", "spec_mode": "eagle3"},
         "reason": "alpha <b>0.301</b> < 0.55", "dashboard_url": "http://dash/model?model=m",
         "runbook": "roll back"}]}
    httpx.post(slack.webhook_url, json=build_message(note))
    httpx.post(slack.webhook_url, json={"text": "[specwatch] m: RESOLVED alpha-low chat",
                                        "blocks": [{"type": "section", "text": {"type": "mrkdwn",
                                                    "text": "<javascript:alert(1)|click> _ok_"}}]})
    slack.fail_next(429)
    httpx.post(slack.webhook_url, json={"text": "x"})
    page = httpx.get(slack.url + "/").text
    assert '<h3 class="bk-header">m: incident #7</h3>' in page
    assert "🔴 <strong>FIRING</strong> <code>alpha-low</code> (page)" in page
    assert '<div class="bk-field"><strong>Value</strong><br>0.301 vs threshold 0.550</div>' in page
    assert '<a href="http://dash/model?model=m">Open the pool on the dashboard</a>' in page
    assert "alpha &lt;b&gt;0.301&lt;/b&gt; &lt; 0.55" in page  # their text is escaped, never markup
    assert 'href="javascript' not in page and "<em>ok</em>" in page
    assert "answered 429" in page and "3 messages · 1 firing · 1 resolved" in page
    doc = httpx.get(slack.url + "/messages.json").json()
    assert [m["events"] for m in doc] == [["firing"], ["resolved"], []]
    assert httpx.get(slack.url + "/nope").status_code == 404


def test_keeps_only_the_newest():
    with SlackReceiver(keep=2) as receiver:
        for i in range(3):
            httpx.post(receiver.webhook_url, json={"text": str(i)})
        assert [r.json["text"] for r in receiver.requests] == ["1", "2"]


def test_the_page_shows_times_to_the_minute_never_microseconds(slack):
    """The payload carries ISO instants with microseconds (for machines); the message and so the page
    show them as people read them, to the minute in UTC."""
    import re

    from backend.notify.slack import build_message, when

    note = {"model": "m", "incident_id": 8, "sequence": 1, "items": [
        {"event": "firing", "rule": "alpha-low", "severity": "page", "value": 0.3, "threshold": 0.55,
         "window": "5m", "volume": 1, "labels": {"model": "m", "traffic_class": "chat", "spec_mode": "eagle3"},
         "since": "2026-12-04T20:17:05.123456+00:00", "at": "2026-12-04T20:21:44.987654+00:00"}]}
    httpx.post(slack.webhook_url, json=build_message(note))
    page = httpx.get(slack.url + "/").text
    assert "<strong>Since</strong><br>2026-12-04 20:17 UTC" in page
    assert not re.search(r"\d\d:\d\d:\d\d\.\d+", page) and "T20:" not in page
    assert when(None) == "n/a" and when("5m") == "5m" and when("2026-12-04T20:17:05") == "2026-12-04 20:17 UTC"


def test_a_held_request_is_answered_on_release(slack):
    """hang_next holds a request it has recorded; release() answers it at once (and holds no more)."""
    import threading

    from tests.support.deadline import deadline

    slack.hang_next(n=5, seconds=deadline(600))
    answers: list[int] = []
    sender = threading.Thread(target=lambda: answers.append(
        httpx.post(slack.webhook_url, json={"text": "held"}, timeout=deadline(600)).status_code))
    sender.start()
    slack.wait_for(1)
    assert answers == [] and sender.is_alive()  # recorded, not answered
    slack.release()
    sender.join(deadline(60))
    assert answers == [200]
    assert httpx.post(slack.webhook_url, json={"text": "next"}, timeout=deadline(60)).status_code == 200
    assert [r.json["text"] for r in slack.requests] == ["held", "next"]
