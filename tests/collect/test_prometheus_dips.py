"""Counter dips through a real Prometheus. With increase() every drop reads as a reset, so a dipping counter
would store the whole counter per bucket: where `_created` shows no restart, those buckets are refused
(counter_dip), and a real restart equals Prometheus's own increase(). From the raw samples (the default) a
dip is what the direct-scrape path makes of it: an increase of 0, flagged and kept; a real restart adds
the counter's new value and is counted."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from backend.config import Settings
from backend.prom.client import PromClient
from backend.services.collect import run_prometheus
from tests.support.hostile import ExpositionServer, exposition, wait_for
from tests.support.stack import cursor_end, fact_rows, factory_for

pytestmark = pytest.mark.prometheus
WIDTH = 5


@pytest.mark.parametrize("mode", ["raw", "increase"])
def test_dipping_counter_and_a_real_reset(prometheus_factory, fresh_db_url, mode):
    with ExpositionServer() as srv:
        # every scrape 0.01 % lower, same _created: no restart ever happened
        srv.route("/dip", lambda k: exposition("model-dip", 10_000 - k, created=1000.0, klass="chat",
                                               mode="eagle3"))
        # only the generated-tokens counter dips: it alone is refused, the spec-decode counters are stored
        srv.route("/gen", lambda k: exposition("model-gen", k, created=1000.0, generation=10_000 - k,
                                               klass="chat", mode="eagle3"))
        # a real restart at the 8th scrape: the counters start again and _created changes
        srv.route("/reset", lambda k: exposition("model-reset", 50 + k if k < 8 else k - 7,
                                                 created=1000.0 if k < 8 else 2000.0, klass="chat", mode="eagle3"))
        prom = prometheus_factory([{"target": srv.url + "/dip"}, {"target": srv.url + "/reset"},
                                   {"target": srv.url + "/gen"}],
                                  scrape_interval="1s")
        wait_for(lambda: srv.requests("/reset") >= 8 + 4 * WIDTH and srv.requests("/dip") >= 4 * WIDTH
                 and srv.requests("/gen") >= 4 * WIDTH, timeout=180)
        s = Settings(database_url=fresh_db_url, prometheus_url=prom.url, bucket_seconds=WIDTH, settle_seconds=2,
                     initial_lookback_seconds=120, prometheus_increases=mode)
        run_prometheus(factory_for(fresh_db_url), PromClient(prom.url), s, now=datetime.now(UTC))

    rows = fact_rows(fresh_db_url)
    dip = {k[3]: v for k, v in rows.items() if k[0] == "model-dip"}
    reset = {k[3]: v for k, v in rows.items() if k[0] == "model-reset"}
    gen = {k[3]: v for k, v in rows.items() if k[0] == "model-gen"}
    with factory_for(fresh_db_url)() as session:
        flagged = session.execute(text("select model_name, detail from rejections where rule = 'counter_dip'")).all()
    assert {m for m, _ in flagged} == {"model-dip", "model-gen"}
    assert any(v[0] == pytest.approx(100.0 * WIDTH, rel=0.5) for v in gen.values())
    if mode == "increase":
        # the dipping pool: neither its drafts nor its generated tokens (which dip too) are ever stored (all it
        # exposes, so no row at all; its rejection rows are below)
        assert all(v[0] is None and v[8] is None for v in dip.values())
        # only the generated tokens dip: they are refused wherever they dipped, the spec-decode counters stored
        assert gen and all(v[8] is None for v in gen.values())
        # the real reset: stored drafts equal Prometheus's increase() in every bucket (changes() misses a
        # restart whose two samples straddle a bucket edge, as increase() misses its drop: at most one counted)
        assert sum(v[-1] or 0 for v in reset.values()) <= 1
        assert any(v[0] is not None for v in reset.values())
        for b, v in reset.items():
            res = prom.query(f'sum(increase(vllm:spec_decode_num_drafts_total{{model_name="model-reset"}}'
                             f'[{WIDTH}s]))', at=b + WIDTH)
            assert v[0] == pytest.approx(float(res[0]["value"][1]), rel=1e-9), b
        assert all(d.startswith("refused: increase() read each dip as a reset") for _, d in flagged)
        return
    # raw samples: a dip adds 0 (growth is measured from the highest value seen), flagged and kept
    assert dip and all(v[0] == 0.0 and v[8] == 0.0 for v in dip.values())
    assert gen and all(v[8] == 0.0 for v in gen.values())
    assert all(d.startswith("flagged, kept (increase 0 for the dip)") for _, d in flagged)
    # the real reset: one restart, and the stored drafts add up to the counter's own change across it
    end = cursor_end(fresh_db_url)
    (series,) = prom.query(f'vllm:spec_decode_num_drafts_total{{model_name="model-reset"}}[{int(end) - 1}s]',
                           at=end)
    values = [float(v) for t, v in series["values"] if float(t) > min(reset)]
    earlier = [float(v) for t, v in series["values"] if float(t) <= min(reset)]
    before = earlier[-1] if earlier else values.pop(0)  # the first sample ever counts from the next one on
    drop = next(i for i in range(1, len(values)) if values[i] < values[i - 1])
    assert sum(v[0] for v in reset.values()) == (values[drop - 1] - before) + values[-1]
    assert sum(v[-1] or 0 for v in reset.values()) == 1
