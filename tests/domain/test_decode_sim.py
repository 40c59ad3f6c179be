import pytest

from backend.domain.decode_sim import simulate_grid


def _cell(result, alpha, k, eps=0.1):
    return next(c for c in result.cells if c.alpha == alpha and c.k == k and c.eps == eps)


def test_grid_shape_and_model_values():
    r = simulate_grid([0.4, 0.7], [1, 5], [0.1], seed=1)
    assert [(c.alpha, c.k) for c in r.cells] == [(0.4, 1), (0.4, 5), (0.7, 1), (0.7, 5)]
    c = _cell(r, 0.7, 5)
    # alpha is vLLM's rate r at K: r = 0.7 at K = 5 -> a = 0.88338, tau = 4.5, S = 4.5/1.1
    assert c.alpha_kind == "rate"
    assert c.per_token_a == pytest.approx(0.883379831226, abs=1e-9)
    assert c.acceptance_rate == pytest.approx(0.7, abs=1e-12)
    assert c.tokens_per_step_model == pytest.approx(4.5, abs=1e-9)
    assert c.speedup_model == pytest.approx(4.5 / 1.1, abs=1e-9)
    assert c.break_even_rate == pytest.approx(0.02)
    assert c.margin_rate == pytest.approx(0.68)
    assert c.net_positive


def test_monte_carlo_matches_the_model():
    r = simulate_grid([0.4, 0.55, 0.7], [1, 3, 5], [0.1], seed=3, n_requests=3000)
    for c in r.cells:
        assert c.tokens_per_step_sim == pytest.approx(c.tokens_per_step_model, rel=0.01)
        # the simulated speedup is slightly below the model (overshoot of the last step is discarded)
        assert c.speedup_model * 0.97 < c.speedup_sim < c.speedup_model * 1.005


def test_per_token_alpha_kind():
    r = simulate_grid([0.7], [5], [0.1], alpha_kind="per-token", seed=0)
    c = r.cells[0]
    assert c.per_token_a == 0.7
    assert c.tokens_per_step_model == pytest.approx(2.94117, abs=1e-9)
    assert c.acceptance_rate == pytest.approx(0.388234, abs=1e-9)


def test_extremes_and_net_loss():
    r = simulate_grid([0.0, 1.0], [3], [0.5], seed=0)
    zero, one = r.cells
    assert zero.tokens_per_step_sim == 1.0 and zero.speedup_sim == pytest.approx(1 / 1.5)
    assert not zero.net_positive and zero.margin_rate < 0
    assert one.tokens_per_step_model == 4.0 and one.speedup_model == pytest.approx(4 / 1.5)
    big_eps = simulate_grid([0.5], [2], [2.5], seed=0).cells[0]
    assert big_eps.break_even_per_token is None  # eps > K: no per-token a breaks even
    assert big_eps.break_even_rate == pytest.approx(1.25)


def test_tail_latency_with_and_without_speculation():
    r = simulate_grid([0.55], [5], [0.1], seed=2, jitter=0.3, t_base=0.02)
    c = r.cells[0]
    assert c.base_p50 == pytest.approx(0.02, rel=0.02)
    assert c.spec_p50 < c.base_p50 and c.spec_p99 < c.base_p99
    assert c.spec_p99 > c.spec_p50 and c.base_p99 > c.base_p50
    # spec per-token latency varies more across requests than baseline (random acceptance)
    assert c.spec_p99 / c.spec_p50 > c.base_p99 / c.base_p50
    no_jitter = simulate_grid([0.55], [5], [0.1], seed=2).cells[0]
    assert no_jitter.base_p50 == no_jitter.base_p99 == pytest.approx(0.02)


def test_deterministic_and_cells_independent_of_grid():
    a = simulate_grid([0.4, 0.7], [3], [0.1], seed=9, jitter=0.2)
    b = simulate_grid([0.7], [3], [0.1], seed=9, jitter=0.2)
    assert _cell(a, 0.7, 3) == b.cells[0]
    c = simulate_grid([0.7], [3], [0.1], seed=10, jitter=0.2)
    assert c.cells[0].spec_p99 != b.cells[0].spec_p99
    assert a.to_dict()["params"]["seed"] == 9 and len(a.to_dict()["cells"]) == 2


@pytest.mark.parametrize("kwargs", [{"alphas": [1.2], "ks": [3]}, {"alphas": [0.5], "ks": [0]},
                                    {"alphas": [0.5], "ks": [3], "eps_values": [-1.0]}, {"alphas": [], "ks": [3]},
                                    {"alphas": [0.5], "ks": [3], "alpha_kind": "alpha"},
                                    {"alphas": [0.5], "ks": [3], "n_requests": 1}, {"alphas": [0.5], "ks": [3], "seed": -1}])
def test_invalid_input(kwargs):
    with pytest.raises(ValueError):
        simulate_grid(**kwargs)
