"""The Prometheus path's dip check covers every counter it stores: a dip in one counter refuses that
counter's increase (all the spec-decode counters together, whose ratios only hold together) and keeps the
rest of the bucket. The query asks it of every stored counter in one request."""

from __future__ import annotations

import pytest

from backend.domain.families import FAMILIES
from backend.domain.quality import DIPS_REFUSED, SPEC_FIELDS
from backend.prom.assemble import assemble
from backend.prom.client import SeriesPoints
from backend.prom.queries import DIP_LABEL, PoolLabels, cycle_queries, dip_counters

WIDTH = 60
T = 1_800_000_000
POOL = {"model_name": "m", "traffic_class": "chat", "spec_mode": "eagle3"}
STORED = [f.field for f in FAMILIES if f.kind != "gauge"]


def _answers(dipped: str | None):
    """Every query of a cycle answered for one pool and one bucket, the dip query naming `dipped`."""
    out = []
    for q in cycle_queries(PoolLabels(), WIDTH):
        if q.field == "dips":
            series = [] if dipped is None else [SeriesPoints(POOL | {DIP_LABEL: dipped}, [(T, 2.0)])]
        elif q.group == "le":
            series = [SeriesPoints(POOL | {"le": le}, [(T, c)]) for le, c in (("0.1", 5.0), ("+Inf", 9.0))]
        elif q.group == "position":
            series = [SeriesPoints(POOL | {"position": str(i)}, [(T, c)]) for i, c in enumerate((30.0, 20.0))]
        else:
            series = [SeriesPoints(dict(POOL), [(T, 100.0)])]
        out.append((q, series))
    return out


def _record(dipped: str | None):
    records = assemble(_answers(dipped), width=WIDTH, class_label="traffic_class", mode_label="spec_mode",
                       default_class="default", default_mode="eagle3")
    (rec,) = records.values()
    return rec


def test_every_stored_counter_is_checked_in_one_query():
    checked = {field for _, field in dip_counters().values()}
    assert checked == set(STORED)
    (dip,) = [q for q in cycle_queries(PoolLabels(), WIDTH) if q.field == "dips"]
    for metric, (created, _) in dip_counters().items():
        assert f"resets({metric}[{WIDTH}s])" in dip.promql and f"changes({created}[{WIDTH}s])" in dip.promql
    assert "resets(vllm:inter_token_latency_seconds_count[60s])" in dip.promql


def test_no_dip_keeps_every_field():
    rec = _record(None)
    assert rec.flags == [] and all(getattr(rec, f) is not None for f in STORED)
    assert rec.generation_tokens == 100.0 and rec.itl.count == 100.0


@pytest.mark.parametrize("metric", sorted(dip_counters()))
def test_a_dip_refuses_that_counter_only(metric):
    field = dip_counters()[metric][1]
    rec = _record(metric)
    refused = set(SPEC_FIELDS) if field in SPEC_FIELDS else {field}
    assert DIPS_REFUSED in rec.flags and rec.dips == {metric: 2}
    assert {f for f in STORED if getattr(rec, f) is None} == refused
    assert rec.running_mean == 100.0  # a gauge: no dip check, kept
