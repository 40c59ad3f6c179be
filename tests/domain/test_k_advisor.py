"""K advisor against hand-computed cases (docs/k-advisor.md)."""

import math

import pytest

from backend.domain import k_advisor as ka
from backend.domain.k_advisor import Overhead

GIVEN = ka.SOURCE_GIVEN


def rows(advice):
    return {r.k: r for r in advice.rows}


def test_tokens_per_step_for_k_prime_up_to_k_is_one_plus_sum_of_unconditional():
    # p = 0.8, 0.5, 0.5 -> u = 0.8, 0.4, 0.2 (u_j = p_1 ... p_j)
    u = ka.unconditional([0.8, 0.5, 0.5])
    assert u == pytest.approx([0.8, 0.4, 0.2])
    assert ka.tokens_per_step(u, 1) == pytest.approx(1.8)
    assert ka.tokens_per_step(u, 2) == pytest.approx(2.2)
    assert ka.tokens_per_step(u, 3) == pytest.approx(2.4)
    assert ka.tokens_per_step(u, 4) is None  # beyond the curve: not measured
    # the same through the advisor (K' = K - 1 and K), and tau(K) = 1 + A/N from counts P = 800, 400, 200 of N = 1000
    adv = ka.advise_class("chat", [0.8, 0.5, 0.5], 3, Overhead(0.0, 0.0, GIVEN))
    assert rows(adv)[2].tau == pytest.approx(2.2) and not rows(adv)[2].extrapolated
    assert rows(adv)[3].tau == pytest.approx(1 + (800 + 400 + 200) / 1000)


def test_speedup_and_argmax_for_a_given_eps_of_k():
    # p = 0.8 flat at K = 4, eps(K) = 0.2 K. u = .8 .64 .512 .4096, then (fit flat) .32768 .262144
    adv = ka.advise_class("chat", [0.8] * 4, 4, Overhead(0.0, 0.2, GIVEN))
    r = rows(adv)
    assert [x.k for x in adv.rows] == [3, 4, 5, 6]
    assert r[3].tau == pytest.approx(2.952) and r[3].eps == pytest.approx(0.6)
    assert r[3].speedup == pytest.approx(2.952 / 1.6)        # 1.845
    assert r[4].speedup == pytest.approx(3.3616 / 1.8)       # 1.867556
    assert r[5].tau == pytest.approx(3.68928) and r[5].extrapolated
    assert r[5].speedup == pytest.approx(3.68928 / 2.0)      # 1.84464
    assert r[6].speedup == pytest.approx(3.951424 / 2.2)     # 1.796102
    assert adv.best_k == 4 and adv.gain == pytest.approx(0.0) and not adv.best_is_extrapolated


def test_decaying_acceptance_a_smaller_k_wins():
    # p_j = 0.9 * 0.5^(j-1): exactly log-linear, so the fit's slope is log 0.5 and p_4 = 0.1125, p_5 = 0.05625
    adv = ka.advise_class("code", [0.9, 0.45, 0.225], 3, Overhead(0.05, 0.1, GIVEN))
    assert adv.fit.method == ka.FIT_LOG_LINEAR
    assert adv.fit.slope == pytest.approx(math.log(0.5)) and adv.fit.p_at(4) == pytest.approx(0.1125)
    r = rows(adv)
    assert r[2].tau == pytest.approx(2.305) and r[2].speedup == pytest.approx(2.305 / 1.25)   # 1.844
    assert r[3].tau == pytest.approx(2.396125) and r[3].speedup == pytest.approx(2.396125 / 1.35)
    assert r[4].tau == pytest.approx(2.406376563) and r[4].speedup == pytest.approx(2.406376563 / 1.45)
    assert r[5].tau == pytest.approx(2.406953213) and r[5].speedup == pytest.approx(2.406953213 / 1.55)
    assert adv.best_k == 2 and adv.current_k == 3
    assert adv.gain == pytest.approx(1.844 / (2.396125 / 1.35) - 1)  # +3.887 %


