"""Older vLLM metric names through a real Prometheus: a target of the 0.8.5 – 0.10.1 line (ITL only under
`vllm:time_per_output_token_seconds`) and one of 0.11 (ITL under both names, the same observations), scraped by
Prometheus and collected from it in both modes (raw samples and increase()). Each stores its ITL once: the
count of the minute's engine steps, never the two names added up.

The targets serve the release-line fixtures (tests/fixtures/vllm-*-spec.prom) with every value multiplied by
the scrape number, so their ITL count stays 1.04 x the drafts counter at every sample, whatever Prometheus's
timing: the stored ITL count must be 1.04 x the stored drafts in every bucket (2.08 x if both names were
summed, none at all if the older name were not read)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from backend.config import Settings
from backend.prom.client import PromClient
from backend.services.collect import run_prometheus
from tests.support.hostile import ExpositionServer, wait_for
from tests.support.make_vllm_fixtures import served
from tests.support.paths import FIXTURES
from tests.support.stack import fact_rows, factory_for

pytestmark = pytest.mark.prometheus
WIDTH = 5
ITL_PER_DRAFT = 104 / 100  # the fixtures' engine steps per draft (tests/support/make_vllm_fixtures.py)
TPOT_PER_DRAFT = 10 / 100


@pytest.mark.parametrize("mode", ["raw", "increase"])
def test_older_and_both_names_are_stored_once(prometheus_factory, fresh_db_url, mode):
    old, both = "vllm-0.10.1-spec.prom", "vllm-0.11.0-spec.prom"
    assert "vllm:inter_token_latency_seconds" not in (FIXTURES / old).read_text()
    assert "vllm:time_per_output_token_seconds" in (FIXTURES / both).read_text()
    with ExpositionServer() as srv:
        srv.route("/old", lambda n: served(old, "m-old", n + 1))
        srv.route("/both", lambda n: served(both, "m-both", n + 1))
        pool = {"traffic_class": "chat", "spec_mode": "eagle3"}
        prom = prometheus_factory([{"target": srv.url + "/old", "labels": pool},
                                   {"target": srv.url + "/both", "labels": pool}], scrape_interval="1s")
        wait_for(lambda: min(srv.requests("/old"), srv.requests("/both")) >= 4 * WIDTH, timeout=180)
        s = Settings(database_url=fresh_db_url, prometheus_url=prom.url, bucket_seconds=WIDTH, settle_seconds=2,
                     initial_lookback_seconds=120, prometheus_increases=mode)
        run_prometheus(factory_for(fresh_db_url), PromClient(prom.url), s, now=datetime.now(UTC))

    rows = fact_rows(fresh_db_url, "drafts, itl_count, tpot_count")
    by_model: dict[str, list[tuple]] = {}
    for (model, _klass, _mode, bucket), values in sorted(rows.items()):
        by_model.setdefault(model, []).append((bucket, *values))
    assert set(by_model) == {"m-old", "m-both"}
    for model, buckets in by_model.items():
        counted = [(b, d, itl, tpot) for b, d, itl, tpot in buckets if d]
        assert len(counted) >= 2, (model, buckets)
        for b, drafts, itl, tpot in counted:
            assert itl == pytest.approx(ITL_PER_DRAFT * drafts, rel=1e-9), (model, b, drafts, itl)
            if model == "m-old":
                assert tpot is None, (b, tpot)  # no TPOT before 0.11
            else:
                assert tpot == pytest.approx(TPOT_PER_DRAFT * drafts, rel=1e-9), (b, drafts, tpot)
