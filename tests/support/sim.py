"""Read the simulator's ground truth."""

from __future__ import annotations

import httpx

from tests.support.deadline import deadline


def truth(sim_url: str, at: float) -> dict[tuple[str, str, str], dict]:
    """{(model, class, mode): pool doc} of /truth at `at`."""
    doc = httpx.get(f"{sim_url}/truth", params={"at": repr(at)}, timeout=deadline(60)).raise_for_status().json()
    return {(p["model_name"], p["traffic_class"], p["spec_mode"]): p for p in doc["pools"]}


def true_increase(sim_url: str, start: float, end: float, field: str = "accepted_tokens",
                  ) -> dict[tuple[str, str, str], float | None]:
    """Exact increase of a counter over (start, end], across restarts (cumulative_since_start)."""
    a, b = truth(sim_url, start), truth(sim_url, end)
    out = {}
    for key, doc in b.items():
        v0, v1 = a[key]["cumulative_since_start"][field], doc["cumulative_since_start"][field]
        out[key] = None if v0 is None or v1 is None else v1 - v0
    return out


def max_window_increase(sim_url: str, start: float, end: float, window: float, fields: list[str],
                        step: float) -> dict[str, dict[tuple[str, str, str], float]]:
    """Per field, the largest increase over any `window`-long interval inside [start, end] (sampled every
    `step`, which must divide `window`)."""
    times = [start + i * step for i in range(round((end - start) / step) + 1)]
    docs = [truth(sim_url, t) for t in times]
    per = round(window / step)
    out: dict = {}
    for field in fields:
        out[field] = {}
        for key in docs[0]:
            vals = [d[key]["cumulative_since_start"][field] for d in docs]
            if vals[0] is not None:
                out[field][key] = max(vals[i + per] - vals[i] for i in range(len(vals) - per))
    return out


def bursty_fleet(model: str, *, period: float, burst: float, events: list[dict] | None = None) -> dict:
    """A simulator scenario of bursty traffic: every `period` s, `burst` s of 16 running requests, then none.
    Three pools of `model`: chat on EAGLE-3 (K 3, α 0.6), code on EAGLE-3 (K 4, α 0.4, two engines) and a
    chat baseline; short requests, so every one admitted in a burst has finished a few seconds after it."""
    bursty = {"points": [[0, 16], [burst, 0]], "interp": "step", "period": period}
    pools = [{"id": "chat-eagle3", "traffic_class": "chat", "spec_mode": "eagle3", "k": 3,
              "acceptance": {"mode": "rate", "r": 0.6}, "concurrency": bursty},
             {"id": "code-eagle3", "traffic_class": "code", "spec_mode": "eagle3", "k": 4, "engines": 2,
              "acceptance": {"mode": "rate", "r": 0.4}, "concurrency": bursty},
             {"id": "chat-off", "traffic_class": "chat", "spec_mode": "off", "concurrency": bursty}]
    return {"name": "bursty", "tick": 0.1, "defaults": {"model": model, "preemptions_per_s": 0.0,
                                                         "output_len": {"mean": 24, "sigma": 0.4, "max": 48}},
            "pools": pools, "events": events or []}