def test_flat_high_acceptance_a_larger_extrapolated_k_wins():
    # p = 0.9 flat, eps = 0.06 measured at K = 3, all of it per token (share 0): eps(K) = 0.02 K
    ov = ka.split_overhead(0.06, 3)
    assert (ov.eps0, ov.eps_tok) == pytest.approx((0.0, 0.02))
    adv = ka.advise_class("chat", [0.9, 0.9, 0.9], 3, ov)
    assert adv.fit.slope == pytest.approx(0.0) and adv.fit.p_at(5) == pytest.approx(0.9)
    r = rows(adv)
    assert r[3].speedup == pytest.approx(3.439 / 1.06)
    assert r[4].speedup == pytest.approx(4.0951 / 1.08) and r[4].extrapolated
    assert r[5].speedup == pytest.approx(4.68559 / 1.10) and r[5].extrapolated
    assert adv.best_k == 5 and adv.best_is_extrapolated
    assert adv.gain == pytest.approx((4.68559 / 1.1) / (3.439 / 1.06) - 1)


def test_split_share_and_two_k_calibration():
    ov = ka.split_overhead(0.3, 3, eps0_share=0.5)
    assert (ov.eps0, ov.eps_tok, ov.at(5)) == pytest.approx((0.15, 0.05, 0.4))
    # two K measured for the same model/drafter: eps(3) = 0.25, eps(5) = 0.35 -> eps_tok = 0.05, eps0 = 0.1
    two = ka.calibrate(0.25, 3, points=[(5, 0.35)])
    assert two.source == ka.SOURCE_FIT
    assert (two.eps0, two.eps_tok, two.at(4)) == pytest.approx((0.1, 0.05, 0.3))
    # three points: least squares (K mean 3, eps mean 0.76/3; slope 0.1/2)
    three = ka.fit_overhead([(2, 0.2), (3, 0.26), (4, 0.3)])
    assert (three.eps_tok, three.eps0) == pytest.approx((0.05, 0.76 / 3 - 0.15))
    # the same K twice is no calibration: the assumed split stays
    same = ka.calibrate(0.3, 3, points=[(3, 0.3)])
    assert same.source == ka.SOURCE_SPLIT and same.eps_tok == pytest.approx(0.1)
    # overhead falling with K is not physical: refused, the split is used and the note says why
    bad = ka.calibrate(0.3, 3, points=[(5, 0.2)])
    assert bad.source == ka.SOURCE_SPLIT and "refused" in bad.note and bad.eps_tok == pytest.approx(0.1)
    with pytest.raises(ValueError, match="two different K"):
        ka.fit_overhead([(3, 0.3)])


def test_mix_pools_tokens_and_steps_not_ratios():
    ov = Overhead(0.05, 0.1, GIVEN)
    chat = ka.advise_class("chat", [0.9, 0.9, 0.9], 3, ov)
    code = ka.advise_class("code", [0.9, 0.45, 0.225], 3, ov)
    mix = ka.advise_mix([(chat, 0.7), (code, 0.3)])
    r = rows(mix)
    # tau_mix = 1 / (0.7/tau_chat + 0.3/tau_code); at K' = 2: 1/(0.7/2.71 + 0.3/2.305)
    assert r[2].tau == pytest.approx(2.5743045539)
    assert r[2].speedup == pytest.approx(2.5743045539 / 1.25)
    assert r[5].speedup == pytest.approx(3.6491941213 / 1.55) and r[5].extrapolated
    # the share-weighted mean of class speedups (averaging ratios) overstates it
    assert r[5].speedup < 0.7 * rows(chat)[5].speedup + 0.3 * rows(code)[5].speedup - 0.2
    assert mix.best_k == 5 and chat.best_k == 5 and code.best_k == 2


def test_mix_at_measured_k_equals_pooled_counts():
    # chat: N = 1000, P = 900, 810, 729 (A = 2439); code: N = 2000, P = 1800, 900, 450 (A = 3150)
    ov = Overhead(0.0, 0.0, GIVEN)
    chat = ka.advise_class("chat", [0.9, 0.9, 0.9], 3, ov)
    code = ka.advise_class("code", [0.9, 0.5, 0.5], 3, ov)
    t_chat, t_code = 1000 + 2439, 2000 + 3150  # output tokens T_c = N_c + A_c
    mix = ka.advise_mix([(chat, t_chat), (code, t_code)])
    assert rows(mix)[3].tau == pytest.approx(1 + (2439 + 3150) / (1000 + 2000))


