"""The HTTP server on a real socket: /metrics, /pools/<id>/metrics, /truth?at=, /scenario, /healthz."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from backend.sim.server import SimHandle, start_in_thread
from tests.sim.conftest import START, FakeClock
from tests.support.deadline import deadline


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=deadline(120)) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.fixture
def served() -> Iterator[tuple[SimHandle, FakeClock]]:
    clock = FakeClock()
    handle = start_in_thread("restart", port=0, seed=1, clock=clock)
    try:
        yield handle, clock
    finally:
        handle.stop()


def test_metrics_endpoint(served) -> None:
    handle, clock = served
    clock.advance(12.5)
    status, headers, body = get(f"{handle.url}/metrics")
    assert status == 200
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    names = {f.name for f in text_string_to_metric_families(body.decode())}
    assert "vllm:spec_decode_num_accepted_tokens_per_pos" in names
    classes = {s.labels["traffic_class"] for f in text_string_to_metric_families(body.decode()) for s in f.samples}
    assert classes == {"chat", "code"}


def test_pool_endpoint(served) -> None:
    handle, clock = served
    clock.advance(5)
    status, headers, body = get(f"{handle.url}/pools/chat-eagle3/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = body.decode()
    assert "traffic_class" not in text and "spec_mode" not in text
    assert 'vllm:spec_decode_num_drafts_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"}' in text
    status, _, body = get(f"{handle.url}/pools/nope/metrics")
    assert status == 404 and "unknown pool" in json.loads(body)["error"]


def test_truth_endpoint(served) -> None:
    handle, clock = served
    clock.advance(60)
    status, _, body = get(f"{handle.url}/truth")
    assert status == 200
    now = json.loads(body)
    assert now["ticks"] == 600 and now["at"] == pytest.approx(START + 60)
    ids = [p["pool_id"] for p in now["pools"]]
    assert ids == ["chat-eagle3", "chat-off", "code-eagle3"]
    status, _, body = get(f"{handle.url}/truth?at={START + 30.05}")
    past = json.loads(body)
    assert status == 200 and past["ticks"] == 300
    chat_now, chat_past = now["pools"][0]["counters"], past["pools"][0]["counters"]
    assert 0 < chat_past["drafts"] < chat_now["drafts"]
    assert set(chat_past) >= {"drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos", "generation_tokens",
                              "finished_requests", "itl", "tpot", "ttft"}
    assert chat_past["itl"]["bounds"][-1] == "+Inf"
    # errors: in the future, before the start, not a number
    assert get(f"{handle.url}/truth?at={START + 600}")[0] == 422
    status, _, body = get(f"{handle.url}/truth?at={START - 100}")
    assert status == 404 and "before the simulator started" in json.loads(body)["error"]
    assert get(f"{handle.url}/truth?at=yesterday")[0] == 422


def test_healthz_scenario_and_unknown(served) -> None:
    handle, _ = served
    status, _, body = get(f"{handle.url}/healthz")
    assert status == 200 and body.strip() == b"ok"
    status, _, body = get(f"{handle.url}/scenario")
    doc = json.loads(body)
    assert status == 200 and doc["name"] == "restart"
    assert {p["pool_id"]: p["k"] for p in doc["pools"]} == {"chat-eagle3": 3, "chat-off": None, "code-eagle3": 5}
    assert doc["source"]["events"][0]["every"] == 120
    assert get(f"{handle.url}/nope")[0] == 404


def test_real_clock_moves() -> None:
    with start_in_thread("steady", port=0, seed=0, tick=0.05) as handle:
        time.sleep(0.3)
        _, _, body = get(f"{handle.url}/truth")
        first = json.loads(body)
        time.sleep(0.3)
        _, _, body = get(f"{handle.url}/truth")
        second = json.loads(body)
    assert second["ticks"] > first["ticks"] > 0
    assert second["pools"][0]["counters"]["drafts"] > first["pools"][0]["counters"]["drafts"]


def test_truth_for_selected_pools(served) -> None:
    handle, clock = served
    clock.advance(20)
    status, _, body = get(f"{handle.url}/truth?at={START + 10}&pool=code-eagle3")
    doc = json.loads(body)
    assert status == 200 and [p["pool_id"] for p in doc["pools"]] == ["code-eagle3"]
    full = json.loads(get(f"{handle.url}/truth?at={START + 10}")[2])
    assert full["pools"][2] == doc["pools"][0]
    status, _, body = get(f"{handle.url}/truth?pool=nope")
    assert status == 404 and "unknown pool" in json.loads(body)["error"]
