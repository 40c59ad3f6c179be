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


def test_demo_scrape_targets_collect_every_engine(fresh_db_url):
    """The demo's live targets (one per simulated pool): a llama.cpp pool's target names its model (llama-server's
    series carry none) and every target declares its engine, so live collection stores all three engines and
    refuses none."""
    from sqlalchemy import text

    from backend.cli.demo import scrape_targets
    from backend.sim.server import start_in_thread
    from tests.collect.test_scrape_hardening import WIDTH, cycle, rejections

    with start_in_thread("mixed-engines", start=time.time()) as sim:
        targets = scrape_targets(sim.url)
        by = {t["url"].rsplit("/", 2)[-2]: t for t in targets}
        assert by["llama-chat-llamacpp-draft"]["labels"]["model_name"] == "meta-llama/Llama-3.1-8B-Instruct"
        assert (by["llama-chat-llamacpp-draft"]["engine"], by["llama-chat-sglang-eagle"]["engine"],
                by["llama-chat-vllm-eagle3"]["engine"]) == ("llamacpp", "sglang", "vllm")
        assert "model_name" not in by["llama-chat-vllm-eagle3"]["labels"]  # vLLM's series name their model
        s = Settings(_env_file=None, database_url=fresh_db_url, source="scrape", bucket_seconds=WIDTH,
                     settle_seconds=0, scrape_interval_seconds=1, initial_lookback_seconds=600, scrape_targets=targets)
        cycle(fresh_db_url, s, scrapes=3)
    assert rejections(fresh_db_url) == []
    with factory_for(fresh_db_url)() as session:
        engines = set(session.execute(text("select distinct engine from pools")).scalars())
    assert engines == {"vllm", "llamacpp", "sglang"}
