"""Capacity and money against hand-computed cases (backend/domain/capacity.py)."""

from __future__ import annotations

import math

import pytest

from backend.domain import capacity as cap
from backend.domain import money
from backend.domain.capacity import Bin


def test_scalar_rates_by_hand():
    assert cap.rate(720_000, 7200) == 100.0
    assert cap.rate(5, 0) is None and cap.rate(None, 10) is None and cap.rate(-1, 10) is None
    assert cap.replica_hour_price(2.0, 4) == 8.0
    assert cap.replica_hour_price(None, 4) is None
    # 8 per replica-hour at 50 tokens/s per replica: 180,000 tokens an hour -> 8 / 0.18 per million
    assert cap.cost_per_mtok(8.0, 50.0) == pytest.approx(44.4444444444)
    assert cap.cost_per_mtok(8.0, 0.0) is None and cap.cost_per_mtok(None, 50.0) is None
    assert cap.per_week(26.0, 14400) == pytest.approx(26.0 * 42)
    assert cap.per_week(None, 14400) is None and cap.per_week(1.0, 0) is None


@pytest.mark.parametrize("price", [0, -1, math.nan, math.inf, 1e6])
def test_bad_prices_are_refused(price):
    with pytest.raises(ValueError):
        cap.replica_hour_price(price, 1)


@pytest.mark.parametrize("gpus", [0, 1025, 1.5, True])
def test_bad_gpu_counts_are_refused(gpus):
    with pytest.raises(ValueError):
        cap.replica_hour_price(2.0, gpus)


def _hand_case():
    # two replicas on each side (replica_seconds = 2 x seconds); one-hour bins
    spec = {
        "1-8": [Bin(360_000, 3600, 7200, 4 * 3600)] * 2,  # 100 tok/s, 50 per replica, 25 per running request
        "9-32": [Bin(80_000, 3600, 7200, 20 * 3600)],  # no baseline in this band: not priced
        ">128": [Bin(100_000, 3600, 7200, 150 * 3600)] * 2,  # 13.9 tok/s per replica
    }
    base = {
        "1-8": [Bin(180_000, 3600, 7200, 4 * 3600)] * 2,  # 25 per replica
        ">128": [Bin(120_000, 3600, 7200, 150 * 3600)] * 2,  # 16.7 per replica: speculation loses here
    }
    return cap.compare(spec, base, gpu_hour_price=2.0, gpus_per_replica=4, window_seconds=4 * 3600, n_boot=200)


def test_compare_against_a_hand_computed_case():
    c = _hand_case()
    low, mid, high = c.bands
    assert [b.band for b in c.bands] == ["1-8", "9-32", ">128"]  # band order, not dict order
    # band 1-8: 720,000 tokens over 14,400 replica-seconds = 50 tok/s per replica; baseline 25
    assert low.spec.per_replica == pytest.approx(50.0) and low.base.per_replica == pytest.approx(25.0)
    assert low.spec.throughput == pytest.approx(100.0) and low.spec.replicas == pytest.approx(2.0)
    assert low.spec.per_request == pytest.approx(25.0)  # 720,000 / (4 running x 7,200 s)
    assert low.ratio_per_request == pytest.approx(2.0)
    # cost per 1 M tokens: 8 per replica-hour / (50 x 3600) x 1e6 = 44.44; baseline 88.89
    assert low.spec.cost_per_mtok == pytest.approx(8e6 / 180_000)
    assert low.base.cost_per_mtok == pytest.approx(8e6 / 90_000)
    # saving: 0.72 M tokens x (88.89 - 44.44) = 32.00
    assert low.saved_in_window == pytest.approx(32.0)
    assert low.ratio_per_replica == pytest.approx(2.0) and low.pays == "yes"
    assert mid.base is None and mid.saved_in_window is None and mid.pays is None
    # band >128: 200,000 vs 240,000 tokens on the same replica-seconds: ratio 5/6, a loss of
    # 0.2 M x (8e6/60,000 - 8e6/50,000) = 0.2 x (133.33 - 160) = -5.333
    assert high.ratio_per_replica == pytest.approx(5 / 6) and high.pays == "no"
    assert high.saved_in_window == pytest.approx(-16 / 3)
    m = c.money
    assert m.saved_in_window == pytest.approx(32.0 - 16 / 3)  # 26.667 over 4 hours
    assert m.per_week_at_window_rate == pytest.approx((32.0 - 16 / 3) * 42)  # 604,800 / 14,400 = 42 -> 1,120
    assert m.compared_fraction == pytest.approx(920_000 / 1_000_000)
    # both ways, weighted by the spec tokens of the compared bands: (720k x 44.44 + 200k x 160) / 920k
    assert m.cost_per_mtok_spec == pytest.approx(64e6 / 920_000)
    assert m.cost_per_mtok_base == pytest.approx((64e6 + 200_000 * 8e6 / 60_000) / 920_000)
    assert (m.cost_per_mtok_base - m.cost_per_mtok_spec) * 0.92 == pytest.approx(m.saved_in_window)
    # identical bins: every resample gives the point value, the interval collapses onto it
    assert m.saved_in_window_low == pytest.approx(m.saved_in_window) and m.saved_in_window_high == pytest.approx(m.saved_in_window)
    assert c.stops_paying_band == ">128" and c.stops_paying_significant is True
    # the whole pools, every band summed
    assert c.spec.tokens == 1_000_000 and c.base.tokens == 600_000


