"""by_concurrency end to end: a simulated pool's engine counters through the scrape path, its records (which
carry no running_requests) through POST /api/v1/requests. Each record takes the engine pool's band of the
minute it finished in (the pool of another class, `default`, serving both: the model's engine pool), so every
drafted record lands in band 1-8 with basis "pool", and each class's band sums are its records' sums."""

from __future__ import annotations

from tests.api.test_per_request_vs_sim import WHOLE, _run


def test_records_take_the_engine_pools_band(fresh_db_url: str) -> None:
    records, _summary, _rec, dist = _run(fresh_db_url, WHOLE, with_distribution=True)
    for cls in dist["classes"]:
        mine = [r for r in records if r["labels"]["traffic_class"] == cls["traffic_class"]
                and r["speculative_decoding"]["num_spec_steps"]]
        (band,) = cls["by_concurrency"]
        assert (band["band"], band["basis"], band["requests_by_basis"]) == ("1-8", "pool", {"record": 0,
                                                                                        "pool": len(mine)})
        assert band["requests"] == len(mine) and cls["requests_without_concurrency"] == 0
        assert band["accepted_tokens"] == sum(r["speculative_decoding"]["num_accepted_draft_tokens"] for r in mine)
        assert band["draft_tokens"] == sum(r["speculative_decoding"]["num_draft_tokens"] for r in mine)
        assert band["drafts"] == sum(r["speculative_decoding"]["num_spec_steps"] for r in mine)
        assert cls["load_stability"]["status"] == "no_data"  # nothing above 32 to compare