def test_mix_keeps_each_class_overhead_and_pools_step_time():
    # chat: p = 0.9 flat, eps(K) = 0.25 K / 3 (own eps_step 0.25 at K = 3); code: p = 0.8, 0.5, 0.5,
    # eps(K) = 0.1 K (0.30 at K = 3). Equal output tokens (shares 1:1).
    chat = ka.advise_class("chat", [0.9, 0.9, 0.9], 3, ka.split_overhead(0.25, 3))
    code = ka.advise_class("code", [0.8, 0.5, 0.5], 3, ka.split_overhead(0.30, 3))
    assert rows(chat)[3].eps == pytest.approx(0.25) and rows(code)[3].eps == pytest.approx(0.30)
    assert rows(chat)[3].speedup == pytest.approx(3.439 / 1.25) and rows(code)[3].speedup == pytest.approx(2.4 / 1.3)
    mix = ka.advise_mix([(chat, 1.0), (code, 1.0)])
    m3 = rows(mix)[3]
    # steps per token 1/3.439 and 1/2.4; step time (1/3.439) 1.25 + (1/2.4) 1.30 over steps (1/3.439 + 1/2.4)
    steps = 1 / 3.439 + 1 / 2.4
    assert m3.tau == pytest.approx(2 / steps)
    assert m3.eps == pytest.approx((1.25 / 3.439 + 1.30 / 2.4) / steps - 1)  # 0.905144 / 0.707449 - 1
    assert m3.eps == pytest.approx(0.2794485, abs=1e-6)
    # total output over total time: 2 / (1 / S_chat + 1 / S_code), never the borrowed eps of another row
    assert m3.speedup == pytest.approx(2 / (1.25 / 3.439 + 1.30 / 2.4))
    assert m3.speedup == pytest.approx(m3.tau / (1 + m3.eps))


def test_undefined_and_fallbacks():
    # a position no draft reached after a zero: u stays 0, tau defined
    zero = ka.advise_class("x", [0.5, 0.0, None], 3, Overhead(0.0, 0.0, GIVEN))
    assert rows(zero)[3].tau == pytest.approx(1.5) and rows(zero)[5].tau == pytest.approx(1.5)
    # p undefined while drafts are alive: tau from there on is null, and so is the best when nothing is defined
    gap = ka.advise_class("x", [None, 0.5], 2, Overhead(0.0, 0.0, GIVEN))
    assert all(r.tau is None and r.speedup is None for r in gap.rows) and gap.best_k is None and gap.gain is None
    # one usable position: flat extrapolation; positions with too few trials are left out of the fit
    fit = ka.fit_decay([0.9, 0.6, 0.3], trials=[1000, 900, 50], min_trials=200)
    assert fit.method == ka.FIT_LOG_LINEAR and fit.positions == (1, 2)
    one = ka.fit_decay([0.7, 0.0])
    assert one.method == ka.FIT_FLAT and one.p_at(3) == pytest.approx(0.7)
    assert ka.fit_decay([0.0, 0.0]).method == ka.FIT_NONE
    # a rising pooled curve is not extrapolated upward: the last usable p repeats
    rise = ka.fit_decay([0.6, 0.7, 0.8])
    assert rise.rising and rise.p_at(5) == pytest.approx(0.8)
    # K = 1 has no K - 1 candidate
    assert ka.candidates(1) == [1, 2, 3]


@pytest.mark.parametrize("call, match", [
    (lambda: ka.advise_class("x", [0.9, 0.9], 3, Overhead(0, 0, GIVEN)), "one conditional acceptance"),
    (lambda: ka.advise_class("x", [1.2], 1, Overhead(0, 0, GIVEN)), r"p_1 must be in \[0, 1\]"),
    (lambda: ka.advise_class("x", [math.nan], 1, Overhead(0, 0, GIVEN)), "finite"),
    (lambda: ka.advise_class("x", [0.5], 0, Overhead(0, 0, GIVEN)), "K must be an integer"),
    (lambda: ka.split_overhead(-0.1, 3), "eps must be >= 0"),
    (lambda: ka.split_overhead(0.1, 3, eps0_share=1.5), "share must be in"),
    (lambda: ka.advise_mix([]), "at least one class"),
])
def test_bad_inputs_raise_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_mix_refuses_different_k_and_zero_shares():
    ov = Overhead(0.0, 0.1, GIVEN)
    a = ka.advise_class("a", [0.9], 1, ov)
    b = ka.advise_class("b", [0.9, 0.9], 2, ov)
    with pytest.raises(ValueError, match="different K"):
        ka.advise_mix([(a, 1), (b, 1)])
    with pytest.raises(ValueError, match="not all 0"):
        ka.advise_mix([(a, 0)])
