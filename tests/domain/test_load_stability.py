"""α, τ and bucket-to-bucket dispersion by concurrency band, and the load_instability rule: hand-computed.

Each bucket below is one request of 100 draft tokens and 50 verify steps, so its moments are a², d², a·d.
F(0.975; 2, 2) = 0.975 / 0.025 = 39 exactly, so with three buckets a side the dispersion ratio's 95 %
interval is ratio / 39 .. ratio · 39."""

from __future__ import annotations

import math

import pytest

from backend.domain import load_stability as ls
from backend.domain import request_stats


def one(a: float, d: float = 100, steps: float = 50, *, record: bool = True) -> ls.LoadSums:
    return ls.LoadSums(1, steps, d, a, a * a, d * d, a * d, steps * steps, a * steps, a / d, (a / d) ** 2,
                       int(record), int(not record), with_steps=1, with_draft_tokens=1)


def groups(band: int, accepted: list[float]) -> list:
    return [(b, band, one(a)) for b, a in enumerate(accepted)]


LOW = groups(1, [58, 60, 62])  # "9-32": α 0.6, X² = 100·(0.02² + 0 + 0.02²)/0.24 = 1/3 over 2 df
PARAMS = ls.RuleParams(boundary=32, margin=0.05, recover_margin=0.02, dispersion_ratio=2.0,
                       recover_dispersion_ratio=1.5, min_drafts=100)


def test_pearson_dispersion_by_hand() -> None:
    x2, df = ls.pearson([one(5, 10), one(7, 10)])  # α = 0.6: 10·(0.1² + 0.1²) / 0.24
    assert (x2, df) == (pytest.approx(0.2 / 0.24, abs=1e-12), 1)
    assert ls.dispersion([b for _, _, b in LOW]) == pytest.approx(1 / 6, abs=1e-12)
    assert ls.pearson([one(5, 10)]) is None  # one bucket: no spread
    assert ls.pearson([one(0), one(0)]) is None  # α = 0: no spread possible


def test_tau_and_request_weighted_by_hand() -> None:
    s = one(6, 6, 4) + one(0, 6, 2)  # Σa = 6 over 6 steps: τ = 2; residuals 6 − 4, 0 − 2
    tau, lo, hi = ls.tau_interval(s)
    se = math.sqrt(2 / 1 * (2 ** 2 + 2 ** 2)) / 6
    assert tau == 2 and lo == 1.0 and hi == pytest.approx(2 + request_stats.Z95 * se, abs=1e-12)  # low end floored at τ = 1
    mean, sd = ls.request_weighted(one(3, 6) + one(6, 6))  # α 0.5 and 1
    assert mean == 0.75 and sd == pytest.approx(math.sqrt(0.125), abs=1e-12)


def test_band_table_rows() -> None:
    high = [(0, 2, one(20, record=False)), (1, 2, one(40)), (2, 2, one(60))]  # "33-128", α 0.4
    rows, unknown = ls.band_table(LOW + high + [(0, None, one(10))])
    assert [r["band"] for r in rows] == ["9-32", "33-128"] and unknown.requests == 1
    low, hi = rows
    assert (low["requests"], low["drafts"], low["draft_tokens"], low["accepted_tokens"]) == (3, 150, 300, 180)
    assert low["draft_token_weighted_alpha"] == 0.6 and low["mean_acceptance_length"] == pytest.approx(1 + 180 / 150)
    assert low["basis"] == "record" and hi["basis"] == "record and pool"
    assert hi["requests_by_basis"] == {"record": 2, "pool": 1}
    assert hi["alpha_vs_low_load"] == pytest.approx(-0.2, abs=1e-12)
    assert hi["dispersion"] == pytest.approx(100 * (0.04 + 0 + 0.04) / 0.24 / 2, abs=1e-12)
    assert hi["dispersion_vs_low_load"] == pytest.approx(100.0, abs=1e-9)
    # pooled α 0.6 over three requests: se = sqrt(3/2 · Σ(a − 0.6·100)²) / 300 = sqrt(12) / 300
    se = math.sqrt(12) / 300
    assert low["draft_token_weighted_alpha_interval"] == [pytest.approx(0.6 - request_stats.Z95 * se, abs=1e-12),
                                                          pytest.approx(0.6 + request_stats.Z95 * se, abs=1e-12)]