def test_bootstrap_interval_covers_the_point_and_is_deterministic():
    spec = {"1-8": [Bin(t, 3600, 3600) for t in (150_000, 210_000, 180_000, 170_000, 190_000, 160_000)]}
    base = {"1-8": [Bin(t, 3600, 3600) for t in (95_000, 85_000, 90_000, 100_000, 80_000, 90_000)]}
    a = cap.compare(spec, base, gpu_hour_price=3.0, window_seconds=6 * 3600, seed=7)
    b = cap.compare(spec, base, gpu_hour_price=3.0, window_seconds=6 * 3600, seed=7)
    m = a.money
    assert m.saved_in_window_low < m.saved_in_window < m.saved_in_window_high
    assert (m.saved_in_window_low, m.saved_in_window_high) == (b.money.saved_in_window_low, b.money.saved_in_window_high)
    # point by hand: 1,060,000 spec tokens over 21,600 replica-seconds, baseline 540,000 over the same:
    # 1.06 M x 3 / 3600 x 21,600 x (1/540,000 - 1/1,060,000) = 17.333
    hand = 1_060_000 * 3.0 / 3600 * (21_600 / 540_000 - 21_600 / 1_060_000)
    assert m.saved_in_window == pytest.approx(hand)
    assert a.bands[0].ratio_low < 1_060_000 / 540_000 < a.bands[0].ratio_high and a.bands[0].pays == "yes"


def test_undefined_is_none():
    spec = {"1-8": [Bin(1000, 60, None, 60)]}  # replicas unknown
    c = cap.compare(spec, {"1-8": [Bin(500, 60, None, 60)]}, gpu_hour_price=2.0, window_seconds=60)
    assert c.bands[0].spec.per_replica is None and c.bands[0].ratio_per_replica is None
    assert c.bands[0].ratio_per_request == pytest.approx(2.0)  # per running request needs no replicas
    assert c.money.saved_in_window is None and c.stops_paying_band is None
    no_price = cap.compare({"1-8": [Bin(1000, 60, 60)]}, {"1-8": [Bin(500, 60, 60)]}, gpu_hour_price=None,
                           window_seconds=60)
    assert no_price.bands[0].ratio_per_replica == pytest.approx(2.0) and no_price.money.saved_in_window is None
    no_base = cap.compare({"1-8": [Bin(1000, 60, 60)]}, None, gpu_hour_price=2.0, window_seconds=60)
    assert no_base.base is None and no_base.money.saved_in_window is None
    one_bin = cap.compare({"1-8": [Bin(1000, 60, 60)]}, {"1-8": [Bin(500, 60, 60)]}, gpu_hour_price=2.0,
                          window_seconds=60)
    assert one_bin.money.saved_in_window is not None and one_bin.money.saved_in_window_low is None  # too few bins: no interval
    assert one_bin.bands[0].pays == "uncertain"


def test_a_band_too_thin_to_resample_enters_the_interval_as_a_constant():
    spec = {"1-8": [Bin(360_000, 3600, 7200)] * 2, "9-32": [Bin(10_000, 60, 120)]}
    base = {"1-8": [Bin(180_000, 3600, 7200)] * 2, "9-32": [Bin(5_000, 60, 120)]}
    c = cap.compare(spec, base, gpu_hour_price=8.0, window_seconds=7200)
    thin = c.bands[1]
    # 9-32: 10,000 tokens at 8/3600 x (120/5,000 - 120/10,000) per token = 0.2667, no interval of its own
    assert thin.saved_in_window == pytest.approx(10_000 * 8 / 3600 * (120 / 5000 - 120 / 10_000)) and thin.saved_in_window_low is None
    assert c.money.fixed_bands == ("9-32",)
    # 1-8 resamples to its point (identical bins): the total's interval is the point, both bands included
    assert c.money.saved_in_window_low == pytest.approx(c.money.saved_in_window) == pytest.approx(32.0 + thin.saved_in_window)


