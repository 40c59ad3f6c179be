"""/acceptance/bulk: many series on one grid, each equal to its own /acceptance answer."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import text

from backend.config import Settings
from backend.db import spec_series
from tests.factories import T0, make_bucket, make_pool

WINDOW = {"start": "2026-11-30T10:58:00Z", "end": "2026-11-30T11:06:00Z", "step": "2m"}


@pytest.fixture
def fleet(db, now):
    chat = make_pool(db, traffic_class="chat", num_spec_tokens=5, last_seen=now)
    code = make_pool(db, traffic_class="code", num_spec_tokens=5, last_seen=now)
    make_pool(db, traffic_class="chat", spec_mode="off", num_spec_tokens=None, last_seen=now)
    other = make_pool(db, model_name="qwen-7b", traffic_class="chat", num_spec_tokens=3, last_seen=now)
    for i in range(5):
        make_bucket(db, chat, T0 + timedelta(minutes=i), drafts=100, draft_tokens=500, accepted_tokens=350)
        make_bucket(db, code, T0 + timedelta(minutes=i), drafts=20, draft_tokens=100, accepted_tokens=10 * i)
        if i != 2:
            make_bucket(db, other, T0 + timedelta(minutes=i), drafts=10, draft_tokens=30, accepted_tokens=15)
    return chat, code, other


def _one(client, **params):
    r = client.get("/api/v1/acceptance", params=WINDOW | params)
    assert r.status_code == 200, r.text
    return r.json()


def test_by_pool_equals_each_pools_own_series(client, fleet):
    r = client.get("/api/v1/acceptance/bulk", params=WINDOW | {"by": "pool"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [(s["model_name"], s["traffic_class"]) for s in body["series"]] == [
        ("llama-70b", "chat"), ("llama-70b", "code"), ("qwen-7b", "chat")]  # spec pools only, baseline left out
    for s in body["series"]:
        own = _one(client, model=s["model_name"], traffic_class=s["traffic_class"])
        assert body["t"] == own["t"]
        for col in ("acceptance_rate", "mean_acceptance_length", "seed_alpha", "drafts", "draft_tokens",
                    "accepted_tokens"):
            assert s[col] == own[col], col
    code = body["series"][1]
    # buckets start at 11:00 + i min and end a minute later: (11:00, 11:02] holds i = 0, 1 ...
    assert code["accepted_tokens"] == [None, None, 10.0, 50.0, 40.0]
    assert code["acceptance_rate"][2] == pytest.approx(0.05) and code["acceptance_rate"][1] is None
    assert body["t"][0] == "2026-11-30T10:58:00Z" and body["step_seconds"] == 120


def test_by_model_is_the_mix_summed_then_divided(client, fleet):
    body = client.get("/api/v1/acceptance/bulk", params=WINDOW | {"by": "model", "fields": "acceptance_rate"}).json()
    llama = body["series"][0]
    assert llama["traffic_class"] == "mixed" and set(llama) >= {"acceptance_rate", "pools"}
    assert "drafts" not in llama  # only the fields asked for
    assert llama["acceptance_rate"] == _one(client, model="llama-70b", traffic_class="mixed")["acceptance_rate"]
    assert llama["acceptance_rate"][2] == pytest.approx((700 + 10) / (1000 + 200))
    qwen = client.get("/api/v1/acceptance/bulk", params=WINDOW | {"by": "model", "model": "qwen-7b"}).json()
    assert qwen["series"][0]["drafts"] == [None, None, 20.0, 10.0, 10.0]  # bucket i = 2 never reported


@pytest.mark.parametrize("params,status", [({"fields": "alpha"}, 422), ({"by": "class"}, 422),
                                           ({"model": "nope"}, 404), ({"spec_mode": "medusa"}, 404),
                                           ({"step": "90s"}, 422), ({"step": "1s", "range": "30d"}, 422)])
def test_bad_parameters(client, fleet, params, status):
    r = client.get("/api/v1/acceptance/bulk", params={"range": "1h"} | params)
    assert r.status_code == status, r.text


def test_a_month_at_one_minute_is_one_request_and_larger_reads_are_refused(client, fleet):
    month = client.get("/api/v1/acceptance/bulk", params={"range": "30d", "step": "1m", "fields": "acceptance_rate"})
    assert month.status_code == 200, month.text  # 43,201 points per series: under max_points_hard (50,000)
    assert len(month.json()["t"]) == 30 * 1440 + 1  # both ends of the range
    longer = client.get("/api/v1/acceptance/bulk", params={"range": "35d", "step": "1m"})
    assert longer.status_code == 422 and "more than 50000 points" in longer.text
    # memory bound: pools read x time grains (3 spec pools x 5 two-minute grains here)
    client.app.state.settings = Settings(_env_file=None, max_cells=15)
    assert client.get("/api/v1/acceptance/bulk", params=WINDOW).status_code == 200
    client.app.state.settings = Settings(_env_file=None, max_cells=14)
    r = client.get("/api/v1/acceptance/bulk", params=WINDOW)
    assert r.status_code == 422 and "3 pools x 5 time steps" in r.text
    assert client.get("/api/v1/acceptance/bulk", params=WINDOW | {"model": "qwen-7b"}).status_code == 200  # 1 x 5
    # the bound is on what a caller asks for: the fleet's own sparklines are not refused
    client.app.state.settings = Settings(_env_file=None, max_cells=1)
    fleet_rows = client.get("/api/v1/fleet", params={"window": "1h", "live": "true"})
    assert fleet_rows.status_code == 200 and fleet_rows.json()["rows"][0]["sparkline"]["t"]


def test_model_filter(client, fleet):
    body = client.get("/api/v1/acceptance/bulk", params=WINDOW | {"model": "qwen-7b"}).json()
    assert [s["model_name"] for s in body["series"]] == ["qwen-7b"]


def test_binary_array_loader_handles_nulls(db):
    conn = db.connection().connection.driver_connection
    cur = conn.cursor(binary=True)
    cur.adapters.register_loader(spec_series.FLOAT8_ARRAY_OID, spec_series.Float8ArrayLoader)
    cur.execute("SELECT ARRAY[1.5, NULL, -2, 'NaN']::float8[], ARRAY[]::float8[], ARRAY[0.25, 1e300]::float8[]")
    a, empty, b = cur.fetchone()
    assert a[0] == 1.5 and np.isnan(a[1]) and a[2] == -2 and np.isnan(a[3])
    assert empty.size == 0 and b.tolist() == [0.25, 1e300]
    db.execute(text("SELECT 1"))


def test_repeated_models_and_clear_parameter_errors(client, fleet):
    both = client.get("/api/v1/acceptance/bulk", params=WINDOW | {"model": ["qwen-7b", "llama-70b"], "by": "model"})
    assert both.status_code == 200, both.text
    assert sorted(s["model_name"] for s in both.json()["series"]) == ["llama-70b", "qwen-7b"]
    r = client.get("/api/v1/acceptance/bulk", params=WINDOW | {"by": "class"})
    assert r.status_code == 422 and r.json()["detail"] == "by must be one of pool, model (got 'class')"
    r = client.get("/api/v1/acceptance", params=WINDOW)
    assert r.status_code == 422 and r.json()["detail"] == "query parameter 'model' is required"


def test_a_counter_missing_where_another_reported_is_undefined_only_itself(client, db, now):
    """Counters reported in the same buckets share where points are undefined; one that is missing in a
    bucket (accepted tokens NULL, drafts reported) keeps its own: that point's accepted_tokens and
    acceptance_rate are null, its drafts and draft_tokens are not. Also as a 6-minute rolling window."""
    pool = make_pool(db, traffic_class="chat", num_spec_tokens=5, last_seen=now)
    for i in range(5):  # bucket i ends at T0 + i + 1 minutes; points every 2 minutes up to T0 + 6
        make_bucket(db, pool, T0 + timedelta(minutes=i), drafts=10, draft_tokens=50,
                    accepted_tokens=None if i in (2, 3) else 20)
    body = client.get("/api/v1/acceptance/bulk", params=WINDOW).json()["series"][0]
    assert body["drafts"] == [None, None, 20.0, 20.0, 10.0]
    assert body["draft_tokens"] == [None, None, 100.0, 100.0, 50.0]
    assert body["accepted_tokens"] == [None, None, 40.0, None, 20.0]
    assert body["acceptance_rate"] == [None, None, 0.4, None, 0.4]
    rolling = client.get("/api/v1/acceptance/bulk", params=WINDOW | {"window": "6m"}).json()["series"][0]
    assert rolling["drafts"] == [None, None, 20.0, 40.0, 50.0]
    assert rolling["accepted_tokens"] == [None, None, 40.0, 40.0, 60.0]
