"""The SGLang gauge estimate (backend.domain.engines.estimate): hand-computed known answers."""

from __future__ import annotations

import pytest

from backend.domain.engines.estimate import EstimateParts, bucket_estimates, interval_parts


def test_accept_length_is_the_token_weighted_harmonic_mean():
    # 100 tokens at τ = 2 (50 steps), then 300 at τ = 3 (100 steps): 400 tokens in 150 steps
    parts = EstimateParts()
    parts.add(interval_parts(100, 2.0, None))
    parts.add(interval_parts(300, 3.0, None))
    assert parts.weight_tokens == 400
    assert parts.verify_steps == pytest.approx(150)
    assert parts.accept_length == pytest.approx(400 / 150)  # 2.6667, not the arithmetic 2.75
    assert parts.acceptance_rate is None  # no rate gauge: no draft-token estimate
    assert parts.accepted_tokens == 0 and parts.draft_tokens == 0


def test_acceptance_is_accepted_over_accepted_per_rate():
    # 100 tokens at τ = 2, r = 0.5: 50 accepted of 100 drafted; 300 at τ = 3, r = 0.8: 200 of 250
    parts = EstimateParts()
    parts.add(interval_parts(100, 2.0, 0.5))
    parts.add(interval_parts(300, 3.0, 0.8))
    assert parts.accepted_tokens == pytest.approx(250)
    assert parts.draft_tokens == pytest.approx(350)
    assert parts.acceptance_rate == pytest.approx(250 / 350)


def test_unusable_readings_add_nothing():
    assert interval_parts(100, None, 0.5) is None
    assert interval_parts(100, 0.0, 0.5) is None  # SGLang's 0: no speculative step in its log interval
    assert interval_parts(100, 0.5, 0.5) is None
    assert interval_parts(100, float("nan"), 0.5) is None
    only_length = interval_parts(100, 2.0, 0.0)
    assert only_length.verify_steps == 50 and only_length.draft_tokens == 0


def test_bucket_estimates_weigh_each_scrape_interval_by_its_counter_increase():
    # width 60; scrapes at 10, 30, 50 (bucket 0), 70 (bucket 60); a restart at 130 (bucket 120)
    points = [(10.0, 1000.0, 9.0, 0.9),   # the first sample: no interval before it
              (30.0, 1100.0, 2.0, 0.5),   # +100 at τ 2: 50 steps, 50 accepted, 100 drafted
              (50.0, 1400.0, 3.0, 0.8),   # +300 at τ 3: 100 steps, 200 accepted, 250 drafted
              (70.0, 1500.0, 4.0, None),  # +100 at τ 4: 25 steps, no rate
              (130.0, 40.0, 2.0, 0.25),   # a drop: +40 at τ 2: 20 steps, 20 accepted, 80 drafted
              (400.0, 140.0, 2.0, 0.5)]   # after a gap longer than max_gap: nothing
    got = bucket_estimates(reversed(points), width=60, max_gap=90)
    assert set(got) == {0, 60, 120}
    assert (got[0].weight_tokens, got[0].verify_steps) == (400, 150)
    assert (got[0].accepted_tokens, got[0].draft_tokens) == (250, 350)
    assert (got[60].weight_tokens, got[60].verify_steps, got[60].draft_tokens) == (100, 25, 0)
    assert (got[120].weight_tokens, got[120].verify_steps, got[120].accepted_tokens, got[120].draft_tokens) \
        == (40, 20, 20, 80)
    assert bucket_estimates(points, width=60, max_gap=90, first_bucket=60, last_bucket=60).keys() == {60}


def test_figure_bases_say_exact_or_estimated_per_engine():
    from backend.domain.engines import FIGURES, figure_basis
    from backend.domain.engines.estimate import ESTIMATE_BASIS
    for figure in FIGURES:
        assert figure_basis("vllm", figure).exact is True
        assert figure_basis("vllm", figure).estimate_basis is None
        assert figure_basis("llamacpp", figure).exact is True
    assert "spec_decode_num_drafts_total" in figure_basis("llamacpp", "accept_length").note
    assert figure_basis("llamacpp", "acceptance_rate").note is None
    for figure in ("acceptance_rate", "accept_length", "draft_tokens", "accepted_tokens"):
        basis = figure_basis("sglang", figure)
        assert basis.exact is False and basis.estimate_basis == ESTIMATE_BASIS
        assert "weighted by its generated tokens" in basis.estimate_basis
    assert figure_basis("sglang", "drafts") is None and figure_basis("sglang", "accepted_per_pos") is None
    with pytest.raises(ValueError, match="unknown engine 'tgi'"):
        figure_basis("tgi", "drafts")
