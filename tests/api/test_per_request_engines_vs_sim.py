"""Seeded history of a fleet of vLLM, SGLang and llama.cpp pools: each pool's per-request records, read from its
engine's response shape, are stored exactly (the sums of what each engine reports equal the simulated
requests' counts; what it does not report is NULL) in a records pool of one engine each."""

from __future__ import annotations

from sqlalchemy import text

from backend.config import Settings
from backend.db.session import session_scope
from backend.services.history import seed_history
from backend.sim.server import Simulator
from tests.support.stack import factory_for

END = 1_796_040_000
SECONDS = 300
SCRAPE = 15.0
# requests run from 30 s to ~90 s of simulated time, well inside the seeded span: all of them finish in it
POOL = {"model": "m1", "traffic_class": "chat", "concurrency": {"points": [[0, 0], [30, 4], [90, 0]], "interp": "step"},
        "output_len": {"mean": 60, "sigma": 0.4, "max": 300}}
FLEET = {"name": "three-engines", "tick": 0.1, "pools": [
    {**POOL, "id": f"p-{engine}", "engine": engine, "spec_mode": mode, "k": k,
     "acceptance": {"mode": "rate", "r": r},
     "per_request": {"classes": [{"name": "chat", "share": 1, "acceptance": {"mode": "rate", "r": r}}]}}
    for engine, mode, k, r in (("vllm", "eagle3", 3, 0.7), ("sglang", "eagle", 4, 0.6),
                               ("llamacpp", "draft_model", 6, 0.4))]}


def test_seeded_records_of_three_engines_are_exact(fresh_db_url: str) -> None:
    s = Settings(_env_file=None, database_url=fresh_db_url, bucket_seconds=60, stale_after_seconds=10**9)
    seed_history(factory_for(fresh_db_url), s, scenario=FLEET, seconds=SECONDS, end=END, seed=5,
                 scrape_interval=SCRAPE)
    # the same simulator (scenario, seed, start), run to the end: the requests it finished
    sim = Simulator(FLEET, seed=5, clock=lambda: float(END), history_seconds=0, start=END - SECONDS - SCRAPE)
    sim.sync()
    raw = sim.fleet.take_requests()
    with session_scope(factory_for(fresh_db_url)) as session:
        stored = {e: row for e, *row in session.execute(text(
            "SELECT engine, count(*), sum(steps), sum(draft_tokens), sum(accepted), sum(output_tokens), "
            "count(steps), count(histogram) FROM request_records GROUP BY engine"))}
        kinds = dict(session.execute(text(
            "SELECT p.spec_mode, e.engine FROM request_pool_engines e JOIN pools p ON p.id = e.pool_id")).all())
    assert kinds == {"eagle3": "vllm", "eagle": "sglang", "draft_model": "llamacpp"}
    for engine in ("vllm", "sglang", "llamacpp"):
        mine = [r for r in raw if r["server"] == engine]
        if engine == "llamacpp":  # llama-server sends no draft counts for a request that drafted nothing
            mine = [r for r in mine if sum(r["histogram"])]
        steps = sum(sum(r["histogram"]) for r in mine)
        accepted = sum(j * h for r in mine for j, h in enumerate(r["histogram"]))
        drafted = sum(r["k"] * sum(r["histogram"]) for r in mine)
        n, s_steps, s_drafted, s_acc, s_out, n_steps, n_hist = stored[engine]
        assert (n, s_acc, s_drafted, s_out) == (len(mine), accepted, drafted, sum(r["output_tokens"] for r in mine))
        assert n > 20 and accepted > 0
        if engine == "llamacpp":
            assert (s_steps, n_steps, n_hist) == (None, 0, 0)  # no drafts, no histogram: NULL, never 0
        else:
            assert (s_steps, n_steps) == (steps, n)
            assert n_hist == (n if engine == "vllm" else 0)
