"""/latency: every pool's histogram summed over the window and its quantiles."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from backend.domain.histogram import histogram_quantile
from tests.factories import ITL_BOUNDS, T0, cumulative, make_bucket, make_pool

WINDOW = {"start": "2026-11-30T10:00:00Z", "end": "2026-11-30T12:00:00Z"}


@pytest.fixture
def pools(db, now):
    spec = make_pool(db, traffic_class="chat", last_seen=now)
    base = make_pool(db, traffic_class="chat", spec_mode="off", last_seen=now)
    quiet = make_pool(db, traffic_class="code", last_seen=now)
    n = len(ITL_BOUNDS) + 1
    for i in range(6):
        make_bucket(db, spec, T0 + timedelta(minutes=i), itl=[i + 1] + [2] * (n - 1), itl_sum=0.5 * (i + 1))
        make_bucket(db, base, T0 + timedelta(minutes=i), itl=[10] + [0] * (n - 1), itl_sum=0.1)
    make_bucket(db, spec, T0 - timedelta(hours=3), itl=[1000] * n)  # outside the window
    return spec, base, quiet


def test_quantiles_are_histogram_quantile_over_the_summed_buckets(client, pools):
    r = client.get("/api/v1/latency", params=WINDOW | {"family": "itl", "q": "0.5,0.99"})
    assert r.status_code == 200, r.text
    rows = {(x["pool"]["traffic_class"], x["pool"]["spec_mode"]): x for x in r.json()["rows"]}
    n = len(ITL_BOUNDS) + 1
    summed = cumulative([sum(range(1, 7))] + [12] * (n - 1))
    spec = rows[("chat", "eagle3")]
    assert spec["samples"] == summed[-1] and spec["mean"] == pytest.approx(0.5 * 21 / summed[-1])
    for got, q in zip(spec["quantiles"], (0.5, 0.99)):
        assert got["q"] == q
        assert got["value"] == histogram_quantile(q, list(zip((*ITL_BOUNDS, math.inf), summed))).value
    base = rows[("chat", "off")]
    assert base["quantiles"][0]["value"] == pytest.approx(ITL_BOUNDS[0] * 0.5)  # all in the first bucket
    quiet = rows[("code", "eagle3")]
    assert quiet["samples"] is None and quiet["quantiles"] == []  # no data: nothing, not zeros


@pytest.mark.parametrize("params,status", [({"q": "1.5"}, 422), ({"q": "x"}, 422), ({"family": "e2e"}, 422),
                                           ({"model": "nope"}, 404), ({"window": "5x"}, 422)])
def test_bad_parameters(client, pools, params, status):
    assert client.get("/api/v1/latency", params=params).status_code == status


def test_a_layout_change_is_flagged_and_the_dominant_layout_is_summed(client, db, now):
    """Two bucket layouts of different lengths in the window: each is summed on its own (never element by
    element across layouts); the one with more samples (here the shorter) answers, and the row says the
    layout changed."""
    pool = make_pool(db, traffic_class="chat", last_seen=now)
    short = (0.1, 1.0)  # 3 counts
    for i in range(3):
        make_bucket(db, pool, T0 + timedelta(minutes=i), itl=[10, 10, 10], itl_bounds=short)
    n = len(ITL_BOUNDS) + 1
    for i in range(3, 6):
        make_bucket(db, pool, T0 + timedelta(minutes=i), itl=[4] + [1] * (n - 1))  # 3 x 23 = 69 samples
    row = client.get("/api/v1/latency", params=WINDOW | {"family": "itl", "q": "0.5"}).json()["rows"][0]
    assert row["layout_changed"] is True
    summed = cumulative([30, 30, 30])  # 90 samples
    assert row["samples"] == summed[-1]
    assert row["quantiles"][0]["value"] == histogram_quantile(0.5, list(zip((*short, math.inf), summed))).value
    assert row["quantiles"][0]["bucket_high"] == 1.0


@pytest.mark.parametrize("family", ["itl", "tpot", "ttft"])
def test_spec_pools_carry_the_verdict_summary_gives(client, db, now, family):
    """30 minutes: spec all in (10, 25] ms, baseline all in (0, 10] ms. /latency's spec row carries the very
    verdict /summary shows for the class (worse, interval [0, 25] ms), at every quantile asked for; the
    baseline row and q = 1 have none."""
    spec = make_pool(db, model_name="m-lat", traffic_class="chat", last_seen=now)
    base = make_pool(db, model_name="m-lat", traffic_class="chat", spec_mode="off", last_seen=now)
    n = len(ITL_BOUNDS) + 1
    for i in range(30):
        make_bucket(db, spec, T0 + timedelta(minutes=i), drafts=100, draft_tokens=300, accepted_tokens=150,
                    **{family: [0, 100] + [0] * (n - 2)})
        make_bucket(db, base, T0 + timedelta(minutes=i), **{family: [100] + [0] * (n - 1)})
    r = client.get("/api/v1/latency", params=WINDOW | {"family": family, "q": "0.5,0.99,1", "model": "m-lat"})
    assert r.status_code == 200, r.text
    rows = {x["pool"]["spec_mode"]: x for x in r.json()["rows"]}
    p50, p99, p100 = rows["eagle3"]["quantiles"]
    assert p99["verdict"]["verdict"] == "worse" and p50["verdict"]["verdict"] == "worse" and p100["verdict"] is None
    assert (p99["verdict"]["delta_low"], p99["verdict"]["delta_high"]) == (pytest.approx(0.0), pytest.approx(0.025))
    assert all(q["verdict"] is None for q in rows["off"]["quantiles"])
    if family != "ttft":
        summary = client.get("/api/v1/summary", params=WINDOW | {"model": "m-lat"}).json()
        chat = next(k for k in summary["classes"] if k["traffic_class"] == "chat")
        assert next(q for q in chat[family]["quantiles"] if q["q"] == 0.99)["verdict"] == p99["verdict"]


def test_openapi_documents_the_verdict_on_bucket_edges(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    verdict = schemas["VerdictRead"]["properties"]
    assert "unresolved" in verdict["verdict"]["enum"]
    for field in ("delta_low", "delta_high", "spec_bucket_low", "base_bucket_high", "edge", "spec_exceedance",
                  "base_exceedance_high", "tail_shift", "reason"):
        assert field in verdict, field
    assert "resolution_advice" in schemas["SummaryRead"]["properties"]
    assert {"p99_tpot_reason", "p99_itl_delta_low"} <= set(schemas["FleetRowRead"]["properties"])
    assert "verdict" in schemas["PoolQuantileRead"]["properties"]
