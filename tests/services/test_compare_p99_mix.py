"""The A/B's P99 verdicts compare A at B's mix of concurrency bands: A ran mostly at a light load and B mostly
at a heavy one, with the same latency per band on both sides. Unweighted, B's P99 ITL would look worse (its
slow band holds 75 % of its observations, A's 0.66 %); standardised to B's mix, A's P99 is B's (hand-computed
below) and the verdict is not "worse"."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backend.config import Settings
from backend.services import compare
from backend.services.windows import Range
from tests.factories import ITL_BOUNDS, make_bucket, make_pool

FAST, SLOW = 1, 3  # ITL bucket (0.01, 0.025] and (0.05, 0.075] s


def _itl(n: int, at: int) -> list[float]:
    row = [0.0] * (len(ITL_BOUNDS) + 1)
    row[at] = float(n)
    return row


def test_p99_is_compared_at_bs_band_mix(db, now):
    s = Settings(_env_file=None)
    t0 = (now - timedelta(minutes=45)).replace(second=0, microsecond=0)
    pools = {m: make_pool(db, model_name="m", spec_mode=m, first_seen=t0, last_seen=t0)
             for m in ("eagle3", "eagle3.1", "off")}
    # A (eagle3): 30 light minutes of 100 fast ITLs, 10 heavy ones of 2 slow; B (eagle3.1): 10 light, 30 heavy,
    # 100 a minute each
    plan = {"eagle3": [(4.0, 100, FAST)] * 30 + [(20.0, 2, SLOW)] * 10,
            "eagle3.1": [(4.0, 100, FAST)] * 10 + [(20.0, 100, SLOW)] * 30}
    for mode, minutes in plan.items():
        for i, (running, n, at) in enumerate(minutes):
            start = t0 + timedelta(minutes=i)
            make_bucket(db, pools[mode], start, running_mean=running, drafts=1000.0, draft_tokens=3000.0,
                        accepted_tokens=1500.0, accepted_per_pos=[750.0, 450.0, 300.0], generation_tokens=2500.0,
                        tpot_sum=2.0, tpot_count=100.0, itl=_itl(n, at))
            if mode == "eagle3.1":  # one baseline over the same minutes
                make_bucket(db, pools["off"], start, running_mean=running, tpot_sum=3.0, tpot_count=100.0)
    r = compare.compare(db, model="m", a="eagle3", b="eagle3.1", rng=Range(t0, t0 + timedelta(minutes=40)),
                        now=now, settings=s)
    mixed = next(x for x in r["scopes"] if x["scope"] == "mixed")
    assert len(mixed["bands"]) == 2, mixed["bands"]  # both bands compared
    itl = mixed["p99"]["itl"]
    # B: 1000 fast, 3000 slow; rank 0.99 x 4000 = 3960 -> 0.05 + 0.025 x (3960 - 1000) / 3000 = 0.0746667 s.
    # A at B's mix: fast 3000 x (1/4)/(3000/3020), slow 20 x (3/4)/(20/3020): 755 + 2265 = 3020 (A's n);
    # rank 0.99 x 3020 = 2989.8 -> 0.05 + 0.025 x (2989.8 - 755) / 2265 = 0.0746667 s, the same
    assert itl["b"] == pytest.approx(0.05 + 0.025 * 2960 / 3000, rel=1e-9)
    assert itl["a"] == pytest.approx(itl["b"], rel=1e-9)
    # both P99s in the same bucket: "unresolved" (below the histogram's resolution), not "worse" (unweighted,
    # A's P99 would lie in the fast bucket, at most 0.025 s)
    assert itl["verdict"] == "unresolved"
