"""The simulator at the reference fleet size (400 pools): every pool advances and is exposed, counters only
grow, spec metrics only where decoding is speculative. How fast it does so is `make bench` (sim)."""

from __future__ import annotations

from collections import defaultdict

from backend.scrape.parse import parse
from backend.sim.exposition import render
from backend.sim.fleet import FleetSim
from backend.sim.scenario import parse_scenario

N_POOLS = 400


def big_fleet(n_pools: int, tick: float):
    """n_pools pools of one model, half EAGLE-3 (k 3..5), half baseline, concurrency 8..63."""
    pools = []
    for i in range(n_pools):
        spec = i % 2 == 0
        pool = {"id": f"p{i}", "model": "meta-llama/Llama-3.1-8B-Instruct", "traffic_class": f"class-{i // 2}",
                "spec_mode": "eagle3" if spec else "off", "concurrency": 8 + (i * 7) % 56}
        if spec:
            pool.update(k=3 + (i // 2) % 3, acceptance={"mode": "iid", "a": 0.8})
        pools.append(pool)
    return parse_scenario({"pools": pools, "tick": tick})


def totals(fleet: FleetSim) -> dict[str, dict[tuple[str, str], float]]:
    """{metric: {(traffic_class, spec_mode): value}} of every counter in the fleet's exposition."""
    body = render(fleet.pools, fleet.states, created_wall=[0.0] * len(fleet.pools)).decode()
    out: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    for name, labels, value in parse(body).samples:
        if name.endswith("_total"):
            out[name][(labels["traffic_class"], labels["spec_mode"])] = value
    return out


def test_400_pools_all_advance_and_are_exposed_with_growing_counters() -> None:
    fleet = FleetSim(big_fleet(N_POOLS, 1.0), seed=0)
    fleet.advance_to(2)
    before = totals(fleet)
    fleet.advance_to(12)
    after = totals(fleet)
    assert fleet.n == 12

    generated = after["vllm:generation_tokens_total"]
    assert len(generated) == N_POOLS  # every pool exposed, one series each
    assert all(v > before["vllm:generation_tokens_total"][pool] for pool, v in generated.items())

    drafts = after["vllm:spec_decode_num_drafts_total"]
    spec = {(f"class-{i // 2}", "eagle3") for i in range(0, N_POOLS, 2)}
    assert set(drafts) == spec  # spec-decode counters for the EAGLE-3 pools only
    for name in ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
                 "vllm:spec_decode_num_accepted_tokens_total"):
        assert all(after[name][p] >= before[name][p] for p in spec), name
    assert all(drafts[p] > before["vllm:spec_decode_num_drafts_total"][p] for p in spec)
    for pool in spec:  # accepted <= drafted, and with a = 0.8 most drafts are accepted in part
        assert 0 < after["vllm:spec_decode_num_accepted_tokens_total"][pool] \
            <= after["vllm:spec_decode_num_draft_tokens_total"][pool]
