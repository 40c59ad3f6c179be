import pytest

from backend.domain import acceptance as acc


def test_rate_tau_and_seed_alpha():
    assert acc.acceptance_rate(1750, 2500) == pytest.approx(0.7)
    assert acc.mean_acceptance_length(1750, 500) == pytest.approx(4.5)
    assert acc.seed_alpha(1750, 500, 5) == pytest.approx(0.7)


def test_trimmed_drafts_make_rate_differ_from_seed_alpha():
    # 500 drafts at K=5 but only 2000 draft tokens verified (trimmed)
    assert acc.acceptance_rate(1200, 2000) == pytest.approx(0.6)
    assert acc.seed_alpha(1200, 500, 5) == pytest.approx(0.48)
    assert 1 + 5 * acc.seed_alpha(1200, 500, 5) == pytest.approx(acc.mean_acceptance_length(1200, 500))
    assert acc.is_trimmed(500, 2000, 5) is True
    assert acc.is_trimmed(500, 2500, 5) is False
    assert acc.is_trimmed(0, 0, 5) is None


def test_no_drafts_is_undefined_never_zero_or_one():
    assert acc.acceptance_rate(0, 0) is None
    assert acc.mean_acceptance_length(0, 0) is None
    assert acc.seed_alpha(0, 0, 3) is None
    assert acc.acceptance_rate(None, 100) is None
    assert acc.acceptance_rate(float("nan"), 100) is None


def test_zero_accepted_with_drafts_is_defined():
    assert acc.acceptance_rate(0, 100) == 0.0
    assert acc.mean_acceptance_length(0, 100) == 1.0


def test_per_position_curves():
    pos = [800, 600, 450, 330, 240]
    assert acc.per_position_unconditional(pos, 1000) == pytest.approx([0.8, 0.6, 0.45, 0.33, 0.24])
    assert acc.per_position_conditional(pos, 1000) == pytest.approx([0.8, 0.75, 0.75, 0.33 / 0.45, 0.24 / 0.33])


def test_per_position_edge_cases():
    assert acc.per_position_unconditional(None, 100) is None
    assert acc.per_position_conditional(None, 100) is None
    assert acc.per_position_conditional([0, 0, 0], 0) == [None, None, None]
    # nobody reached position 2, but position 1 was tried and failed: a real 0 then None
    assert acc.per_position_conditional([50, 0, 0], 100) == [0.5, 0.0, None]
    assert acc.per_position_conditional([50, None, 10], 100) == [0.5, None, None]


def test_per_token_conversion_round_trip():
    a = acc.per_token_from_rate(0.7, 5)
    assert a == pytest.approx(0.883379831226, abs=1e-10)
    assert acc.rate_from_per_token(a, 5) == pytest.approx(0.7, abs=1e-12)
    assert acc.tau_from_per_token(a, 5) == pytest.approx(4.5, abs=1e-10)
    assert acc.per_token_from_rate(0.4, 1) == 0.4  # K = 1: a = r
    assert acc.per_token_from_rate(0.0, 5) == 0.0
    assert acc.per_token_from_rate(1.0, 5) == 1.0
    assert acc.rate_from_per_token(1.0, 5) == 1.0
    assert acc.tau_from_per_token(1.0, 5) == 6.0


def test_rate_below_per_token_for_k_above_one():
    for r in (0.1, 0.3, 0.55, 0.9):
        assert acc.per_token_from_rate(r, 3) > r


def test_conversion_edge_cases():
    assert acc.per_token_from_rate(None, 5) is None
    assert acc.per_token_from_rate(1.2, 5) is None  # skewed data: no solution
    with pytest.raises(ValueError):
        acc.rate_from_per_token(1.5, 5)
    with pytest.raises(ValueError):
        acc.per_token_from_rate(0.5, 0)
    with pytest.raises(ValueError):
        acc.seed_alpha(1, 1, 2.5)


def test_mle_equals_generating_a_on_geometric_data():
    pos = [80000, 64000, 51200, 40960, 32768]
    assert acc.mle_per_token(pos, 100000) == pytest.approx(0.8)
    assert acc.mle_per_token([800, 600, 450, 330, 240], 1000) == pytest.approx(2420 / 3180)
    assert acc.mle_per_token(None, 1000) is None
    assert acc.mle_per_token([0, 0], 0) is None
    assert acc.mle_per_token([10, None], 100) is None


def test_drift_indicators_detect_decay():
    d = acc.drift_indicators([900, 720, 504, 302, 151], 1000)  # p = 0.9, 0.8, 0.7, ~0.6, 0.5
    assert d.last_to_first_ratio == pytest.approx((151 / 302) / 0.9)
    assert d.slope == pytest.approx(-0.1, abs=0.005)
    assert d.min_trials == 302
    assert d.mle_minus_moment is not None and d.mle_minus_moment < 0


def test_drift_indicators_flat_on_iid_and_undefined_without_data():
    d = acc.drift_indicators([80000, 64000, 51200, 40960, 32768], 100000)
    assert d.last_to_first_ratio == pytest.approx(1.0)
    assert d.slope == pytest.approx(0.0, abs=1e-12)
    assert d.mle_minus_moment == pytest.approx(0.0, abs=1e-9)
    empty = acc.drift_indicators([0, 0, 0], 0)
    assert (empty.last_to_first_ratio, empty.slope, empty.min_trials) == (None, None, None)
    assert acc.drift_indicators(None, 100).slope is None


def test_invariants_clean_and_violations():
    assert acc.check_invariants(1000, 5000, 2420, [800, 600, 450, 330, 240], 5) == []
    flags = acc.check_invariants(1000, 5000, 2500, [800, 600, 650, 330, 240], 5)
    assert acc.FLAG_PER_POS_INCREASING in flags
    assert acc.FLAG_SUM_NE_ACCEPTED in flags  # 2620 != 2500
    assert acc.check_invariants(1000, 4000, 4100, None, 5) == [acc.FLAG_ACCEPTED_GT_DRAFT_TOKENS,
                                                               acc.FLAG_PER_POS_NOT_EVALUABLE]
    assert acc.FLAG_DRAFT_TOKENS_GT_K_DRAFTS in acc.check_invariants(100, 600, 10, [10], 5)
    assert acc.FLAG_PER_POS_LEN in acc.check_invariants(100, 500, 10, [10], 5)
    assert acc.FLAG_PER_POS_GT_DRAFTS in acc.check_invariants(100, 500, 300, [150, 100, 50, 0, 0], 5)
    assert acc.FLAG_NEGATIVE in acc.check_invariants(-1, 500, 10, None, 5)


def test_sum_check_uses_relative_tolerance():
    pos = [800.0000000001, 600, 450, 330, 240]
    assert acc.FLAG_SUM_NE_ACCEPTED not in acc.check_invariants(1000, 5000, 2420, pos, 5)
    assert acc.FLAG_SUM_NE_ACCEPTED in acc.check_invariants(1000, 5000, 2421, [800, 600, 450, 330, 240], 5)
