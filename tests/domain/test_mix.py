import pytest

from backend.domain import economics as eco
from backend.domain.mix import (
    ClassTotals,
    draft_token_weights,
    mixed_alpha_from_shares,
    mixed_rates,
    mixed_speedup,
    pooled,
)

CHAT_CODE = [(0.7, 0.7), (0.4, 0.3)]


def test_draft_token_shares_give_the_weighted_mean():
    assert mixed_alpha_from_shares(CHAT_CODE, 5) == pytest.approx(0.61)
    assert mixed_alpha_from_shares(CHAT_CODE, 5, basis="draft tokens") == pytest.approx(0.61)


def test_request_shares_weigh_the_low_acceptance_class_more():
    assert mixed_alpha_from_shares(CHAT_CODE, 5, basis="requests") == pytest.approx(0.58261, abs=1e-5)
    assert mixed_alpha_from_shares(CHAT_CODE, 5, basis="requests", lengths=[1, 3]) == pytest.approx(0.50244, abs=1e-5)
    assert mixed_alpha_from_shares(CHAT_CODE, 5, basis="output-tokens") == pytest.approx(
        mixed_alpha_from_shares(CHAT_CODE, 5, basis="requests"))


def test_request_basis_equals_pooled_counters():
    """Simulate the counters: 700 chat and 300 code requests of 100 output tokens each, full-length drafts."""
    k = 5
    classes = []
    for name, alpha, reqs in (("chat", 0.7, 700), ("code", 0.4, 300)):
        drafts = reqs * 100 / (1 + k * alpha)  # steps = tokens / tau
        classes.append(ClassTotals(name, drafts, drafts * k, drafts * k * alpha))
    assert mixed_rates(classes, k).acceptance_rate == pytest.approx(
        mixed_alpha_from_shares(CHAT_CODE, k, basis="requests"))
    w = draft_token_weights(CHAT_CODE, k)
    assert w[1] > 0.3 and sum(w) == pytest.approx(1.0)


def test_pooling_counters_not_ratios():
    chat = ClassTotals("chat", 10000, 50000, 35000, (9000, 8000, 7000, 6000, 5000))
    code = ClassTotals("code", 4000, 20000, 8000, (3000, 2000, 1500, 1000, 500))
    p = pooled([chat, code])
    assert (p.drafts, p.draft_tokens, p.accepted) == (14000, 70000, 43000)
    assert p.per_pos == (12000, 10000, 8500, 7000, 5500)
    rates = mixed_rates([chat, code], 5)
    assert rates.acceptance_rate == pytest.approx(43000 / 70000)
    assert rates.acceptance_rate != pytest.approx((0.7 + 0.4) / 2)
    assert rates.mean_acceptance_length == pytest.approx(1 + 43000 / 14000)
    assert not rates.incomplete


def test_missing_class_is_excluded_and_flagged_not_zero():
    chat = ClassTotals("chat", 100, 500, 350)
    ghost = ClassTotals("code", None, None, None)
    p = pooled([chat, ghost])
    assert (p.drafts, p.accepted) == (100, 350)
    assert p.missing == ("code",) and p.incomplete
    assert pooled([ghost]).drafts is None
    assert mixed_rates([ghost], 5).acceptance_rate is None


def test_class_with_zero_drafts_adds_nothing():
    rates = mixed_rates([ClassTotals("a", 100, 500, 350), ClassTotals("b", 0, 0, 0)], 5)
    assert rates.acceptance_rate == pytest.approx(0.7)
    assert not rates.incomplete


def test_per_pos_not_pooled_when_a_class_lacks_it_or_k_differs():
    a = ClassTotals("a", 100, 500, 300, (80, 70, 60, 50, 40))
    assert pooled([a, ClassTotals("b", 100, 500, 300)]).per_pos is None
    assert pooled([a, ClassTotals("b", 100, 300, 150, (80, 50, 20))]).per_pos is None


def test_mixed_speedup_is_harmonic():
    k, eps = 5, 0.1
    s = [eco.seed_speedup(k, 0.7, eps), eco.seed_speedup(k, 0.4, eps)]
    exact = mixed_speedup([(s[0], 0.7), (s[1], 0.3)])
    assert exact == pytest.approx(3.557312252964)
    assert 0.7 * s[0] + 0.3 * s[1] == pytest.approx(3.681818181818)  # the arithmetic mean overstates it
    assert mixed_speedup([(None, 0.5), (2.0, 0.5)]) is None
    assert mixed_speedup([]) is None


def test_invalid_inputs():
    with pytest.raises(ValueError):
        mixed_alpha_from_shares([(1.2, 1.0)], 5)
    with pytest.raises(ValueError):
        mixed_alpha_from_shares([(0.5, 0.0), (0.6, 0.0)], 5)
    with pytest.raises(ValueError):
        mixed_alpha_from_shares(CHAT_CODE, 5, basis="tokens")
    with pytest.raises(ValueError):
        mixed_alpha_from_shares(CHAT_CODE, 5, lengths=[1, 3])  # lengths need the requests basis
    with pytest.raises(ValueError):
        mixed_speedup([(0.0, 1.0)])
    assert mixed_alpha_from_shares([], 5) is None
