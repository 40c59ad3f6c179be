import json

import pytest

from backend.domain.resolution import VLLM_ITL_BUCKETS, VLLM_TTFT_BUCKETS, Unresolved, advise, finer_bounds


def test_no_unresolved_verdict_no_advice():
    assert advise([]) == []


def test_itl_and_tpot_share_one_piece_of_advice_for_vllms_default_layout():
    found = [Unresolved("tpot", 0.99, 0.01, 0.025, VLLM_ITL_BUCKETS, "chat"),
             Unresolved("itl", 0.99, 0.025, 0.05, VLLM_ITL_BUCKETS, "mixed"),
             Unresolved("tpot", 0.9, 0.01, 0.025, VLLM_ITL_BUCKETS, "chat")]
    (a,) = advise(found)
    assert a.family_key == "inter_token_latency" and a.metrics == ("ITL", "TPOT") and a.default_layout
    assert a.buckets == ((0.01, 0.025), (0.025, 0.05))
    # 4 evenly spaced bounds inside (10, 25] and (25, 50] ms, every default bound kept
    assert a.bounds[:11] == (0.01, 0.013, 0.016, 0.019, 0.022, 0.025, 0.03, 0.035, 0.04, 0.045, 0.05)
    assert set(VLLM_ITL_BUCKETS) <= set(a.bounds) and len(a.bounds) == len(VLLM_ITL_BUCKETS) + 8
    assert a.flag.startswith("--custom-histogram-buckets '") and a.flag.endswith("'")
    assert json.loads(a.flag.split("'")[1]) == {"inter_token_latency": list(a.bounds)}
    assert "vLLM's default inter_token_latency layout ((10, 25] ms, (25, 50] ms)" in a.text
    assert "ITL and TPOT P90/P99 (classes chat, mixed) of spec" in a.text and "speculative and the baseline" in a.text
    assert "vllm:request_time_per_output_token_seconds" in a.text


def test_ttft_and_a_custom_layout():
    custom = (0.005, 0.02, 0.08)
    out = advise([Unresolved("ttft", 0.99, 0.1, 0.25, VLLM_TTFT_BUCKETS),
                  Unresolved("itl", 0.5, 0.005, 0.02, custom)])
    assert [a.family_key for a in out] == ["inter_token_latency", "time_to_first_token"]
    itl, ttft = out
    assert not itl.default_layout and "the pools' inter_token_latency layout" in itl.text
    assert itl.bounds == (0.005, 0.008, 0.011, 0.014, 0.017, 0.02, 0.08)
    assert ttft.default_layout and "vllm:time_to_first_token_seconds" in ttft.text


def test_finer_bounds_from_zero_drop_non_positive():
    assert finer_bounds((0.01,), [(0.0, 0.01)]) == pytest.approx((0.002, 0.004, 0.006, 0.008, 0.01))
