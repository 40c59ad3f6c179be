"""Payload builders and the HTTP outcome classification (httpx.MockTransport), encryption, redaction."""

from __future__ import annotations

import json

import httpx
import pytest

from backend.notify import alertmanager, slack
from backend.notify.delivery import SecretBox, redact_url, scrub, send

URL = "https://hooks.slack.com/services/T0SECRET/B0SECRET/sEcReT"


def note(n_items=1, reason="alpha below threshold"):
    item = {"event": "firing", "rule": "alpha-low", "severity": "page", "value": 0.51, "threshold": 0.55,
            "labels": {"model": "m", "traffic_class": "chat", "spec_mode": "eagle3"}, "reason": reason,
            "window": "5m and 1h", "volume": 12000.0, "runbook": "Hold the rollout.", "at": "2026-11-30T12:00:00+00:00",
            "dashboard_url": "http://dash/pools?model=m"}
    return {"model": "m", "incident_id": 3, "sequence": 1, "at": item["at"], "items": [item] * n_items}


def test_slack_message_has_the_facts():
    body = slack.build_message(note())
    text = json.dumps(body)
    for needle in ("0.510 vs threshold 0.550", "5m and 1h", "12,000", "Hold the rollout", "http://dash/pools?model=m",
                   "incident #3"):
        assert needle in text, needle


def test_slack_limits_are_respected():
    body = slack.build_message({**note(200, reason="x" * 10_000), "title": "t" * 500})
    blocks = body["blocks"]
    assert len(blocks) <= slack.MAX_BLOCKS
    assert len(blocks[0]["text"]["text"]) <= slack.MAX_HEADER
    assert all(len(b["text"]["text"]) <= slack.MAX_SECTION for b in blocks if b["type"] == "section")
    assert all(len(f["text"]) <= slack.MAX_FIELD for b in blocks for f in b.get("fields", []))
    assert len(body["text"]) < 4000
    assert sum(len(json.dumps(b)) for b in blocks) < 13_200
    assert "more not shown" in blocks[-1]["elements"][0]["text"]


def test_alertmanager_alerts():
    n = note()
    n["items"][0]["event"] = "resolved"
    [a] = alertmanager.build_alerts(n)
    assert a["labels"]["alertname"] == "alpha-low" and a["labels"]["traffic_class"] == "chat"
    assert a["endsAt"] == "2026-11-30T12:00:00+00:00"
    assert alertmanager.endpoint("http://am:9093") == "http://am:9093/api/v2/alerts"


def test_alertmanager_leaves_out_empty_annotations_and_sends_a_test_alert():
    n = note()
    n["items"][0].update(value=None, window=None, runbook="")
    [a] = alertmanager.build_alerts(n)
    assert a["annotations"] == {"summary": "alpha below threshold", "threshold": "0.55"}
    assert a["endsAt"] == "2026-11-30T16:00:00+00:00"  # firing: FIRING_TTL after the post
    [t] = alertmanager.build_alerts({"title": "specwatch test message", "at": "2026-11-30T12:00:00+00:00", "items": []})
    assert t["labels"] == {"alertname": "SpecwatchTest", "severity": "info", "source": "specwatch"}
    assert (t["startsAt"], t["endsAt"]) == ("2026-11-30T12:00:00+00:00", "2026-11-30T12:05:00+00:00")


def _send(status, body=b"ok", headers=None, kind="slack"):
    seen = {}

    def handler(req: httpx.Request) -> httpx.Response:
        seen["key"] = req.headers.get("Idempotency-Key")
        return httpx.Response(status, content=body, headers=headers or {})

    out = send(kind, URL, {"text": "x"}, idempotency_key="k1", timeout=1,
               client=httpx.Client(transport=httpx.MockTransport(handler)))
    assert seen["key"] == "k1"
    return out


@pytest.mark.parametrize("status,body,headers,kind,reason", [
    (200, b"ok", None, "delivered", ""),
    (429, b'{"ok":false,"error":"rate_limited"}', {"Retry-After": "7", "content-type": "application/json"},
     "retry_after", "rate_limited"),
    (500, b"rollup_error", None, "transient", "HTTP 500"),
    (503, b"", None, "transient", "HTTP 503"),
    (400, b"invalid_payload", None, "permanent", "invalid_payload"),
    (403, b"invalid_token", None, "permanent", "invalid_token"),
    (404, b"no_service", None, "permanent", "no_service"),
    (410, b"channel_is_archived", None, "permanent", "channel_is_archived"),
])
def test_outcomes(status, body, headers, kind, reason):
    out = _send(status, body, headers)
    assert out.kind == kind and out.reason == reason
    if kind == "retry_after":
        assert out.retry_after == 7


def test_transport_errors_are_transient_and_do_not_leak_the_url():
    def boom(req):
        raise httpx.ConnectError(f"cannot connect to {req.url}")

    out = send("slack", URL, {}, idempotency_key="k", timeout=1, client=httpx.Client(transport=httpx.MockTransport(boom)))
    assert out.kind == "transient" and "sEcReT" not in out.reason


def test_secret_box_and_redaction():
    box = SecretBox("a passphrase that is not a fernet key")
    token = box.encrypt(URL)
    assert "sEcReT" not in token and box.decrypt(token) == URL
    with pytest.raises(ValueError):
        SecretBox("another key").decrypt(token)
    assert redact_url(URL) == "https://hooks.slack.com/…"
    assert "sEcReT" not in scrub(f"failed posting to {URL} with 500")
