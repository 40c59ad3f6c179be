from backend.domain.buckets import RawSample, bucket_increases, bucket_means, bucket_start


def test_buckets_are_right_closed():
    assert bucket_start(60.0, 60) == 0
    assert bucket_start(60.001, 60) == 60
    assert bucket_start(0.5, 60) == 0


def test_increases_add_up_exactly_across_buckets():
    samples = [RawSample(t, v) for t, v in [(10, 100), (25, 130), (40, 160), (55, 175), (70, 200), (85, 260)]]
    res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=60)
    incs, resets = res.by_bucket, res.resets
    assert incs == {0: 75.0, 60: 85.0}
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
    assert res.by_bucket == {0: 0.0, 60: 30.0}
    assert res.resets == {} and res.dips == {0: 2}
    # the same series read as Prometheus' increase() does (tolerance 0): every drop a reset
    prom = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=60)
    assert prom.by_bucket == {0: 999 + 998, 60: 1010 - 998 + 20} and prom.resets == {0: 2}


def test_a_real_drop_or_a_new_created_is_still_a_reset_with_a_tolerance():
    samples = [RawSample(10, 1000), RawSample(20, 1100), RawSample(30, 40), RawSample(40, 60)]
    res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=0, dip_tolerance=0.1)
    assert (res.by_bucket, res.resets, res.dips) == ({0: 100 + 40 + 20}, {0: 1}, {})
    # a dip within the tolerance but with a new _created: a restart that already grew back (a reset)
    samples = [RawSample(10, 1000, 5.0), RawSample(20, 950, 19.0), RawSample(30, 990, 19.0)]
    res = bucket_increases(samples, width=60, max_gap=300, first_bucket=0, last_bucket=0, dip_tolerance=0.1)
    assert (res.by_bucket, res.resets, res.dips) == ({0: 950 + 40}, {0: 1}, {})
