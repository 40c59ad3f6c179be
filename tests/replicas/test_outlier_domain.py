"""The replica_outlier rule (pure): pooled others (sums, not a mean of ratios), volume on both sides, the
recovery band, a lone replica; coarsening refuses a family for its whole coarse bucket."""

from __future__ import annotations

import pytest

from backend.domain.alert_config import ConfigError, parse_config
from backend.domain.records import BucketRecord, PoolKey, ReplicaKey
from backend.domain.replicas import (
    ReplicaVolume,
    aligned,
    coarsen,
    complete_coarse_ends,
    pooled_others,
    replica_outlier,
)

A, B, C = ReplicaKey("a", ""), ReplicaKey("b", ""), ReplicaKey("c", "")


def _eval(vols, key, **kw):
    args = {"gap": 0.1, "recover_margin": 0.02, "min_drafts": 100, "window": 3600, "replicas": len(vols)} | kw
    return replica_outlier(vols[key], pooled_others(vols, key), **args)


def test_others_are_pooled_not_averaged():
    # b: 0.9 on 100 draft tokens, c: 0.5 on 900: pooled 0.54, a mean of ratios would say 0.70
    vols = {A: ReplicaVolume(200, 1000, 480), B: ReplicaVolume(100, 100, 90), C: ReplicaVolume(300, 900, 450)}
    others = pooled_others(vols, A)
    assert (others.drafts, others.draft_tokens, others.accepted_tokens) == (400, 1000, 540)
    ev = _eval(vols, A)
    assert ev.values["alpha_others"] == 0.54 and ev.value == 0.48
    assert ev.status == "ok"  # 0.48 >= 0.54 - 0.1 + 0.02; against the 0.70 mean it would have fired


def test_breach_hold_and_ok_around_the_line():
    base = {B: ReplicaVolume(500, 1000, 800), C: ReplicaVolume(500, 1000, 800)}  # others: 0.80
    assert _eval({**base, A: ReplicaVolume(500, 1000, 690)}, A).status == "breached"  # 0.69 < 0.70
    assert _eval({**base, A: ReplicaVolume(500, 1000, 710)}, A).status == "hold"  # inside [0.70, 0.72)
    assert _eval({**base, A: ReplicaVolume(500, 1000, 725)}, A).status == "ok"
    ev = _eval({**base, A: ReplicaVolume(500, 1000, 600)}, A)
    assert ev.threshold == pytest.approx(0.7) and ev.values["gap_observed"] == pytest.approx(0.2)


def test_volume_on_both_sides_and_a_lone_replica_are_no_data():
    low_me = {A: ReplicaVolume(99, 1000, 100), B: ReplicaVolume(500, 1000, 800)}
    assert _eval(low_me, A).status == "no_data"
    low_others = {A: ReplicaVolume(500, 1000, 100), B: ReplicaVolume(99, 1000, 800)}
    assert _eval(low_others, A).status == "no_data"
    assert _eval({A: ReplicaVolume(500, 1000, 100)}, A).status == "no_data"


def _aligned_eval(rows, key):
    mine, others = aligned(rows, key)
    return replica_outlier(mine, others, gap=0.1, recover_margin=0.02, min_drafts=100, window=3600,
                           replicas=len(rows))


def test_a_pool_wide_drop_is_no_outlier_a_single_replica_drop_is():
    """Coarse buckets 0, 1, 2; the pool drops from 0.80 to 0.30 in bucket 2. Replica c joined in bucket 2
    (a restart, a new pod, a renamed target): over the whole window it reads 0.30 against the others' 0.63,
    but at the same time it drafts exactly like them, so no replica of the pool is an outlier."""
    ok, low = ReplicaVolume(500, 1000, 800), ReplicaVolume(500, 1000, 300)
    pool_drop = {A: {0: ok, 1: ok, 2: low}, B: {0: ok, 1: ok, 2: low}, C: {2: low}}
    assert [_aligned_eval(pool_drop, k).status for k in (A, B, C)] == ["ok", "ok", "ok"]
    mine, others = aligned(pool_drop, C)
    assert (mine.alpha, others.alpha, others.draft_tokens) == (0.3, 0.3, 2000)  # bucket 2 only
    # the window-wide comparison (every bucket of the others) would have called c an outlier
    whole = {k: ReplicaVolume() for k in pool_drop}
    for k, rows in pool_drop.items():
        for v in rows.values():
            whole[k] = whole[k] + v
    assert _eval(whole, C).status == "breached"
    # one replica dropping while its peers do not is the outlier, and only it
    one_drop = {A: {0: ok, 1: ok, 2: ok}, B: {0: ok, 1: ok, 2: ok}, C: {0: ok, 1: low, 2: low}}
    assert [_aligned_eval(one_drop, k).status for k in (A, B, C)] == ["ok", "ok", "breached"]
    assert _aligned_eval(one_drop, C).values["alpha_others"] == 0.8


def test_a_lone_replica_or_one_without_peers_at_the_same_time_is_no_data():
    """The demo's case: the seeded history and the live target named one server twice; buckets that do not
    overlap in time give the newcomer no peer to be compared with (and one name gives one replica)."""
    ok, low = ReplicaVolume(500, 1000, 800), ReplicaVolume(500, 1000, 300)
    assert _aligned_eval({A: {0: ok, 1: low}}, A).status == "no_data"
    ev = _aligned_eval({A: {0: ok, 1: ok}, B: {2: low}}, B)
    assert ev.status == "no_data" and ev.values["drafts_others"] is None


def test_coarsen_refuses_the_spec_group_for_the_whole_coarse_bucket():
    pool = PoolKey("m", "c", "s")
    good = BucketRecord(pool=pool, bucket_start=60, drafts=10, draft_tokens=30, accepted_tokens=20)
    bad = BucketRecord(pool=pool, bucket_start=120, drafts=10, draft_tokens=30, accepted_tokens=40)
    other = BucketRecord(pool=pool, bucket_start=0, drafts=5, draft_tokens=10, accepted_tokens=5)
    out = {r.replica: r for r in coarsen([(A, good), (A, bad), (B, other)], grain=300, ends={300})}
    assert out[A].record.drafts is None and [v.rule for v in out[A].violations] == ["accepted_gt_drafted"]
    assert (out[B].record.drafts, out[B].record.accepted_tokens) == (5, 5) and out[B].violations == []
    assert coarsen([(A, good)], grain=300, ends={600}) == []  # not a bucket this chunk completes


def test_complete_coarse_ends():
    assert complete_coarse_ends(60, 600, 300) == [300, 600]
    assert complete_coarse_ends(360, 540, 300) == []


def test_rule_config_bounds():
    cfg = parse_config({"version": 1, "rules": [{"name": "r", "kind": "replica_outlier", "gap": 0.2, "window": "30m",
                                                  "overrides": [{"match": {"replica": "gpu-7*"}, "gap": 0.3}]}]})
    rule = cfg.rules[0]
    assert rule.params == {"gap": 0.2, "recover_margin": 0.02, "window": 1800.0}
    assert rule.value("gap", {"replica": "gpu-7/0"}) == 0.3 and rule.value("gap", {"replica": "gpu-1"}) == 0.2
    with pytest.raises(ConfigError, match=r"rules\[0\].gap: must be between 0 and 1"):
        parse_config({"version": 1, "rules": [{"kind": "replica_outlier", "gap": 1.5}]})
