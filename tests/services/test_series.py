"""Acceptance series: counters summed inside each step (or rolling window), then divided."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backend.services.errors import InvalidParameter, NotFound, UnknownModel
from backend.services.series import acceptance_series
from backend.services.windows import InvalidWindow, Range
from tests.factories import T0, make_bucket, make_pool


@pytest.fixture
def pools(db, now):
    chat = make_pool(db, traffic_class="chat", num_spec_tokens=5, last_seen=now)
    code = make_pool(db, traffic_class="code", num_spec_tokens=5, last_seen=now)
    for i in range(10):  # chat: 1 busy minute then quiet ones; code: steady
        d = 1000 if i == 0 else 10
        make_bucket(db, chat, T0 + timedelta(minutes=i), drafts=d / 5, draft_tokens=d, accepted_tokens=0.9 * d)
        make_bucket(db, code, T0 + timedelta(minutes=i), drafts=20, draft_tokens=100, accepted_tokens=30)
    return chat, code


def _series(db, now, settings, **kw):
    args = {"model_name": "llama-70b", "traffic_class": "chat", "spec_mode": None,
                "rng": Range(T0, T0 + timedelta(minutes=10)), "step": 300, "rolling": None, "now": now, "settings": settings}
    args.update(kw)
    return acceptance_series(db, **args)


def test_steps_sum_counters_then_divide(db, now, settings, pools):
    s = _series(db, now, settings)
    assert [t.minute for t in s.t] == [0, 5, 10]
    assert s.drafts[0] is None and s.acceptance_rate[0] is None  # (10:55, 11:00]: nothing
    assert s.draft_tokens[1] == 1000 + 4 * 10  # buckets ending 11:01..11:05
    assert s.acceptance_rate[1] == pytest.approx(0.9)
    assert s.mean_acceptance_length[1] == pytest.approx(1 + 0.9 * 1040 / 208)


def test_mixed_pools_counters(db, now, settings, pools):
    s = _series(db, now, settings, traffic_class="mixed")
    assert s.acceptance_rate[1] == pytest.approx((936 + 150) / (1040 + 500))
    assert s.acceptance_rate[2] == pytest.approx((45 + 150) / (50 + 500))


def test_rolling_window(db, now, settings, pools):
    s = _series(db, now, settings, step=60, rolling=600)
    assert s.step_seconds == 60 and s.rolling_window_seconds == 600
    assert s.draft_tokens[-1] == 1000 + 9 * 10  # all ten buckets in (11:00, 11:10]
    assert s.draft_tokens[1] == 1000  # (10:51, 11:01]


def test_auto_step_and_validation(db, now, settings, pools):
    s = _series(db, now, settings, step=None, rng=Range(T0 - timedelta(days=30), T0))
    assert s.step_seconds % 60 == 0 and len(s.t) <= settings.max_points
    with pytest.raises(InvalidWindow):
        _series(db, now, settings, step=90)
    with pytest.raises(InvalidWindow):
        _series(db, now, settings, rolling=30)
    with pytest.raises(UnknownModel) as exc:
        _series(db, now, settings, model_name="nope")
    assert exc.value.known == ["llama-70b"]
    with pytest.raises(NotFound):
        _series(db, now, settings, traffic_class="math")


def test_several_spec_modes_need_spec_mode(db, now, settings, pools):
    make_pool(db, traffic_class="chat", spec_mode="ngram", last_seen=now)
    with pytest.raises(InvalidParameter, match="spec_mode"):
        _series(db, now, settings)
    assert _series(db, now, settings, spec_mode="eagle3").spec_mode == "eagle3"
