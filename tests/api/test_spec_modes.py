"""A model that runs several spec modes (beside its baseline): the API names what it needs, with a stable
`code` and the modes it knows, and answers every mode on its own."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.factories import T0, make_bucket, make_pool

RANGE = {"start": "2026-11-30T11:00:00Z", "end": "2026-11-30T11:05:00Z", "step": "5m"}


@pytest.fixture
def two_modes(db, now):
    """llama-70b: chat at 0.7 (eagle3, K 5), chat at 0.4 and code at 0.2 (ngram, K 4), chat baseline."""
    pools = {
        ("chat", "eagle3"): (make_pool(db, traffic_class="chat", spec_mode="eagle3", num_spec_tokens=5,
                                       last_seen=now), 0.7),
        ("chat", "ngram"): (make_pool(db, traffic_class="chat", spec_mode="ngram", num_spec_tokens=4,
                                      last_seen=now), 0.4),
        ("code", "ngram"): (make_pool(db, traffic_class="code", spec_mode="ngram", num_spec_tokens=4,
                                      last_seen=now), 0.2),
    }
    make_pool(db, traffic_class="chat", spec_mode="off", last_seen=now)
    for pool, rate in pools.values():
        k = pool.num_spec_tokens
        for i in range(3):
            make_bucket(db, pool, T0 + timedelta(minutes=i), drafts=1000, draft_tokens=1000 * k,
                        accepted_tokens=rate * 1000 * k, running_mean=4.0)
    return pools


def test_a_series_without_spec_mode_names_the_modes_never_the_baseline(client, two_modes):
    r = client.get("/api/v1/acceptance", params={"model": "llama-70b", **RANGE})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["code"] == "spec_mode_required"
    assert body["known"] == ["eagle3", "ngram"]  # the baseline "off" is not a mode to pick
    assert body["detail"] == ("model 'llama-70b' runs several spec modes (eagle3, ngram): pass spec_mode as one "
                              "of them")


@pytest.mark.parametrize("mode,cls,rate", [("eagle3", "chat", 0.7), ("ngram", "chat", 0.4), ("ngram", "code", 0.2),
                                           ("ngram", "mixed", 0.3), ("eagle3", "mixed", 0.7)])
def test_each_mode_is_answered_on_its_own(client, two_modes, mode, cls, rate):
    r = client.get("/api/v1/acceptance", params={"model": "llama-70b", "spec_mode": mode, "traffic_class": cls,
                                                 **RANGE})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["spec_mode"] == mode and body["traffic_class"] == cls
    assert body["acceptance_rate"][-1] == pytest.approx(rate)


def test_unknown_names_say_which_ones_exist_with_a_code(client, two_modes):
    r = client.get("/api/v1/acceptance", params={"model": "llama-70b", "spec_mode": "medusa", **RANGE})
    assert r.status_code == 404 and r.json()["code"] == "unknown_spec_mode"
    assert r.json()["known"] == ["eagle3", "ngram"]
    r = client.get("/api/v1/acceptance", params={"model": "llama-70b", "spec_mode": "eagle3", "traffic_class": "code",
                                                 **RANGE})
    assert r.status_code == 404 and r.json()["code"] == "unknown_traffic_class"
    assert r.json()["known"] == ["chat", "mixed"]  # eagle3 serves chat only
    r = client.get("/api/v1/acceptance", params={"model": "gpt-9", **RANGE})
    assert r.status_code == 404 and r.json()["code"] == "unknown_model" and r.json()["known_models"] == ["llama-70b"]
    r = client.get("/api/v1/summary", params={"model": "llama-70b", "window": "5x"})
    assert r.status_code == 422 and r.json()["code"] == "invalid_window"


def test_a_baseline_only_model_is_404_no_spec_pool(client, db, now):
    make_pool(db, model_name="plain-8b", traffic_class="chat", spec_mode="off", last_seen=now)
    r = client.get("/api/v1/acceptance", params={"model": "plain-8b", **RANGE})
    assert r.status_code == 404 and r.json()["code"] == "no_spec_pool"


def test_the_summary_has_each_modes_classes_and_its_own_mix(client, two_modes):
    body = client.get("/api/v1/summary", params={"model": "llama-70b", "start": RANGE["start"],
                                                 "end": RANGE["end"]}).json()
    rows = {(k["traffic_class"], k["spec_mode"]): k for k in body["classes"]}
    assert set(rows) == {("chat", "eagle3"), ("mixed", "eagle3"), ("chat", "ngram"), ("code", "ngram"),
                         ("mixed", "ngram")}
    assert rows[("mixed", "ngram")]["acceptance_rate"] == pytest.approx(0.3)
    assert rows[("mixed", "ngram")]["volume"]["drafts"] == pytest.approx(6000)
    assert rows[("mixed", "eagle3")]["volume"]["drafts"] == pytest.approx(3000)
