"""Calculator and plan inputs are bounded and finite: a huge K, NaN, +-Infinity, `false` for a number or an
unbounded list is a 422 naming the field, answered at once (the work per request is bounded)."""

from __future__ import annotations

import pytest

from backend.domain import calc as dcalc


def _post_raw(client, path: str, text: str):
    """A body as raw JSON text: Python's JSON writer would refuse NaN/Infinity, the server must too."""
    return client.post(path, content=text, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("path,body", [
    ("speedup", '{"k": 1e30, "alpha": 0.7, "overhead": 0.1}'),
    ("speedup", '{"k": 1000000000000000000000000000000, "alpha": 0.7, "overhead": 0.1}'),
    ("speedup", '{"k": 3000000, "alpha": 0.7, "overhead": 0.1}'),
    ("breakeven", '{"k": 65, "overhead": 0.1}'),
    ("convert", '{"k": 3000000, "acceptance_rate": 0.7}'),
    ("mix", '{"k": 3000000, "classes": [{"name": "a", "alpha": 0.5, "share": 1}]}'),
    ("overhead", '{"k": 3000000, "tau": 2, "measured_speedup": 1.5}'),
    ("required-alpha", '{"k": 3000000, "speedup": 2, "overhead": 0.1}'),
    ("k-advisor", '{"k": 3000000, "overhead": 0.1, "classes": [{"name": "a", "conditional": [0.5]}]}'),
])
def test_a_huge_k_is_refused_at_once(client, path, body):
    r = _post_raw(client, f"/api/v1/calc/{path}", body)
    assert r.status_code == 422, r.text
    assert any(e["loc"][-1] == "k" for e in r.json()["detail"]), r.text


@pytest.mark.parametrize("path,body,field", [
    ("speedup", '{"k": 5, "alpha": NaN, "overhead": 0.1}', "alpha"),
    ("speedup", '{"k": 5, "alpha": 0.7, "overhead": Infinity}', "overhead"),
    ("speedup", '{"k": 5, "alpha": 0.7, "overhead": 1e300}', "overhead"),
    ("required-alpha", '{"k": 5, "speedup": -Infinity, "overhead": 0.1}', "speedup"),
    ("required-alpha", '{"k": 5, "speedup": NaN, "overhead": 0.1}', "speedup"),
    ("overhead", '{"k": 5, "tau": NaN, "measured_speedup": 2}', "tau"),
    ("convert", '{"k": 5, "per_token": NaN}', "per_token"),
    ("mix", '{"k": 5, "classes": [{"name": "a", "alpha": 0.5, "share": NaN}]}', "share"),
    ("mix", '{"k": 5, "classes": [{"name": "a", "alpha": 0.5, "share": 1}], "lengths": {"a": Infinity}}', "a"),
    ("speedup", '{"k": false, "alpha": 0.7, "overhead": 0.1}', "k"),
    ("speedup", '{"k": 5, "alpha": false, "overhead": 0.1}', "alpha"),
    ("speedup", '{"k": "5", "alpha": 0.7, "overhead": 0.1}', "k"),
    ("k-advisor", '{"k": 1, "overhead": 0.1, "classes": [{"name": "a", "conditional": [NaN]}]}', 0),
    ("k-advisor", '{"k": 1, "overhead": 0.1, "classes": [{"name": "a", "conditional": [1.5]}]}', 0),
    ("k-advisor", '{"k": 1, "overhead": -0.1, "classes": [{"name": "a", "conditional": [0.5]}]}', "overhead"),
    ("k-advisor", '{"k": 1, "overhead": 0.1, "eps0_share": 2, "classes": [{"name": "a", "conditional": [0.5]}]}',
     "eps0_share"),
    ("k-advisor", ('{"k": 1, "overhead": 0.1, "classes": [{"name": "a", "conditional": [0.5]}], '
                   '"measured": [{"k": 99, "overhead": 0.2}]}'), "k"),
])
def test_non_finite_and_non_numbers_are_refused(client, path, body, field):
    r = _post_raw(client, f"/api/v1/calc/{path}", body)
    assert r.status_code == 422, r.text
    assert any(e["loc"][-1] == field for e in r.json()["detail"]), r.text


def test_too_many_classes_are_refused(client):
    classes = [{"name": f"c{i}", "alpha": 0.5, "share": 1} for i in range(dcalc.MAX_CLASSES + 1)]
    r = client.post("/api/v1/calc/mix", json={"k": 5, "classes": classes})
    assert r.status_code == 422, r.text


def test_bounds_still_accept_real_inputs(client):
    r = client.post("/api/v1/calc/speedup", json={"k": dcalc.MAX_K, "alpha": 1, "overhead": 0})
    assert r.status_code == 200, r.text
    assert r.json()["values"]["speedup"] == pytest.approx(dcalc.MAX_K + 1)
    # an integer where a float is expected is still a number
    assert client.post("/api/v1/calc/speedup", json={"k": 5, "alpha": 1, "overhead": 0}).status_code == 200


def test_required_alpha_is_never_negative(client):
    r = client.post("/api/v1/calc/required-alpha", json={"k": 5, "speedup": 0.5, "overhead": 0.1})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["values"]["alpha_required"] == 0.0
    assert body["notes"] == ["any acceptance rate reaches this target"]


def test_domain_refuses_huge_k_and_nan_for_the_cli_too():
    with pytest.raises(dcalc.CalcError, match="K must be an integer in 1..64"):
        dcalc.calc_speedup(10**30, 0.7, 0.1)
    with pytest.raises(dcalc.CalcError, match="finite"):
        dcalc.calc_speedup(5, float("nan"), 0.1)
    with pytest.raises(dcalc.CalcError, match="finite"):
        dcalc.calc_mix(5, [("a", 0.5, float("inf"))])


@pytest.mark.parametrize("body,field", [
    ('{"model": "m", "k": 5, "traffic": {"chat": NaN}, "concurrency": 8}', "chat"),
    ('{"model": "m", "k": 5, "traffic": {"chat": 1}, "concurrency": 1e30}', "concurrency"),
    ('{"model": "m", "k": 5, "traffic": {"chat": 1}, "concurrency": 8, "alpha": {"chat": Infinity}}', "chat"),
    ('{"model": "m", "k": 5, "traffic": {"chat": -1}, "concurrency": 8}', "chat"),
    ('{"model": "m", "k": false, "traffic": {"chat": 1}, "concurrency": 8}', "k"),
])
def test_plan_inputs_are_bounded(client, body, field):
    r = _post_raw(client, "/api/v1/plan", body)
    assert r.status_code == 422, r.text
    assert any(e["loc"][-1] == field for e in r.json()["detail"]), r.text


def test_k_advisor_lists_are_bounded(client):
    too_long = [0.5] * (dcalc.MAX_K + 1)
    r = client.post("/api/v1/calc/k-advisor", json={"k": dcalc.MAX_K, "overhead": 0.1,
                                                    "classes": [{"name": "a", "conditional": too_long}]})
    assert r.status_code == 422 and any(e["loc"][-1] == "conditional" for e in r.json()["detail"]), r.text
    many = [{"name": f"c{i}", "conditional": [0.5]} for i in range(dcalc.MAX_CLASSES + 1)]
    assert client.post("/api/v1/calc/k-advisor", json={"k": 1, "overhead": 0.1, "classes": many}).status_code == 422
