"""Summary, acceptance, fleet, pools and /metrics over HTTP, on stored buckets in Postgres."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.factories import T0, make_bucket, make_pool, make_rejection


@pytest.fixture
def mix(db, now):
    chat = make_pool(db, traffic_class="chat", num_spec_tokens=5, last_seen=now)
    code = make_pool(db, traffic_class="code", num_spec_tokens=5, last_seen=now)
    for i, d in enumerate([50000, 20000]):  # 70000 chat draft tokens at 0.7
        make_bucket(db, chat, T0 + timedelta(minutes=i), drafts=d / 5, draft_tokens=d, accepted_tokens=0.7 * d,
                    running_mean=4.0)
    for i, d in enumerate([5000, 10000, 15000]):  # 30000 code draft tokens at 0.4
        make_bucket(db, code, T0 + timedelta(minutes=i), drafts=d / 5, draft_tokens=d, accepted_tokens=0.4 * d,
                    running_mean=4.0)
    return chat, code


def _cls(body, name):
    return next(c for c in body["classes"] if c["traffic_class"] == name)


def test_summary_mixed_alpha_is_061_from_draft_token_shares(client, mix):
    r = client.get("/api/v1/summary", params={"model": "llama-70b", "window": "1h"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert _cls(body, "mixed")["acceptance_rate"] == pytest.approx(0.61)
    chat, code = _cls(body, "chat"), _cls(body, "code")
    naive = (chat["acceptance_rate"] + code["acceptance_rate"]) / 2
    assert naive == pytest.approx(0.55) and abs(naive - 0.61) > 0.05  # averaging ratios is wrong
    assert _cls(body, "mixed")["eps_step_source"] == "default-for-band"
    assert _cls(body, "mixed")["concurrency_band"] == "1-8"


def test_summary_json_has_nulls_for_undefined(client, db, now):
    make_pool(db, traffic_class="quiet", last_seen=now)
    body = client.get("/api/v1/summary", params={"model": "llama-70b"}).json()
    quiet = _cls(body, "quiet")
    assert quiet["acceptance_rate"] is None and quiet["mean_acceptance_length"] is None
    assert quiet["margin"] is None and quiet["volume"]["drafts"] is None


def test_unknown_model_is_404_with_known_names(client, mix):
    for path in ("/api/v1/summary", "/api/v1/acceptance"):
        r = client.get(path, params={"model": "gpt-9"})
        assert r.status_code == 404
        assert r.json()["known_models"] == ["llama-70b"]


@pytest.mark.parametrize("params", [{"window": "5x"}, {"window": "-1h"}, {"start": "yesterday"},
                                    {"start": "2026-11-30T12:00:00Z", "end": "2026-11-30T11:00:00Z"}])
def test_bad_window_is_422(client, mix, params):
    r = client.get("/api/v1/summary", params={"model": "llama-70b", **params})
    assert r.status_code == 422 and r.json()["detail"]


def test_acceptance_series_and_its_validation(client, mix):
    ok = client.get("/api/v1/acceptance", params={"model": "llama-70b", "traffic_class": "mixed",
                                                  "start": "2026-11-30T11:00:00Z", "end": "2026-11-30T11:05:00Z",
                                                  "step": "5m"})
    assert ok.status_code == 200, ok.text
    body = ok.json()
    assert body["acceptance_rate"][-1] == pytest.approx(0.61) and body["step_seconds"] == 300
    assert len(body["t"]) == len(body["acceptance_rate"]) == len(body["drafts"])
    for bad in ({"step": "90s"}, {"window": "30s"}, {"step": "1x"}):
        r = client.get("/api/v1/acceptance", params={"model": "llama-70b", **bad})
        assert r.status_code == 422, bad
    r = client.get("/api/v1/acceptance", params={"model": "llama-70b", "traffic_class": "math"})
    assert r.status_code == 404 and "mixed" in r.json()["known"]


def test_pools_listing_with_staleness_and_rejections(client, db, now, mix):
    old = make_pool(db, traffic_class="batch", last_seen=now - timedelta(hours=2))
    make_rejection(db, old)
    make_rejection(db, old, rule="per_position_increasing")
    pools = {p["traffic_class"]: p for p in client.get("/api/v1/pools").json()["pools"]}
    assert pools["batch"]["stale"] is True and pools["chat"]["stale"] is False
    assert pools["batch"]["rejected"] == 2 and pools["chat"]["rejected"] == 0
    assert pools["chat"]["num_spec_tokens"] == 5


def test_pools_say_how_their_newest_counts_were_collected(client, db, now, mix):
    _chat, code = mix
    # the code pool's newest bucket came through Prometheus' increase(); an older one was exact
    make_bucket(db, code, T0 + timedelta(minutes=3), drafts=1, draft_tokens=5, accepted_tokens=2,
                source="prom-increase")
    make_pool(db, traffic_class="idle", last_seen=now)
    pools = {p["traffic_class"]: p for p in client.get("/api/v1/pools").json()["pools"]}
    assert (pools["chat"]["collected_by"], pools["chat"]["counts"]) == ("prometheus", "exact")
    assert (pools["code"]["collected_by"], pools["code"]["counts"]) == ("prom-increase", "extrapolated")
    assert (pools["idle"]["collected_by"], pools["idle"]["counts"]) == (None, None)


def test_fleet_rows_and_states(client, db, now, mix):
    r = client.get("/api/v1/fleet", params={"window": "1h"})
    assert r.status_code == 200, r.text
    rows = {x["traffic_class"]: x for x in r.json()["rows"]}
    assert set(rows) == {"chat", "code", "mixed"}
    assert rows["chat"]["state"] == "healthy"
    assert rows["code"]["state"] == "below-threshold"  # 0.4 < 0.55 with enough drafts
    assert rows["mixed"]["acceptance_rate"] == pytest.approx(0.61)
    spark = rows["chat"]["sparkline"]
    assert spark["step_seconds"] == 1800 and spark["fine_step_seconds"] == 300
    assert len(spark["t"]) == len(spark["acceptance_rate"]) == 46 + 12  # 23 h of 30 min, the last hour of 5 min
    assert spark["t"][-1] == "2026-11-30T12:00:00Z" and spark["fine_since"] == "2026-11-30T11:00:00Z"
    by_t = dict(zip(spark["t"], spark["acceptance_rate"], strict=True))
    assert by_t["2026-11-30T11:05:00Z"] == pytest.approx(0.7)  # (11:00, 11:05]: the chat buckets
    assert by_t["2026-11-30T11:00:00Z"] is None and by_t["2026-11-30T11:10:00Z"] is None


def test_metrics_exposition_omits_undefined(client, db, now, mix):
    make_pool(db, traffic_class="quiet", last_seen=now)
    text = client.get("/metrics").text
    assert 'specwatch_acceptance_rate{model_name="llama-70b",spec_mode="eagle3",traffic_class="mixed"} 0.61' in text
    quiet = [line for line in text.splitlines() if 'traffic_class="quiet"' in line]
    assert quiet and not any(line.startswith(("specwatch_acceptance_rate", "specwatch_margin",
                                              "specwatch_mean_acceptance_length")) for line in quiet)
    assert "NaN" not in text
