"""The Prometheus source's raw-sample path, by hand: exact increases between consecutive samples (the sample
before a bucket anywhere up to the gap limit before it), resets from drops and `_created` changes, a gap
closed by the samples on both sides, dips, and the sums per pool and per replica. Buckets are (b, b + 60]."""

from __future__ import annotations

from backend.prom.assemble import assemble_raw, series_increases
from backend.prom.client import SeriesPoints
from backend.prom.queries import PoolLabels, created_of, names_selector, raw_queries

W = 60
POOL = {"model_name": "m", "traffic_class": "chat", "spec_mode": "eagle3"}
NAMING = {"class_label": "traffic_class", "mode_label": "spec_mode", "default_class": "default",
          "default_mode": "on"}
Q = {(q.field, q.part): q for q in raw_queries(PoolLabels())}
DRAFTS, GEN = Q[("drafts", "value")], Q[("generation_tokens", "value")]
CREATED = Q[("created", "created")]


def series(name: str, points, **labels) -> SeriesPoints:
    return SeriesPoints({"__name__": name, **POOL, "instance": "a:1", "engine": "0", **labels}, list(points))


def drafts(points, **labels) -> SeriesPoints:
    return series("vllm:spec_decode_num_drafts_total", points, **labels)


def created(metric: str, points, **labels) -> SeriesPoints:
    return series(created_of(metric), points, **labels)


def records(answers, first=60, last=180, max_gap=300.0, dip_tolerance=0.0, **kw):
    incs = series_increases(answers, width=W, first_bucket=first, last_bucket=last, max_gap=max_gap,
                            dip_tolerance=dip_tolerance)
    return {b: rec for (_key, b), rec in assemble_raw(incs, **NAMING, **kw).items()}


def test_increments_go_to_the_bucket_of_the_later_sample_and_telescope():
    # 10 @50 | 30 @70, 40 @110, 45 @120 | 70 @130, 72 @175 | 90 @185 (beyond the last bucket)
    pts = [(50, 10), (70, 30), (110, 40), (120, 45), (130, 70), (175, 72), (185, 90)]
    got = records([(DRAFTS, [drafts(pts)])], last=120)
    # (60, 120]: 30-10 + 40-30 + 45-40 = 35, from the sample at 50 before it; the sample at exactly 120 is in
    # it (right-closed); (120, 180]: 72-45 = 27
    assert {b: r.drafts for b, r in got.items()} == {60: 35.0, 120: 27.0}
    assert sum(r.drafts for r in got.values()) == 72 - 10  # the counter's own change over the run
    assert all(r.generation_tokens is None and r.restarts is None for r in got.values())


def test_a_straddling_interval_is_counted_once_in_the_later_bucket():
    # one interval (115, 125] straddles the edge at 120: its 8 go to (120, 180] only
    got = records([(DRAFTS, [drafts([(55, 0), (115, 2), (125, 10), (175, 11)])])], last=120)
    assert {b: r.drafts for b, r in got.items()} == {60: 2.0, 120: 9.0}


def test_a_drop_is_a_reset_and_adds_the_new_value():
    got = records([(GEN, [series("vllm:generation_tokens_total", [(50, 100), (80, 120), (100, 5), (130, 25)])])],
                  last=120)
    assert {b: r.generation_tokens for b, r in got.items()} == {60: 20.0 + 5.0, 120: 20.0}
    assert {b: r.restarts for b, r in got.items()} == {60: 1, 120: 0}


