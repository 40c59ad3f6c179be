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


def test_k_advisor_over_http(client):
    # chat flat 0.9, code decaying 0.9 * 0.5^(j-1); eps 0.35 at K = 3 and 0.55 at K = 5 -> eps(K) = 0.05 + 0.1 K
    body = {"k": 3, "overhead": 0.35, "measured": [{"k": 5, "overhead": 0.55}],
            "classes": [{"name": "chat", "conditional": [0.9, 0.9, 0.9], "share": 0.7},
                        {"name": "code", "conditional": [0.9, 0.45, 0.225], "share": 0.3}]}
    r = client.post("/api/v1/calc/k-advisor", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["result"] == dcalc.calc_k_advisor(3, [("chat", [0.9, 0.9, 0.9], 0.7), ("code", [0.9, 0.45, 0.225], 0.3)],
                                                 0.35, measured=[(5, 0.55)])
    res = out["result"]
    assert res["overhead"]["eps0"] == pytest.approx(0.05) and res["overhead"]["eps_tok"] == pytest.approx(0.1)
    code = next(c for c in res["classes"] if c["name"] == "code")
    assert code["best_k"] == 2 and code["rows"][0]["speedup"] == pytest.approx(2.305 / 1.25)
    chat = next(c for c in res["classes"] if c["name"] == "chat")
    assert chat["best_k"] == 5 and chat["best_is_extrapolated"] and [r["extrapolated"] for r in chat["rows"]] == [
        False, False, True, True]
    assert out["values"]["best_k"] == 5
    assert out["values"]["best_speedup"] == pytest.approx(3.6491941213 / 1.55)
    assert out["values"]["current_speedup"] == pytest.approx(1 / (0.7 / 3.439 + 0.3 / 2.396125) / 1.35)


@pytest.mark.parametrize("body, reason", [
    ({"k": 3, "overhead": 0.1, "classes": [{"name": "a", "conditional": [0.9, 0.9]}]}, "give 3 conditional"),
    ({"k": 2, "overhead": 0.1, "classes": [{"name": "a", "conditional": [0.9, 0.9]},
                                            {"name": "a", "conditional": [0.8, 0.8]}]}, "unique"),
])
def test_k_advisor_refuses_bad_input_with_a_reason(client, body, reason):
    r = client.post("/api/v1/calc/k-advisor", json=body)
    assert r.status_code == 422 and reason in r.text, r.text


def test_k_advisor_is_documented(client):
    op = client.get("/openapi.json").json()["paths"]["/api/v1/calc/k-advisor"]["post"]
    assert "extrapolated" in op["description"]
    schema = client.get("/openapi.json").json()["components"]["schemas"]["KAdvisorCalcBody"]
    assert schema["properties"]["k"]["maximum"] == dcalc.MAX_K
