"""The exposition looks like vLLM 0.33's: names, types, labels, bucket bounds, _created families."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from backend.sim.server import Simulator
from tests.sim.conftest import FIXTURES, REFERENCE, FakeClock
from tests.support.deadline import deadline

SAMPLE = FIXTURES / "vllm_metrics_sample.prom"
METRICS_MD = REFERENCE / "vllm-metrics.md"
SPEC_FAMILIES = {"vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                 "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_per_pos"}


def families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.fixture(scope="module")
def restart_sim() -> Simulator:
    clock = FakeClock()
    sim = Simulator("restart", seed=3, clock=clock)
    clock.advance(30)
    return sim


def documented_bounds() -> dict[str, list[float]]:
    """Finite `le` bounds per histogram family from the table in vllm-metrics.md §2."""
    out: dict[str, list[float]] = {}
    for line in METRICS_MD.read_text().splitlines():
        m = re.match(r"\| `(vllm:[a-z0-9_]+_seconds)` \| ([^|]+) \|", line)
        if not m:
            continue
        name, cell = m.groups()
        explicit = re.match(r"\s*([0-9., ]+)\((\d+)\)", cell)
        if explicit:
            vals = [float(x) for x in explicit.group(1).replace(" ", "").strip(",").split(",") if x]
            assert len(vals) == int(explicit.group(2))
            out[name] = vals
        elif "same 19 bounds" in cell:
            out[name] = out["vllm:inter_token_latency_seconds"]
        elif "same 21 bounds" in cell:
            out[name] = out["vllm:e2e_request_latency_seconds"]
    return out


def test_names_and_types_match_the_vllm_sample(restart_sim: Simulator) -> None:
    ours = {n: f.type for n, f in families(restart_sim.metrics().decode()).items()}
    theirs = {n: f.type for n, f in families(SAMPLE.read_text()).items()}
    # every family of the sample is emitted with the same type ...
    for name, typ in theirs.items():
        assert ours.get(name) == typ, name
    # ... and nothing vLLM does not have (num_preemptions is a real vLLM counter, absent from the excerpt)
    assert set(ours) - set(theirs) == {"vllm:num_preemptions", "vllm:num_preemptions_created"}


def test_bucket_bounds_match_the_reference(restart_sim: Simulator) -> None:
    expected = documented_bounds()
    assert set(expected) >= {"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                             "vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds"}
    fams = families(restart_sim.metrics().decode())
    sample = families(SAMPLE.read_text())
    for name in ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                 "vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds"):
        for fam in (fams[name], sample[name]):
            series: dict[tuple, list[float]] = {}
            for s in fam.samples:
                if s.name.endswith("_bucket"):
                    key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                    series.setdefault(key, []).append(float(s.labels["le"]))
            assert series
            for les in series.values():
                assert les[:-1] == expected[name], name
                assert les[-1] == float("inf")


def test_text_format_details(restart_sim: Simulator) -> None:
    text = restart_sim.metrics().decode()
    # labels in alphabetical order, floats as prometheus_client writes them
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        names = re.findall(r'([a-z_]+)="', line.split("} ")[0])
        assert names == sorted(names), line
        value = line.rsplit(" ", 1)[1]
        assert re.fullmatch(r"-?[0-9.]+(e[+-][0-9]+)?|\+Inf|NaN", value), line
        assert "." in value or "e" in value or value in ("+Inf", "NaN"), line
    assert 'le="1.0"' in text and 'le="+Inf"' in text
    # HELP and TYPE come before the samples of each family, _created families are gauges
    assert "# TYPE vllm:spec_decode_num_drafts_total counter" in text
    assert "# TYPE vllm:spec_decode_num_drafts_created gauge" in text
    assert "# TYPE vllm:inter_token_latency_seconds_created gauge" in text


def test_labels_fleet_vs_single_pool(restart_sim: Simulator) -> None:
    fleet = families(restart_sim.metrics().decode())
    for fam in fleet.values():
        for s in fam.samples:
            assert {"engine", "model_name", "traffic_class", "spec_mode"} <= set(s.labels), s
    single = families(restart_sim.metrics("code-eagle3").decode())
    engines = set()
    for fam in single.values():
        for s in fam.samples:
            assert "traffic_class" not in s.labels and "spec_mode" not in s.labels
            engines.add(s.labels["engine"])
    assert engines == {"0", "1"}  # engines: 2 -> one series set per engine
    # per-position series 0..K-1 (K discoverable from them)
    pos = {s.labels["position"] for s in single["vllm:spec_decode_num_accepted_tokens_per_pos"].samples
           if s.name.endswith("_total")}
    assert pos == {"0", "1", "2", "3", "4"}


def test_baseline_pool_has_no_spec_series(restart_sim: Simulator) -> None:
    fams = families(restart_sim.metrics("chat-off").decode())
    assert not SPEC_FAMILIES & set(fams)
    assert not any(n.startswith("vllm:spec_decode") for n in fams)
    assert "vllm:inter_token_latency_seconds" in fams
    fleet = families(restart_sim.metrics().decode())
    for name in SPEC_FAMILIES:
        assert all(s.labels["spec_mode"] != "off" for s in fleet[name].samples)


def test_spec_series_exist_at_zero_at_startup() -> None:
    clock = FakeClock()
    sim = Simulator("steady", seed=0, clock=clock)
    fams = families(sim.metrics("chat-eagle3").decode())
    per_pos = [s for s in fams["vllm:spec_decode_num_accepted_tokens_per_pos"].samples if s.name.endswith("_total")]
    assert [s.labels["position"] for s in per_pos] == ["0", "1", "2"]
    assert all(s.value == 0.0 for s in per_pos)
    created = [s.value for s in fams["vllm:spec_decode_num_drafts_created"].samples]
    assert created == [clock.t]


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_accepts_the_exposition(restart_sim: Simulator) -> None:
    """promtool only warns about ':' in names, as it does for real vLLM output (vllm-metrics.md §5)."""
    proc = subprocess.run(["promtool", "check", "metrics"], input=restart_sim.metrics(), capture_output=True,
                          check=False, timeout=deadline(300))
    out = (proc.stdout + proc.stderr).decode()
    problems = [line for line in out.splitlines() if line.strip() and "should not contain ':'" not in line]
    assert not problems, out
