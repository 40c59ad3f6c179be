"""What an operator can do when a latency verdict is "unresolved" (both quantiles in one bucket).

vLLM's default latency buckets (``vllm/v1/metrics/buckets.py``) are coarse where decode latencies sit:
``INTER_TOKEN_LATENCY_BUCKETS`` (10, 25, 50, 75, 100 ms ...) serve both
``vllm:inter_token_latency_seconds`` (ITL, per step) and ``vllm:request_time_per_output_token_seconds``
(TPOT, per token). Since vLLM 0.33.0 a bucket family can be replaced with
``--custom-histogram-buckets '{"<family>": [...]}'`` (``ObservabilityConfig.custom_histogram_buckets``;
family keys ``inter_token_latency`` for ITL and TPOT, ``time_to_first_token`` for TTFT; values positive,
finite, strictly increasing). Both pools of a comparison must use the same layout, so the flag goes on
the spec and the baseline servers alike. Every bound adds one series per metric and label set, so the
advice adds a few bounds inside the unresolved buckets rather than a long list.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# vllm/v1/metrics/buckets.py (INTER_TOKEN_LATENCY_BUCKETS, TIME_TO_FIRST_TOKEN_BUCKETS)
VLLM_ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                    20.0, 40.0, 80.0)
VLLM_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                     20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
FAMILY_KEY = {"itl": "inter_token_latency", "tpot": "inter_token_latency", "ttft": "time_to_first_token"}
DEFAULTS = {"inter_token_latency": VLLM_ITL_BUCKETS, "time_to_first_token": VLLM_TTFT_BUCKETS}
NAMES = {"itl": "ITL", "tpot": "TPOT", "ttft": "TTFT"}
SPLITS = 5  # each unresolved bucket is cut into this many equal parts


@dataclass(frozen=True)
class Unresolved:
    """One unresolved verdict: its family (itl / tpot / ttft), quantile, shared bucket and the layout."""

    family: str
    q: float
    low: float
    high: float
    bounds: tuple[float, ...]  # the pools' finite bucket bounds
    traffic_class: str = ""  # where it was found (named in the advice)


@dataclass(frozen=True)
class Advice:
    family_key: str  # vLLM's bucket family
    metrics: tuple[str, ...]  # ITL / TPOT / TTFT
    buckets: tuple[tuple[float, float], ...]  # the unresolved buckets (low, high]
    default_layout: bool  # the pools use vLLM's default bounds for this family
    bounds: tuple[float, ...]  # the suggested layout: the current bounds plus splits of the buckets
    flag: str  # the vLLM server argument that sets it
    text: str  # one paragraph for people


def _ms(x: float) -> str:
    return f"{x * 1000 + 0.0:.6g}"


def finer_bounds(bounds: Sequence[float], buckets: Iterable[tuple[float, float]], splits: int = SPLITS) -> tuple[float, ...]:
    """`bounds` plus `splits` - 1 evenly spaced bounds inside each of `buckets` (rounded to 0.1 us)."""
    out = {round(b, 7) for b in bounds}
    for low, high in buckets:
        out |= {round(low + (high - low) * i / splits, 7) for i in range(1, splits)}
    return tuple(sorted(b for b in out if b > 0))


def advise(found: Iterable[Unresolved]) -> list[Advice]:
    """One piece of advice per vLLM bucket family with unresolved verdicts (empty when there are none)."""
    by_key: dict[str, list[Unresolved]] = {}
    for u in found:
        by_key.setdefault(FAMILY_KEY[u.family], []).append(u)
    out = []
    for key, items in sorted(by_key.items()):
        metrics = tuple(dict.fromkeys(NAMES[u.family] for u in sorted(items, key=lambda u: u.family)))
        buckets = tuple(sorted({(u.low, u.high) for u in items}))
        layout = items[0].bounds
        default = tuple(round(b, 7) for b in layout) == DEFAULTS[key]
        bounds = finer_bounds(layout, buckets)
        flag = "--custom-histogram-buckets '" + json.dumps({key: list(bounds)}, separators=(",", ":")) + "'"
        where = ", ".join(f"({_ms(lo)}, {_ms(hi)}] ms" for lo, hi in buckets)
        quantiles = "/".join(sorted({f"P{u.q * 100:g}" for u in items}, key=lambda s: float(s[1:])))
        layout_words = "vLLM's default" if default else "the pools'"
        classes = sorted({u.traffic_class for u in items if u.traffic_class})
        scope = f" ({'class' if len(classes) == 1 else 'classes'} {', '.join(classes)})" if classes else ""
        text = (f"{' and '.join(metrics)} {quantiles}{scope} of spec and baseline fall in the same bucket of "
                f"{layout_words} {key} layout ({where}), so the histograms cannot order them. To resolve them, "
                f"start both the speculative and the baseline vLLM servers (0.33.0 or later) with {flag}: the "
                f"same bounds with {SPLITS - 1} more inside each of those buckets (the {key} family sets "
                + ("vllm:inter_token_latency_seconds and vllm:request_time_per_output_token_seconds"
                   if key == "inter_token_latency" else "vllm:time_to_first_token_seconds")
                + "). Compared pools must share one layout; each bound adds one series per metric and label set.")
        out.append(Advice(key, metrics, buckets, default, bounds, flag, text))
    return out