def test_a_created_change_between_two_buckets_is_a_restart_even_without_a_drop():
    # the engine restarted between the last sample of (60, 120] and the first of (120, 180], and had already
    # counted past its old value: only _created tells
    gen = "vllm:generation_tokens_total"
    answers = [(GEN, [series(gen, [(50, 100), (115, 130), (125, 150), (170, 160)])]),
               (DRAFTS, [drafts([(50, 7), (115, 9), (125, 4), (170, 6)])]),
               (CREATED, [created(gen, [(50, 1000.0), (115, 1000.0), (125, 2000.0), (170, 2000.0)]),
                          created("vllm:spec_decode_num_drafts_total",
                                  [(50, 1000.0), (115, 1000.0), (125, 2000.0), (170, 2000.0)])])]
    got = records(answers, last=120)
    assert {b: r.generation_tokens for b, r in got.items()} == {60: 30.0, 120: 150.0 + 10.0}
    assert {b: r.drafts for b, r in got.items()} == {60: 2.0, 120: 4.0 + 2.0}
    assert {b: r.restarts for b, r in got.items()} == {60: 0, 120: 1}


def test_a_gap_is_closed_by_the_samples_on_both_sides():
    # Prometheus down from 65 to 170: nothing in (120, 180] but the sample at 170; its whole increase since
    # the sample at 65 lands there; the bucket in between has no data (absent, never 0)
    pts = [(50, 10), (65, 12), (170, 100), (230, 130)]
    got = records([(DRAFTS, [drafts(pts)])], last=180)
    assert {b: r.drafts for b, r in got.items()} == {60: 2.0, 120: 88.0, 180: 30.0}
    assert sum(r.drafts for r in got.values()) == 130 - 10
    # the bucket that took the gap's increase says so (105 s without samples); the others do not
    assert {b: r.gap_seconds for b, r in got.items()} == {60: 0.0, 120: 105.0, 180: 0.0}
    # a gap longer than the limit gives nothing (the series went stale), as on the direct-scrape path
    short = records([(DRAFTS, [drafts(pts)])], last=180, max_gap=60.0)
    assert {b: r.drafts for b, r in short.items()} == {60: 2.0, 180: 30.0}


def test_a_gap_with_a_restart_inside_counts_the_value_after_it():
    gen = "vllm:generation_tokens_total"
    answers = [(GEN, [series(gen, [(50, 500), (65, 510), (170, 40)])]),
               (CREATED, [created(gen, [(50, 1.0), (65, 1.0), (170, 150.0)])])]
    got = records(answers, last=120)
    assert {b: (r.generation_tokens, r.restarts) for b, r in got.items()} == {60: (10.0, 0), 120: (40.0, 1)}


def test_a_dip_adds_nothing_and_is_counted():
    got = records([(DRAFTS, [drafts([(50, 1000), (70, 990), (110, 1010)])])], last=60, dip_tolerance=0.1)
    (rec,) = got.values()
    assert rec.drafts == 10.0 and rec.dips == {"vllm:spec_decode_num_drafts_total": 1}


def test_histograms_positions_and_two_replicas_sum_per_pool_and_split_per_replica():
    b, sm, ct = (Q[("itl", p)] for p in ("bucket", "sum", "count"))
    pos = Q[("accepted_per_pos", "value")]
    itl = "vllm:inter_token_latency_seconds"
    answers = [
        (b, [series(f"{itl}_bucket", [(50, 1), (110, 4)], le="0.1"),
             series(f"{itl}_bucket", [(50, 2), (110, 7)], le="+Inf"),
             series(f"{itl}_bucket", [(50, 1), (110, 4)], le="0.1", instance="b:1"),
             series(f"{itl}_bucket", [(50, 1), (110, 6)], le="+Inf", instance="b:1")]),
        (sm, [series(f"{itl}_sum", [(50, 0.5), (110, 1.0)]), series(f"{itl}_sum", [(50, 0.125), (110, 0.25)],
                                                                      instance="b:1")]),
        (ct, [series(f"{itl}_count", [(50, 2), (110, 7)]), series(f"{itl}_count", [(50, 1), (110, 6)],
                                                                  instance="b:1")]),
        (pos, [series("vllm:spec_decode_num_accepted_tokens_per_pos_total", [(50, 10), (110, 16)], position="0"),
               series("vllm:spec_decode_num_accepted_tokens_per_pos_total", [(50, 3), (110, 4)], position="1"),
               series("vllm:spec_decode_num_accepted_tokens_per_pos_total", [(50, 0), (110, 2)], position="0",
                      instance="b:1")]),
        # the _bucket series' restart is told by the family's one _created (no `le`): b:1 restarted at 100
        (CREATED, [created(f"{itl}_bucket", [(50, 5.0), (110, 5.0)]),
                   created(f"{itl}_bucket", [(50, 5.0), (110, 100.0)], instance="b:1")]),
    ]
    (rec,) = records(answers, last=60).values()
    assert rec.itl.bounds == (0.1,)
    # a: +3 / +5; b:1 restarted (no drop, its _created changed), so its whole new values count: +4 / +6
    assert rec.itl.counts == [3.0 + 4.0, 5.0 + 6.0]
    assert rec.itl.sum == 0.5 + 0.25 and rec.itl.count == 5.0 + 6.0
    assert rec.accepted_per_pos == [6.0 + 2.0, 1.0]
    per_replica = assemble_raw(series_increases(answers, width=W, first_bucket=0, last_bucket=60, max_gap=300.0),
                               **NAMING, replica_labels=("instance", "engine"), fields=("itl",))
    assert {k[0][1].instance: r.itl.counts for k, r in per_replica.items()} == {"a:1": [3.0, 5.0], "b:1": [4.0, 6.0]}
    assert all(r.accepted_per_pos is None and r.restarts is None for r in per_replica.values())


