"""The context_drift rule, hand-computed: pooled α per side (sum, then divide), the difference's 95 % interval
against the margin, the hysteresis, the volume guards, and the rule's config."""

from __future__ import annotations

import math

import pytest

from backend.domain import context_drift as cd
from backend.domain.alert_config import ConfigError, parse_config

Z = 1.959963984540054


def sums(reqs: list[tuple[int, int, int]]) -> cd.ContextSums:
    """(accepted, draft tokens, drafts) per request -> the band sums the database returns."""
    return cd.ContextSums(len(reqs), sum(s for _, _, s in reqs), sum(d for _, d, _ in reqs), sum(a for a, _, _ in reqs),
                          sum(a * a for a, _, _ in reqs), sum(d * d for _, d, _ in reqs),
                          sum(a * d for a, d, _ in reqs))


def run(short, long, *, margin=0.05, recover=0.02, min_drafts=100):
    return cd.context_drift(sums(short), sums(long), boundary=32768, margin=margin, recover_margin=recover,
                            min_drafts=min_drafts, window=3600)


def test_fires_when_the_whole_interval_is_beyond_the_margin():
    # short: a = 80, 70, 80, 70 of d = 100 -> alpha 0.75, residuals +-5; long: 50, 40, 50, 40 -> 0.45, +-5
    ev = run([(80, 100, 25), (70, 100, 25)] * 2, [(50, 100, 25), (40, 100, 25)] * 2)
    se_side = math.sqrt(4 / 3 * 100) / 400
    se = math.sqrt(2) * se_side
    assert ev.status == "breached"
    assert ev.values["alpha_short"] == 0.75 and ev.values["alpha_long"] == 0.45 and ev.value == 0.45
    assert ev.threshold == pytest.approx(0.70)
    low, high = ev.values["difference_interval"]
    assert low == pytest.approx(0.30 - Z * se, abs=1e-12) and high == pytest.approx(0.30 + Z * se, abs=1e-12)
    assert low == pytest.approx(0.21998, abs=1e-5)
    assert (ev.values["drafts_short"], ev.values["drafts_long"]) == (100, 100)


def test_a_large_but_noisy_difference_does_not_fire():
    # short: 100, 50, 100, 50 of 100 -> 0.75, residuals +-25; long: 60, 30, 60, 30 -> 0.45, residuals +-15
    ev = run([(100, 100, 25), (50, 100, 25)] * 2, [(60, 100, 25), (30, 100, 25)] * 2)
    se = math.sqrt(4 / 3 * 2500 / 400 ** 2 + 4 / 3 * 900 / 400 ** 2)
    low = ev.values["difference_interval"][0]
    assert low == pytest.approx(0.30 - Z * se, abs=1e-12) and low < 0  # -0.0299: zero is inside the interval
    assert ev.status == "ok"


def test_a_difference_within_the_margin_does_not_fire():
    same = run([(75, 100, 25)] * 4, [(72, 100, 25)] * 4, margin=0.10)  # no spread: interval = the point 0.03
    assert same.values["difference_interval"][0] == pytest.approx(0.03) and same.status == "ok"
    between = run([(75, 100, 25)] * 4, [(71, 100, 25)] * 4)  # 0.04: above margin - recover (0.03), below 0.05
    assert between.status == "hold"
    beyond = run([(75, 100, 25)] * 4, [(69, 100, 25)] * 4)  # 0.06 with no spread: significant and beyond
    assert beyond.status == "breached"


def test_sides_are_pooled_not_averaged():
    # long: two requests at 300/1000 (band 15) and two at 10/10 (band 17): pooled 620/2020 = 0.307, while the
    # mean of the bands' ratios would be 0.65 (0.05 from the short 0.70: within the margin, no alert)
    short = sums([(70, 100, 25)] * 4)
    bands = [(10, short), (15, sums([(300, 1000, 250)] * 2)), (17, sums([(10, 10, 3)] * 2))]
    s, l = cd.split(bands, 32768)
    assert (s.requests, l.requests, l.accepted, l.draft_tokens, l.drafts) == (4, 4, 620, 2020, 506)
    ev = cd.context_drift(s, l, boundary=32768, margin=0.05, recover_margin=0.02, min_drafts=100, window=3600)
    assert ev.values["alpha_long"] == 620 / 2020
    resid = 2 * (300 - 620 / 2020 * 1000) ** 2 + 2 * (10 - 620 / 2020 * 10) ** 2
    assert l.se == pytest.approx(math.sqrt(4 / 3 * resid) / 2020, abs=1e-15)
    assert ev.status == "breached"


def test_the_boundary_band_is_long():
    s, l = cd.split([(14, sums([(1, 2, 1)])), (15, sums([(2, 2, 1)]))], 32768)  # band 15 starts at 32,768
    assert (s.accepted, l.accepted) == (1, 2)
    s, l = cd.split([(14, sums([(1, 2, 1)])), (15, sums([(2, 2, 1)]))], 65536)
    assert (s.accepted, l.accepted) == (3, 0)
    with pytest.raises(ValueError, match="power of two"):
        cd.split([], 30000)


def test_minimum_counts_give_no_data():
    short, long = [(80, 100, 25), (70, 100, 25)] * 2, [(50, 100, 25), (40, 100, 25)] * 2
    ev = run(short, long, min_drafts=101)  # 100 drafts each side
    assert ev.status == "no_data" and "below 32,768" in ev.reason
    ev = run(short, long[:1] + long[:1] * 0, min_drafts=10)  # one long request: no spread to read
    assert ev.status == "no_data" and "at or above 32,768" in ev.reason
    ev = run(short, [], min_drafts=0)
    assert ev.status == "no_data"


def rule(**extra):
    return {"version": 1, "rules": [{"name": "context-drift", "kind": "context_drift", **extra}]}


def test_config_defaults_and_errors():
    r = parse_config(rule()).rules[0]
    assert (r.params["boundary"], r.params["margin"], r.params["recover_margin"], r.params["window"]) == \
        (32768.0, 0.05, 0.02, 3600.0)
    r = parse_config(rule(boundary=65536, margin=0.1, window="6h",
                          overrides=[{"match": {"traffic_class": "code"}, "margin": 0.2}])).rules[0]
    assert r.value("margin", {"traffic_class": "code"}) == 0.2 and r.params["window"] == 21600
    with pytest.raises(ConfigError) as e:
        parse_config(rule(boundary=30000, margin=2,
                          overrides=[{"match": {"traffic_class": "code"}, "boundary": 1000}]))
    assert e.value.errors == ["rules[0].margin: must be between 0 and 1 (got 2)",
                              "rules[0].boundary: must be a power of two in prompt tokens, e.g. 32768 (got 30000)",
                              ("rules[0].overrides[0].boundary: must be a power of two in prompt tokens, e.g. 32768 "
                               "(got 1000)")]