def test_unstable_above_the_boundary() -> None:
    ev = ls.evaluate(LOW + groups(2, [20, 60, 40]), PARAMS)
    v = ev.values
    # level: α_low 0.6, α_high 0.4; se_low = sqrt(12)/300, se_high = sqrt(3/2 · 800)/300 -> d's low end < 0.05
    se = math.sqrt((math.sqrt(12) / 300) ** 2 + (math.sqrt(1200) / 300) ** 2)
    assert v["difference"] == pytest.approx(0.2) and v["difference_interval"][0] == pytest.approx(0.2 - request_stats.Z95 * se)
    assert not v["falls"] and v["unstable"] and ev.status == "breached"
    # φ_high = 100·(0.2² + 0.2² + 0)/0.24/2 = 100/6; φ_low = 1/6: ratio 100, interval 100/39 .. 3900
    assert v["dispersion_ratio"] == pytest.approx(100.0)
    assert v["dispersion_ratio_interval"] == [pytest.approx(100 / 39), pytest.approx(3900.0)]
    assert "becomes unstable above 32" in ev.reason


def test_falls_above_the_boundary() -> None:
    ev = ls.evaluate(LOW + groups(3, [40, 40, 40]), PARAMS)  # ">128", α 0.4, no spread (se 0, φ 0)
    v = ev.values
    assert v["difference_interval"][0] == pytest.approx(0.2 - request_stats.Z95 * math.sqrt(12) / 300)
    assert v["falls"] and not v["unstable"] and ev.status == "breached" and ev.value == pytest.approx(0.4)
    assert ev.threshold == pytest.approx(0.55)


def test_stable_hold_and_no_data() -> None:
    same = ls.evaluate(LOW + groups(2, [58, 60, 62]), PARAMS)
    assert same.status == "ok" and same.values["dispersion_ratio"] == pytest.approx(1.0)
    # α_high 0.53: d = 0.07, se = sqrt(2)·sqrt(12)/300, low end 0.038: between 0.03 and 0.05 -> hold
    hold = ls.evaluate(LOW + groups(2, [51, 53, 55]), PARAMS)
    assert hold.values["difference_interval"][0] == pytest.approx(0.07 - request_stats.Z95 * math.sqrt(24) / 300)
    assert hold.status == "hold"
    few = ls.evaluate(LOW + groups(2, [58, 60, 62]), ls.RuleParams(min_drafts=1000))
    assert few.status == "no_data" and "at or below 32" in few.reason
    two = ls.evaluate(LOW + groups(2, [20, 60]), PARAMS)  # two buckets above: dispersion not determined
    assert two.values["dispersion_ratio"] is None and not two.values["unstable"]
    with pytest.raises(ValueError, match="band edge"):
        ls.evaluate(LOW, ls.RuleParams(boundary=30))


def test_operating_band() -> None:
    assert ls.operating_band({"1-8": 10.0, "9-32": 30.0, "33-128": 30.0, None: 99.0}) == "9-32"
    assert ls.operating_band({"1-8": 0.0, None: 5.0}) is None


def test_records_without_verify_steps_show_no_drafts_and_the_rule_says_why():
    """llama.cpp records carry draft and accepted tokens but no verify steps: α stands, drafts and τ are not
    exposed (None, never 0), and the rule cannot apply its volume guard."""
    no_steps = [(b, band, ls.LoadSums(1, 0.0, 100.0, 60.0, 3600.0, 10000.0, 6000.0, 0.0, 0.0, 0.6, 0.36, 1, 0,
                                      with_steps=0, with_draft_tokens=1))
                for band in (0, 2) for b in range(4)]
    rows, _ = ls.band_table(no_steps)
    assert [(r["band"], r["drafts"], r["draft_tokens"], r["mean_acceptance_length"]) for r in rows] == \
        [("1-8", None, 400.0, None), ("33-128", None, 400.0, None)]
    assert rows[0]["draft_token_weighted_alpha"] == 0.6
    ev = ls.evaluate(no_steps, ls.RuleParams(min_drafts=1))
    assert ev.status == "no_data" and "verify steps are not exposed" in ev.reason