def test_selectors():
    assert names_selector(PoolLabels(extra_matchers='ns="p"'), ["a_created", "b_created"]) == \
        '{__name__=~"a_created|b_created",ns="p"}'
    assert created_of("vllm:inter_token_latency_seconds_bucket") == "vllm:inter_token_latency_seconds_created"
    assert created_of("vllm:spec_decode_num_drafts_total") == "vllm:spec_decode_num_drafts_created"
    assert len(raw_queries(PoolLabels())) == 7 + 1 + 3 * 3 + 1  # counters, per position, histograms, _created



def test_the_steady_shortcut_gives_what_the_sample_by_sample_rule_gives():
    import random

    from backend.domain.buckets import RawSample, bucket_increases
    from backend.prom.assemble import WHOLE_TO_LATER, _steady_increases

    rng = random.Random(7)
    for _ in range(300):
        t, v, pts = rng.uniform(0, 60), rng.uniform(0, 1000), []
        for _k in range(rng.randint(1, 40)):
            pts.append((t, v))
            t += rng.choice((0.5, 1.0, 5.0, 15.0, 60.0))
            v += rng.choice((0.0, 1.0, rng.uniform(0, 50)))
        want = bucket_increases([RawSample(a, b) for a, b in pts], width=W, max_gap=300.0, first_bucket=60,
                                last_bucket=600, split_within=WHOLE_TO_LATER)
        got = _steady_increases(pts, {}, width=W, max_gap=300.0, first_bucket=60, last_bucket=600)
        assert got is not None and got.by_bucket == want.by_bucket
    # anything else is left to the sample-by-sample rule
    assert _steady_increases([(50, 5.0), (70, 4.0)], {}, width=W, max_gap=300.0, first_bucket=0, last_bucket=60) is None
    assert _steady_increases([(50, 5.0), (70, 6.0)], {50: 1.0, 70: 2.0}, width=W, max_gap=300.0, first_bucket=0,
                             last_bucket=60) is None
    assert _steady_increases([(50, 5.0), (470, 6.0)], {}, width=W, max_gap=300.0, first_bucket=0,
                             last_bucket=600) is None


def test_a_filled_gap_is_flagged_when_stored(db, now):
    """The bucket holding a gap's whole increase is stored (its counts are exact) with a `gap_filled` flag
    row saying so, as a dip is: flagged, kept."""
    from backend.db import queries
    from backend.services.ingest import write_records

    got = records([(DRAFTS, [drafts([(50, 10), (65, 12), (170, 100), (230, 130)])])], last=180)
    write_records(db, list(got.values()), width=60, source="prometheus", now=now)
    flagged = queries.rejection_counts(db)
    assert [rules.get("gap_filled") for rules in flagged.values()] == [1]
