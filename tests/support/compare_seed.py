"""Two drafters of one model side by side, with hand-computed known answers (tests of services.compare).

Four one-minute buckets per pool at 4 running requests (band 1-8). Per bucket: 1000 drafts of K=3
(3000 draft tokens); EAGLE-3 accepts 1500, 1560, 1440, 1500 (alpha 0.5), EAGLE-3.1 1800, 1860, 1740, 1800
(0.6): +20 %, 95 % interval +15.10 to +25.11 % (linearised variance 4/3 x 7200 / 12000^2 per side). TPOT
over 100 requests per bucket: baseline 3.0 s, EAGLE-3 2.0, 2.2, 1.8, 2.0 (speedup 1.5), EAGLE-3.1 1.6,
1.76, 1.44, 1.6 (1.875): +25 %, interval +11.63 to +39.98 %."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from tests.factories import make_bucket, make_pool

MODEL = "llama-70b"
ALPHA_CHANGE = (0.2, 0.15103205641598513, 0.2510511692296267)
SPEEDUP_CHANGE = (0.25, 0.11626130175137908, 0.3997618635963519)


def seed(session: Session, t0: datetime) -> dict[str, object]:
    """Pools and buckets from t0 (a minute boundary) on; returns the pools by spec mode."""
    pools = {
        "eagle3": make_pool(session, model_name=MODEL, spec_mode="eagle3", drafter="EAGLE-3", first_seen=t0, last_seen=t0),
        "eagle3.1": make_pool(session, model_name=MODEL, spec_mode="eagle3.1", drafter="EAGLE-3.1", first_seen=t0,
                              last_seen=t0),
        "off": make_pool(session, model_name=MODEL, spec_mode="off", drafter=None, first_seen=t0, last_seen=t0),
    }
    acc = {"eagle3": (1500, 1560, 1440, 1500), "eagle3.1": (1800, 1860, 1740, 1800)}
    tpot = {"eagle3": (2.0, 2.2, 1.8, 2.0), "eagle3.1": (1.6, 1.76, 1.44, 1.6), "off": (3.0, 3.0, 3.0, 3.0)}
    for i in range(4):
        start = t0 + timedelta(minutes=i)
        for mode, pool in pools.items():
            kw = {"running_mean": 4.0, "tpot_sum": tpot[mode][i], "tpot_count": 100.0, "generation_tokens": 2500.0}
            if mode != "off":
                a = acc[mode][i]
                kw |= {"drafts": 1000.0, "draft_tokens": 3000.0, "accepted_tokens": float(a),
                       "accepted_per_pos": [a * 0.5, a * 0.3, a * 0.2]}
            make_bucket(session, pool, start, **kw)
    return pools
