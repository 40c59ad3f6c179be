"""α by context-length band from per-request records: hand-computed pooled and request-weighted α with their
intervals, the open-ended top band, records without prompt_tokens left out, bad prompt_tokens refused."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.domain import request_stats
from backend.services import per_request as svc
from backend.services import request_checks, request_ingest
from backend.services.windows import Range


def rec(rid: str, hist: list[int], prompt: int | None, *, now: datetime) -> dict:
    k = len(hist) - 1
    steps = sum(hist)
    out = {"request_id": rid, "model": "m1", "spec_mode": "eagle3", "labels": {"traffic_class": "chat"},
           "finish_time": (now - timedelta(seconds=120)).timestamp(), "output_tokens": 100,
           "speculative_decoding": {"num_spec_tokens": k, "num_spec_steps": steps, "num_draft_tokens": k * steps,
                                    "num_accepted_draft_tokens": sum(j * h for j, h in enumerate(hist)),
                                    "acceptance_histogram": hist}}
    return out if prompt is None else {**out, "prompt_tokens": prompt}


# K = 3. Band [1024, 2047]: (a, d) = (6, 9), (2, 6), (9, 9); band 131,072+: (1, 6), (0, 3); no prompt: (3, 3)
SHORT = [("s1", [0, 1, 1, 1], 1500), ("s2", [1, 0, 1, 0], 1024), ("s3", [0, 0, 0, 3], 2047)]
LONG = [("l1", [1, 1, 0, 0], 131_072), ("l2", [1, 0, 0, 0], 900_000)]


def test_hand_computed_bands_and_intervals(db: Session, now: datetime, settings: Settings, hour: Range) -> None:
    items = [rec(r, h, p, now=now) for r, h, p in SHORT + LONG] + [rec("n1", [0, 0, 0, 1], None, now=now)]
    assert request_ingest.ingest(db, items, settings=settings, now=now).stored == 6
    chat = svc.distribution(db, model="m1", rng=hour, settings=settings)["classes"][0]
    bands = {b["prompt_tokens_from"]: b for b in chat["by_context_length"]}
    assert sorted(bands) == [1024, 131_072]
    short, long_ = bands[1024], bands[131_072]
    assert (short["prompt_tokens_to"], long_["prompt_tokens_to"]) == (2047, None)  # the last band is open
    assert (short["requests"], short["draft_tokens"], short["accepted_tokens"]) == (3, 24, 17)
    # pooled α = 17/24; residuals a - αd: 6 - 9α, 2 - 6α, 9 - 9α; se = sqrt(3/2 · Σ resid²) / 24
    r = 17 / 24
    se = math.sqrt(3 / 2 * ((6 - 9 * r) ** 2 + (2 - 6 * r) ** 2 + (9 - 9 * r) ** 2)) / 24
    assert short["draft_token_weighted_alpha"] == r
    lo, hi = short["draft_token_weighted_alpha_interval"]
    assert lo == pytest.approx(r - request_stats.Z95 * se, abs=1e-12) and hi == pytest.approx(min(1.0, r + request_stats.Z95 * se), abs=1e-12)
    # request-weighted: mean of 2/3, 1/3, 1 with its sample sd
    alphas = [6 / 9, 2 / 6, 1.0]
    mean = sum(alphas) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in alphas) / 2)
    assert short["request_weighted_alpha"] == pytest.approx(mean, abs=1e-12)
    wlo, whi = short["request_weighted_alpha_interval"]
    assert wlo == pytest.approx(max(0.0, mean - request_stats.Z95 * sd / math.sqrt(3)), abs=1e-12)
    assert whi == pytest.approx(min(1.0, mean + request_stats.Z95 * sd / math.sqrt(3)), abs=1e-12)
    assert long_["draft_token_weighted_alpha"] == 1 / 9 and long_["requests"] == 2


def test_interval_edges() -> None:
    assert request_stats.pooled_alpha_interval(1, 3, 6, 9, 36, 18) == (0.5, None, None)  # one request: no spread to read
    assert request_stats.pooled_alpha_interval(0, 0, 0, 0, 0, 0) == (None, None, None)
    r, lo, hi = request_stats.pooled_alpha_interval(2, 6, 12, 18, 72, 36)  # both requests at α = 0.5: no spread
    assert (r, lo, hi) == (0.5, 0.5, 0.5)
    assert request_stats.mean_alpha_interval(1, 0.4, None) == (0.4, None, None)


@pytest.mark.parametrize("bad", [-1, 1.5, "12", True, 2**31])
def test_bad_prompt_tokens_refuse_the_batch(db: Session, now: datetime, settings: Settings, bad) -> None:
    items = [rec("ok", [0, 1, 1, 1], 10, now=now), {**rec("bad", [0, 1, 1, 1], None, now=now), "prompt_tokens": bad}]
    with pytest.raises(request_checks.BatchRefused, match="record 1: prompt_tokens"):
        request_ingest.ingest(db, items, settings=settings, now=now)
