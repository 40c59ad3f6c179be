"""SGLang observes ITL once per token, vLLM once per engine step: eps_step (a ratio of step times) and the
check of tau / (1 + eps_step) against the measured speedup are refused wherever a pool on either side is
SGLang's, "not comparable"; the measured speedup from TPOT stays. Hand-computed known answers."""

from __future__ import annotations

import math

import pytest

from backend.config import Settings
from backend.domain.engines import engine
from backend.domain.step_overhead import (
    UNDETERMINED,
    LatencySums,
    itl_not_per_step,
    speedup_check,
    step_overhead,
)
from backend.services.operating_point import operating_point
from backend.services.totals import Totals


def test_the_engine_tables_say_what_one_itl_observation_is():
    assert (engine("vllm").itl_per, engine("sglang").itl_per, engine("llamacpp").itl_per) == ("step", "token", None)


def test_step_overhead_is_undefined_where_a_side_observes_itl_per_token():
    # 12 ms / 10 ms - 1 = 0.2, for vLLM on both sides (and when no engine is named: the default, vLLM)
    assert math.isclose(step_overhead(0.012, 0.010), 0.2)
    assert math.isclose(step_overhead(0.012, 0.010, engines=("vllm", "vllm", None)), 0.2)
    assert step_overhead(0.012, 0.010, engines=("sglang",)) is None
    assert step_overhead(0.012, 0.010, engines=("vllm", "sglang")) is None  # a SGLang baseline: the same
    assert itl_not_per_step(["vllm", "llamacpp", None]) is None  # llama.cpp has no ITL: nothing to refuse
    why = itl_not_per_step(["sglang", "vllm"])
    assert why is not None and why.startswith("not comparable: SGLang observes") and "once per token" in why
    with pytest.raises(ValueError, match="unknown engine"):
        itl_not_per_step(["tgi"])


def _bins(itl: float, tpot: float, n: int = 5) -> list[LatencySums]:
    return [LatencySums(itl * 100, 100.0, tpot * 10, 10.0) for _ in range(n)]


def test_the_speedup_check_says_not_comparable_and_keeps_the_tpot_speedup():
    spec, base = _bins(0.012, 0.005), _bins(0.010, 0.010)
    vllm = speedup_check(2.4, spec, base)
    assert vllm.estimated == pytest.approx(2.4 / 1.2) and vllm.measured == pytest.approx(2.0)
    sglang = speedup_check(2.4, spec, base, engines=("sglang", "sglang"))
    assert sglang.verdict == UNDETERMINED
    assert sglang.estimated is None and sglang.ratio is None and sglang.bins == 0
    assert sglang.measured == pytest.approx(2.0)  # TPOT 10 ms / 5 ms: still measured
    assert "not comparable" in sglang.reason and "SGLang" in sglang.reason


def test_operating_point_of_an_sglang_pool_uses_the_band_default_and_says_why():
    """Band "1-8" (4 running): the measured eps_step of vLLM pools is 0.012 / 0.010 - 1 = 0.2; SGLang's ITL
    gives none, so eps_step is the band default 0.1, the estimate 2.4 / 1.1, the TPOT speedup 2.0."""
    s = Settings(_env_file=None)
    spec = {"1-8": Totals(itl_sum=1.2, itl_count=100.0, tpot_sum=0.05, tpot_count=10.0)}
    base = {"1-8": Totals(itl_sum=1.0, itl_count=100.0, tpot_sum=0.10, tpot_count=10.0)}
    kw = {"tau": 2.4, "seed_alpha": 0.7, "k": 3, "running_mean": 4.0, "spec_bands": spec, "base_bands": base,
          "settings": s}
    vllm = operating_point(**kw, engines=("vllm", "vllm"))
    assert (vllm.eps_step_source, vllm.eps_step) == ("measured", pytest.approx(0.2))
    sg = operating_point(**kw, engines=("sglang", "sglang"))
    assert (sg.band, sg.eps_step_source, sg.eps_step) == ("1-8", "default-for-band", 0.1)
    assert sg.estimated_speedup == pytest.approx(2.4 / 1.1)
    assert sg.measured_speedup == pytest.approx(2.0)
    assert sg.check is not None and sg.check.verdict == UNDETERMINED and "not comparable" in sg.check.reason
    assert sg.check.measured == pytest.approx(2.0) and sg.check.estimated is None
