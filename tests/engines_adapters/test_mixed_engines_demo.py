"""The `mixed-engines` demo scenario end to end: its simulated history through the collector code
(services.history.seed_history, the path `specwatch demo` seeds with), then the real API: three engines,
vLLM and llama.cpp exact, SGLang estimated; the fleet rows name their engine and keep SGLang's estimate apart."""

from __future__ import annotations

import time

import httpx
import pytest

from backend.config import Settings
from backend.services.history import seed_history
from tests.dashboard.browser import SERVICE_TOKENS, start_api
from tests.support import db as dbsupport
from tests.support.deadline import deadline
from tests.support.stack import factory_for


@pytest.fixture(scope="module")
def seeded(pg_admin_url: str, pg_template: str):
    name, url = dbsupport.clone(pg_admin_url, pg_template, prefix="specwatch_mixeng")
    s = Settings(_env_file=None, database_url=url)
    seed_history(factory_for(url), s, scenario="mixed-engines", seconds=900, end=time.time(), tick=1.0)
    yield url
    dbsupport.drop_database(pg_admin_url, name)


def test_mixed_engines_through_collection_and_api(seeded, tmp_path):
    api, url = start_api(seeded, tmp_path)
    try:
        headers = {"Authorization": f"Bearer {SERVICE_TOKENS[url]}"}
        get = lambda path, **p: httpx.get(f"{url}/api/v1{path}", params=p, headers=headers,
                                          timeout=deadline(120)).json()
        pools = [p for p in get("/pools")["pools"] if p["origin"] == "engine"]
        assert {p["engine"] for p in pools} == {"vllm", "llamacpp", "sglang"}
        for p in pools:
            flags = {f["figure"]: (f["exposed"], f["exact"]) for f in p["figures"]}
            if p["engine"] == "sglang":  # estimates from gauges, never counts; no drafts, no positions
                assert flags["acceptance_rate"] == flags["accept_length"] == (True, False), p
                assert flags["drafts"] == flags["accepted_per_pos"] == (False, None), p
            else:
                assert flags["acceptance_rate"] == flags["drafts"] == (True, True), p
        rows = {(r["model_name"], r["traffic_class"], r["spec_mode"]): r for r in get("/fleet", window="1h")["rows"]}
        llama = "meta-llama/Llama-3.1-8B-Instruct"
        vllm, sglang, llamacpp = (rows[(llama, "chat", m)] for m in ("eagle3", "eagle", "draft_model"))
        assert (vllm["engines"], sglang["engines"], llamacpp["engines"]) == (["vllm"], ["sglang"], ["llamacpp"])
        # the scenario's acceptance: vLLM r = 0.70 counted, SGLang r = 0.62 estimated (apart, never the count)
        assert vllm["acceptance_rate"] == pytest.approx(0.70, abs=0.03) and vllm["acceptance_rate_estimate"] is None
        assert sglang["acceptance_rate"] is None and sglang["drafts"] is None
        assert sglang["acceptance_rate_estimate"] == pytest.approx(0.62, abs=0.03)
        assert "spec_accept_length" in sglang["estimate_basis"]
        assert llamacpp["acceptance_rate"] is not None and llamacpp["acceptance_rate_estimate"] is None
    finally:
        api.stop()