@pytest.mark.parametrize("kw", [{"n_boot": 0}, {"n_boot": 10**6}, {"confidence": 1.0}, {"min_bins": 0}])
def test_bad_parameters_are_refused(kw):
    with pytest.raises(ValueError):
        cap.compare({}, None, gpu_hour_price=1.0, window_seconds=60, **kw)


def test_bad_bins_are_refused():
    with pytest.raises(ValueError):
        cap.compare({"1-8": [Bin(-1, 60, 60)]}, None, gpu_hour_price=1.0, window_seconds=60)
    with pytest.raises(ValueError):
        cap.compare({"1-8": [Bin(math.nan, 60, 60)]}, None, gpu_hour_price=1.0, window_seconds=60)


def test_total_saving_sums_points_and_replicates():
    a, b = _hand_case().money, _hand_case().money
    t = cap.total_saving([a, b], window_seconds=4 * 3600)
    assert t.saved_in_window == pytest.approx(2 * (32.0 - 16 / 3))
    assert t.per_week_at_window_rate == pytest.approx(2 * (32.0 - 16 / 3) * 42)
    assert t.saved_in_window_low == pytest.approx(t.saved_in_window)
    none = cap.total_saving([cap.compare({}, None, gpu_hour_price=None, window_seconds=1).money],
                            window_seconds=1)
    assert none.saved_in_window is None and none.per_week_at_window_rate is None


def test_the_three_savings_by_hand():
    """One comparison, three figures: 26.67 saved over a 4 h window (the hand case), 26.67 x 42 per week at
    that window's rate; the weekly report names the same window-to-date saving with its hours of data."""
    c = _hand_case()
    assert c.money.saved_in_window == pytest.approx(32.0 - 16 / 3)  # 26.67 in the 4 h window
    assert c.money.per_week_at_window_rate == pytest.approx((32.0 - 16 / 3) * 604_800 / (4 * 3600))  # 1,120.00
    assert cap.per_week(26.67, 24 * 3600) == pytest.approx(26.67 * 7)
    assert cap.per_week(26.67, 0) is None and cap.per_week(None, 3600) is None
    assert money.hours_of_data([7200.0, 5400.0, None]) == pytest.approx(2.0)  # the longest coverage
    assert money.hours_of_data([None, 0.0]) is None and money.hours_of_data([]) is None
    assert money.saved_week_label(2.0) == "saved this week so far (2 h of data)"
    assert money.saved_week_label(2.5) == "saved this week so far (2.5 h of data)"
    assert money.saved_week_label(0.25) == "saved this week so far (0.2 h of data)"  # one decimal, half to even
    assert money.saved_week_label(167.4) == "saved this week so far (167 h of data)"
    assert money.saved_week_label(None) == "saved this week so far (n/a h of data)"
    assert (money.SAVED_IN_WINDOW, money.PER_WEEK_AT_WINDOW_RATE) == ("saved in this window",
                                                                      "per week at this window's rate")


@pytest.mark.parametrize("text, want", [("USD", "USD"), ("eur", "EUR"), (" GBP ", "GBP"), ("$", "$"), ("€", "€"),
                                        ("US$", "US$"), ("R$", "R$")])
def test_a_currency_is_an_iso_code_or_a_short_symbol(text, want):
    assert money.check_currency(text) == want


@pytest.mark.parametrize("text", ["", "dollars", "US", "EURO", "12$", "$ $", "E1R", "€€€€", "abc$"])
def test_a_bad_currency_is_refused_with_what_would_do(text):
    with pytest.raises(ValueError, match="3-letter ISO 4217 code such as USD"):
        money.check_currency(text)


def test_money_is_written_with_its_currency():
    assert money.money_text(1234.5, "USD") == "1,234.50 USD" and money.money_text(-3.2, "EUR") == "-3.20 EUR"
    assert money.money_text(1234.5, "$") == "$1,234.50" and money.money_text(-3.2, "€") == "-€3.20"
    assert money.money_text(-0.001, "USD") == "0.00 USD" and money.money_text(-0.001, "$") == "$0.00"  # never -0.00
    assert money.money_text(None, "USD") == "n/a" and money.money_text(None, "USD", none="—") == "—"
    assert money.money_text(math.nan, "USD") == "n/a"
    assert money.interval_text(3.47, 23.47, "USD") == "3.47 USD to 23.47 USD"
    assert money.interval_text(None, 23.47, "USD") == "n/a"
    assert money.saved_week_cell(12.8, 2.0, "EUR") == "12.80 EUR (2 h of data)"
    assert money.saved_week_cell(None, 2.0, "EUR", none="—") == "—"
