import pytest

from backend.domain import acceptance as acc
from backend.domain import economics as eco


def test_speedup_and_seed_speedup_agree():
    assert eco.speedup(4.5, 0.1) == pytest.approx(4.5 / 1.1)
    assert eco.seed_speedup(5, 0.7, 0.1) == pytest.approx(4.090909090909)
    assert eco.seed_speedup(5, 0.4, 2.75) == pytest.approx(0.8)


def test_per_token_misreading_swings_the_answer():
    seed = eco.seed_speedup(5, 0.7, 0.1)
    misread = eco.leviathan_speedup(0.7, 5, 0.0, 0.1)  # 0.7 read as per-token a
    assert misread == pytest.approx(2.94117 / 1.1)
    assert seed / misread - 1 > 0.5


def test_break_even_and_margins():
    assert eco.break_even_alpha(5, 0.15) == pytest.approx(0.03)
    assert eco.tau_breakeven(0.15) == pytest.approx(1.15)
    assert eco.margin_alpha(0.61, 5, 0.15) == pytest.approx(0.58)
    assert eco.margin_alpha(0.4, 5, 2.75) == pytest.approx(-0.15)
    assert eco.speedup_margin(0.8) == pytest.approx(-0.2)
    assert eco.break_even_alpha(5, None) is None
    assert eco.margin_alpha(None, 5, 0.1) is None


def test_effective_overhead():
    assert eco.effective_overhead(3.5, 2.0) == pytest.approx(0.75)
    assert eco.effective_overhead(3.5, 0) is None
    assert eco.effective_overhead(None, 2.0) is None
    # margin from measured eps is positive iff the measured speedup > 1
    assert eco.margin_alpha(0.5, 5, eco.effective_overhead(3.5, 0.9)) < 0


def test_alpha_for_target_speedup():
    assert eco.alpha_for_target_speedup(5, 0.1, 2.0) == pytest.approx(0.24)
    assert eco.alpha_for_target_speedup(5, 0.15, 2.0) == pytest.approx(0.26)
    assert eco.alpha_for_target_speedup(5, 0.1, 6 / 1.1 + 0.01) is None  # infeasible
    assert eco.alpha_for_target_speedup(5, 0.1, 0.5) < 0  # any alpha reaches it
    with pytest.raises(ValueError):
        eco.alpha_for_target_speedup(5, 0.1, 0)


def test_leviathan_forms():
    assert eco.leviathan_expected_tokens(0.7, 5) == pytest.approx(2.94117, abs=1e-12)
    assert eco.leviathan_expected_tokens(0.0, 5) == 1.0
    assert eco.leviathan_speedup(0.8, 4, 0.1) == pytest.approx(2.401142857143)
    assert eco.leviathan_speedup(0.7, 5, 0.02, 0.1) == pytest.approx(2.450975)
    assert eco.leviathan_breakeven(1, 0.05) == pytest.approx(0.05, abs=1e-12)
    assert eco.leviathan_breakeven(5, 0.0, 2.75) == pytest.approx(0.806977101187, abs=1e-9)
    assert eco.leviathan_breakeven(5, 0.0, 5.01) is None
    assert eco.leviathan_breakeven(3, 0.0, 0.0) == 0.0
    a = eco.leviathan_alpha_for_target(5, 0.0, 0.1, 2.0)
    assert a == pytest.approx(0.55938035987, abs=1e-9)
    assert acc.rate_from_per_token(a, 5) == pytest.approx(eco.alpha_for_target_speedup(5, 0.1, 2.0), abs=1e-12)


def test_models_agree_when_alpha_is_interpreted_correctly():
    for a, k, eps in [(0.6, 3, 0.2), (0.85, 5, 0.4), (0.3, 2, 0.05)]:
        r = acc.rate_from_per_token(a, k)
        assert eco.seed_speedup(k, r, eps) == pytest.approx(eco.leviathan_speedup(a, k, 0.0, eps))


def test_required_and_optimal_k():
    # a = 0.8, c = 0.05: S(1)=1.714, S(2)=2.213, S(3)=2.536 ...
    assert eco.required_k(0.8, 2.0, c=0.05) == 2
    assert eco.required_k(0.8, 2.5, c=0.05) == 3
    assert eco.required_k(0.5, 3.0, c=0.05) is None
    k, s = eco.optimal_k(0.8, c=0.05)
    assert s == pytest.approx(eco.leviathan_speedup(0.8, k, 0.05))
    assert eco.leviathan_speedup(0.8, k + 1, 0.05) < s and eco.leviathan_speedup(0.8, k - 1, 0.05) <= s


def test_invalid_parameters_raise():
    for call in (lambda: eco.seed_speedup(0, 0.5, 0.1), lambda: eco.seed_speedup(5, 1.5, 0.1),
                 lambda: eco.seed_speedup(5, 0.5, -1.0), lambda: eco.leviathan_speedup(0.5, 5, -0.1),
                 lambda: eco.required_k(0.5, 2.0, k_max=0)):
        with pytest.raises(ValueError):
            call()
