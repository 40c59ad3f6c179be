from __future__ import annotations

import pytest

from backend.domain import calc as dcalc


def _values(client, op, body):
    r = client.post(f"/api/v1/calc/{op}", json=body)
    assert r.status_code == 200, r.text
    return r.json()["values"]


def test_calc_matches_the_known_answers(client):
    assert _values(client, "speedup", {"k": 5, "alpha": 0.7, "overhead": 0.1})["speedup"] == pytest.approx(4.090909)
    assert _values(client, "breakeven", {"k": 5, "overhead": 0.75})["alpha_breakeven"] == pytest.approx(0.15)
    req = _values(client, "required-alpha", {"k": 5, "speedup": 2, "overhead": 0.1})
    assert req["alpha_required"] == pytest.approx(0.24)
    assert _values(client, "convert", {"k": 5, "acceptance_rate": 0.7})["per_token_a"] == pytest.approx(0.883380,
                                                                                                     abs=1e-6)
    mix = _values(client, "mix", {"k": 5, "classes": [{"name": "chat", "alpha": 0.7, "share": 0.7},
                                                      {"name": "code", "alpha": 0.4, "share": 0.3}]})
    assert mix["mixed_alpha"] == pytest.approx(0.61)
    over = _values(client, "overhead", {"k": 5, "tau": 3.5, "measured_speedup": 2})
    assert over["eps_effective"] == pytest.approx(0.75) and over["margin_alpha"] == pytest.approx(0.35)


def test_calc_result_is_what_the_cli_prints(client):
    body = client.post("/api/v1/calc/speedup", json={"k": 5, "alpha": 0.7, "overhead": 0.1}).json()
    assert body["result"] == dcalc.calc_speedup(5, 0.7, 0.1)


def test_calc_validation(client):
    assert client.post("/api/v1/calc/speedup", json={"k": 0, "alpha": 0.7, "overhead": 0.1}).status_code == 422
    assert client.post("/api/v1/calc/convert", json={"k": 5}).status_code == 422
    infeasible = client.post("/api/v1/calc/required-alpha", json={"k": 5, "speedup": 10, "overhead": 0.1}).json()
    assert infeasible["values"]["alpha_required"] is None and infeasible["notes"]
