import itertools
import random

from backend.domain.buckets import (
    SPLIT_QUANTUM,
    RawSample,
    bucket_increases,
    bucket_means,
    bucket_start,
    split_shares,
)


def test_buckets_are_right_closed():
    assert bucket_start(60.0, 60) == 0
    assert bucket_start(60.001, 60) == 60
    assert bucket_start(0.5, 60) == 0


def test_increases_add_up_exactly_across_buckets():
    samples = [RawSample(t, v) for t, v in [(10, 100), (25, 130), (40, 160), (55, 175), (70, 200), (85, 260)]]
    res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=60)
    incs, resets = res.by_bucket, res.resets
    # (55, 70] straddles 60: its 25 split 5 s : 10 s, 25/3 = 8.333 rounded to 1/1024 -> 8533/1024 before
    early = 8533 / 1024
    assert incs == {0: 75.0 + early, 60: (25 - early) + 60.0}
    assert sum(incs.values()) == 260 - 100
    assert resets == {}


def test_reset_by_decrease_counts_the_new_value():
    samples = [RawSample(10, 500), RawSample(25, 520), RawSample(40, 30), RawSample(55, 70)]
    res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=0)
    incs, resets = res.by_bucket, res.resets
    assert incs == {0: 20 + 30 + 40}
    assert resets == {0: 1}


def test_invisible_reset_caught_by_created_change():
    # restarted and already past the old value by the next scrape: only _created shows it
    samples = [RawSample(10, 100, created=1000.0), RawSample(25, 150, created=1020.0)]
    res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=0)
    incs, resets = res.by_bucket, res.resets
    assert incs == {0: 150.0}
    assert resets == {0: 1}


def test_gap_longer_than_max_gap_gives_no_increase():
    samples = [RawSample(10, 100), RawSample(400, 900), RawSample(415, 910)]
    incs = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=420).by_bucket
    assert incs == {360: 10.0}


def test_single_sample_is_no_data_not_zero():
    incs = bucket_increases([RawSample(10, 5)], width=60, max_gap=300, first_bucket=0, last_bucket=0).by_bucket
    assert incs == {}


def test_gauge_means_per_bucket():
    samples = [RawSample(10, 2), RawSample(30, 4), RawSample(70, 10)]
    assert bucket_means(samples, width=60, first_bucket=0, last_bucket=60) == {0: 3.0, 60: 10.0}


def test_a_small_dip_is_not_a_reset_and_adds_nothing():
    # every scrape a little lower, then back up: no reset, increase 0 while dipping, growth from the high mark
    samples = [RawSample(t, v) for t, v in [(10, 1000), (20, 999), (30, 998), (70, 1010), (80, 1030)]]
    res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=60, dip_tolerance=0.1)
    # (30, 70] straddles 60 (30 s : 10 s): its +10 from the high mark gives 7.5 before, 2.5 after
    assert res.by_bucket == {0: 7.5, 60: 2.5 + 20}
    assert res.resets == {} and res.dips == {0: 2}
    # the same series read as Prometheus' increase() does (tolerance 0): every drop a reset; 1010 - 998 split
    prom = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=60)
    assert prom.by_bucket == {0: 999 + 998 + 9, 60: 3 + 20} and prom.resets == {0: 2}


def test_a_real_drop_or_a_new_created_is_still_a_reset_with_a_tolerance():
    samples = [RawSample(10, 1000), RawSample(20, 1100), RawSample(30, 40), RawSample(40, 60)]
    res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=0, dip_tolerance=0.1)
    assert (res.by_bucket, res.resets, res.dips) == ({0: 100 + 40 + 20}, {0: 1}, {})
    # a dip within the tolerance but with a new _created: a restart that already grew back (a reset)
    samples = [RawSample(10, 1000, 5.0), RawSample(20, 950, 19.0), RawSample(30, 990, 19.0)]
    res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=0, dip_tolerance=0.1)
    assert (res.by_bucket, res.resets, res.dips) == ({0: 950 + 40}, {0: 1}, {})


def test_a_straddling_interval_is_split_in_proportion_to_time():
    # scrapes every 15 s, 5 s before the minute and 10 s after: (55, 70] holds 30 counts -> 10 and 20
    samples = [RawSample(40, 1000), RawSample(55, 1030), RawSample(70, 1060), RawSample(85, 1090)]
    res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=60)
    assert res.by_bucket == {0: 30.0 + 10.0, 60: 20.0 + 30.0}
    assert split_shares(55, 70, 60) == [(0, 5 / 15), (60, None)]
    # an interval over two boundaries: (50, 130] (80 s, 160 counts) -> 20 / 120 / 20
    res = bucket_increases([RawSample(50, 0), RawSample(130, 160)], width=60, max_gap=300, first_bucket=0,
                           last_bucket=120)
    assert res.by_bucket == {0: 20.0, 60: 120.0, 120: 20.0}
    # a sample exactly on the boundary belongs to the bucket it closes: nothing split
    res = bucket_increases([RawSample(45, 0), RawSample(60, 15), RawSample(75, 30)], width=60, max_gap=300,
                           first_bucket=0, last_bucket=60)
    assert res.by_bucket == {0: 15.0, 60: 15.0}


def test_after_a_restart_the_counts_accrue_from_the_new_created():
    # restarted at 58 (_created), 40 counts by 70: all of them after the boundary at 60 except 2 s of 12
    samples = [RawSample(45, 900, created=1.0), RawSample(70, 40, created=58.0)]
    res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=60)
    early = round(40 * 2 / 12 * 1024) / 1024
    assert res.by_bucket == {0: early, 60: 40 - early} and res.resets == {60: 1}


def test_split_within_leaves_long_intervals_whole():
    samples = [RawSample(50, 0), RawSample(75, 25)]  # 15 s past the boundary
    assert bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=60,
                            split_within=15).by_bucket == {0: 10.0, 60: 15.0}
    assert bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=60,
                            split_within=14.9).by_bucket == {60: 25.0}


def test_split_parts_add_up_exactly_over_any_run():
    """Random integer counters scraped at irregular times: every part is a multiple of 1/1024, the buckets
    of a run add up exactly to the counter's change, and each bucket is within half a quantum per interval
    of the proportional share."""
    rng = random.Random(5)
    for _ in range(200):
        t, v, samples = rng.uniform(0, 60), float(rng.randint(0, 10**9)), []
        for _ in range(rng.randint(2, 40)):
            samples.append(RawSample(t, v))
            t += rng.uniform(1, 50)
            v += rng.randint(0, 10**6)
        res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=10**6)
        assert sum(res.by_bucket.values()) == samples[-1].value - samples[0].value
        assert all(x / SPLIT_QUANTUM == int(x / SPLIT_QUANTUM) for x in res.by_bucket.values())
        exact: dict[int, float] = {}
        for a, b in itertools.pairwise(samples):
            for s in range(int(a.ts // 60) * 60, bucket_start(b.ts, 60) + 60, 60):
                overlap = min(b.ts, s + 60) - max(a.ts, s)
                if overlap > 0:
                    exact[s] = exact.get(s, 0.0) + (b.value - a.value) * overlap / (b.ts - a.ts)
        assert res.by_bucket.keys() == exact.keys()
        for s, x in res.by_bucket.items():
            assert abs(x - exact[s]) <= SPLIT_QUANTUM * len(samples)
