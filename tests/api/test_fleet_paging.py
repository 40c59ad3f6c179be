"""/fleet at thousands of rows: server-side filtering, sorting and paging (q, model, state, sort, offset,
limit). No paging parameter: the answer is today's, byte for byte; pages cover the matching rows exactly
once in a stable order; bad values are refused with 422."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backend.config import Settings
from backend.services import fleet
from backend.services import fleet_page as fp
from tests.factories import T0, make_bucket, make_pool

URL = "/api/v1/fleet"
MODELS = ("alpha-70b", "beta-8b", "gamma-32b", "delta-7b")
CLASSES = ("chat", "code", "rag")


@pytest.fixture
def fleet_db(db, now):
    """4 models x 3 classes, spec pools with acceptance from 0.05 to 0.9 (several states) and K 3 or 5; one
    model stopped reporting (stale); mixed rows appear for every model with several classes."""
    i = 0
    for m, model in enumerate(MODELS):
        last = now - timedelta(hours=3) if model == "delta-7b" else now
        for cls in CLASSES:
            pool = make_pool(db, model_name=model, traffic_class=cls, num_spec_tokens=3 + 2 * (m % 2), last_seen=last)
            accepted = int(5000 * (0.05 + 0.075 * i))
            make_bucket(db, pool, T0, drafts=1000, draft_tokens=5000, accepted_tokens=accepted, running_mean=4.0)
            i += 1
    return db


def _get(client, **params):
    r = client.get(URL, params={"window": "1h", **params})
    assert r.status_code == 200, r.text
    return r.json()


def _ids(rows):
    return [(r["model_name"], r["traffic_class"], r["spec_mode"]) for r in rows]


def test_no_paging_parameter_is_todays_answer(client, fleet_db, now):
    settings = Settings(_env_file=None)
    fleet.refresh_snapshots(fleet_db, now=now - timedelta(seconds=20), settings=settings, force=True)
    snap = client.get(URL, params={"window": "1h"})
    assert snap.content == fleet.snapshot_body(fleet_db, window_seconds=3600, now=now, settings=settings)
    body = snap.json()
    assert "total_rows" not in body and "matched_rows" not in body and len(body["rows"]) >= 12
    live = client.get(URL, params={"window": "1h", "live": "true"}).json()
    assert set(live) == {"window", "generated_at", "alpha_threshold", "rows", "reads"} and live["reads"] is None
    assert _ids(live["rows"]) == _ids(body["rows"])


@pytest.mark.parametrize("live", [False, True])
def test_pages_cover_every_matching_row_once_in_a_stable_order(client, fleet_db, now, live):
    if not live:
        fleet.refresh_snapshots(fleet_db, now=now - timedelta(seconds=20), settings=Settings(_env_file=None),
                                force=True)
    extra = {"live": "true"} if live else {}
    full = _get(client, **extra)["rows"]
    want = sorted([r for r in full if r["acceptance_rate"] is not None],
                  key=lambda r: (-r["acceptance_rate"], r["model_name"], r["traffic_class"], r["spec_mode"]))
    want += sorted([r for r in full if r["acceptance_rate"] is None],
                   key=lambda r: (r["model_name"], r["traffic_class"], r["spec_mode"]))
    seen, offset, pages = [], 0, []
    while True:
        page = _get(client, sort="-acceptance_rate", offset=offset, limit=5, **extra)
        pages.append(page)
        seen += page["rows"]
        offset += 5
        if offset >= page["matched_rows"]:
            break
    assert {p["total_rows"] for p in pages} == {len(full)} and {p["matched_rows"] for p in pages} == {len(full)}
    assert _ids(seen) == _ids(want)  # every row once, in the asked order, nulls last
    assert len(pages[-1]["rows"]) == len(full) - 5 * (len(pages) - 1) and len(pages[-1]["rows"]) <= 5  # last page
    rates = [r["acceptance_rate"] for r in seen if r["acceptance_rate"] is not None]
    assert rates == sorted(rates, reverse=True) and rates[0] > rates[-1]
    again = _get(client, sort="-acceptance_rate", offset=5, limit=5, **extra)
    assert _ids(again["rows"]) == _ids(pages[1]["rows"])  # the same request pages the same way
    beyond = _get(client, sort="-acceptance_rate", offset=len(full) + 10, limit=5, **extra)
    assert beyond["rows"] == [] and beyond["matched_rows"] == len(full)
    counts = pages[0]["state_counts"]
    assert sum(counts.values()) == len(full) and set(counts) == set(fp.STATE_ORDER)
    assert counts["stale"] == sum(r["state"] == "stale" for r in full) > 0


def test_filters_narrow_the_rows_and_keep_the_totals(client, fleet_db):
    full = _get(client, live="true")["rows"]
    by_model = _get(client, live="true", model="beta-8b", limit=1000)
    assert {r["model_name"] for r in by_model["rows"]} == {"beta-8b"}
    assert by_model["matched_rows"] == sum(r["model_name"] == "beta-8b" for r in full) == 4  # 3 classes + mixed
    assert by_model["total_rows"] == len(full)
    text = _get(client, live="true", q="CODE", limit=1000)
    assert {r["traffic_class"] for r in text["rows"]} == {"code"} and text["matched_rows"] == len(MODELS)
    stale = _get(client, live="true", state="stale", limit=1000)
    assert stale["rows"] and {r["model_name"] for r in stale["rows"]} == {"delta-7b"}
    two = _get(client, live="true", state=["stale", "healthy"], limit=1000)
    assert two["matched_rows"] == sum(r["state"] in ("stale", "healthy") for r in full)
    assert _get(client, live="true", q="no-such-thing")["rows"] == []


def test_state_sorts_most_urgent_first_and_descending_reverses(client, fleet_db):
    rows = _get(client, live="true", sort="state", limit=1000)["rows"]
    ranks = [fp.STATE_ORDER.index(r["state"]) for r in rows]
    assert ranks == sorted(ranks) and len(set(ranks)) >= 2
    names = [r["model_name"] for r in _get(client, live="true", sort="-model_name", limit=1000)["rows"]]
    assert names == sorted(names, reverse=True)


@pytest.mark.parametrize("params", [
    {"limit": 0}, {"limit": fp.MAX_LIMIT + 1}, {"limit": "ten"}, {"offset": -1}, {"offset": fp.MAX_OFFSET + 1},
    {"sort": "password"}, {"sort": "--margin"}, {"state": "on-fire"}, {"q": ""}, {"q": "x" * (fp.MAX_QUERY + 1)},
    {"model": ""}, {"state": ["stale"] * 9},
])
def test_bad_paging_values_are_refused(client, fleet_db, params):
    r = client.get(URL, params={"window": "1h", **params})
    assert r.status_code == 422, (params, r.text)
    assert r.json()["detail"]


def test_openapi_documents_the_paging_parameters(client):
    spec = client.get("/openapi.json").json()
    op = spec["paths"]["/api/v1/fleet"]["get"]
    params = {p["name"]: p for p in op["parameters"]}
    assert {"q", "model", "state", "sort", "offset", "limit"} <= set(params)
    assert params["limit"]["schema"]["anyOf"][0]["maximum"] == fp.MAX_LIMIT
    assert "-margin" in str(params["sort"]["schema"])
    assert "FleetPageRead" in str(op["responses"]["200"])


def test_ordered_puts_nulls_last_both_ways_and_breaks_ties_by_identity():
    rows = [{"model_name": m, "traffic_class": "chat", "spec_mode": "eagle3", "margin": v}
            for m, v in (("b", 0.1), ("a", None), ("c", 0.1), ("d", -0.2), ("e", None))]
    up = [r["model_name"] for r in fp.ordered(rows, "margin")]
    down = [r["model_name"] for r in fp.ordered(rows, "-margin")]
    assert up == ["d", "b", "c", "a", "e"] and down == ["b", "c", "d", "a", "e"]
    assert fp.ordered(rows, None) is rows


def test_a_newer_snapshot_replaces_the_parsed_one(client, fleet_db, now):
    """Pages come from the process's parse of the stored snapshot until a newer one is stored."""
    settings = Settings(_env_file=None)
    fleet.refresh_snapshots(fleet_db, now=now - timedelta(seconds=50), settings=settings, force=True)
    before = _get(client, model="alpha-70b", sort="traffic_class")
    pool = make_pool(fleet_db, model_name="alpha-70b", traffic_class="zeta", last_seen=now)
    make_bucket(fleet_db, pool, T0, drafts=1000, draft_tokens=5000, accepted_tokens=4000, running_mean=4.0)
    assert _get(client, model="alpha-70b")["matched_rows"] == before["matched_rows"]  # still the parsed one
    fleet.refresh_snapshots(fleet_db, now=now - timedelta(seconds=10), settings=settings, force=True)
    after = _get(client, model="alpha-70b", sort="traffic_class")
    assert after["matched_rows"] == before["matched_rows"] + 1
    assert after["rows"][-1]["traffic_class"] == "zeta" and after["generated_at"] != before["generated_at"]


def test_the_urgency_order_names_every_state_once():
    from typing import get_args

    from backend.schemas.fleet import FLEET_STATE_ORDER, FleetState

    assert sorted(FLEET_STATE_ORDER) == sorted(get_args(FleetState))
    assert fp.STATE_ORDER is FLEET_STATE_ORDER
