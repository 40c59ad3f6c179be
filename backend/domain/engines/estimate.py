"""The SGLang spec-decode estimate: its accept-length and accept-rate gauges weighted by the generated tokens.

SGLang exposes no spec-decode counter, only two gauges holding the value of its last decode log interval:
τ (`sglang:spec_accept_length`, tokens emitted per request per verify step, the bonus token included) and
r (`sglang:spec_accept_rate`, accepted draft tokens / draft tokens). A mean of the gauge samples would weigh
a quiet minute like a busy one, so each scrape interval i = (t[k-1], t[k]] of a target is weighted by what
it generated, g_i = the increase of `sglang:generation_tokens_total` over it, read with the gauges at t[k]
(the engine's most recent log interval before that scrape):

- verify steps:    s_i = g_i / τ_i          (a request-step emits τ tokens on average, so g tokens took g/τ)
- accepted tokens: a_i = g_i - s_i = g_i (1 - 1/τ_i)   (every step emits one token that was not a draft)
- draft tokens:    d_i = a_i / r_i          (r = a / d), only where r_i > 0

and over any set of intervals (a bucket, a window, a fleet: the parts are additive, so they are stored and
summed like counts):

    τ̂ = Σ g_i / Σ s_i = Σ g_i / Σ (g_i / τ_i)     (the g-weighted *harmonic* mean of τ: the step-weighted
                                                   arithmetic mean, which is what a mean length per step is)
    α̂ = Σ a_i / Σ d_i                              (over the intervals with r_i > 0)

Known answer: 100 tokens at τ = 2 then 300 at τ = 3 give 50 + 100 = 150 steps and τ̂ = 400 / 150 = 2.667
(the token-weighted arithmetic mean would say 2.75: it over-weights the long steps).

Why it is an estimate, not a count: the gauges describe SGLang's last log interval (`decode_log_interval`
steps, 40 by default), not the whole scrape interval; SGLang adds a request's tokens to its counter when the
request finishes, so g_i is the output of the requests finishing in the interval, not of the steps run in it;
and several gauge series of one pool at one scrape (ranks) are averaged unweighted. An interval without a
τ reading (absent, or < 1: no speculative step in the log interval), with a counter drop (a restart: the new
value is the increase) or longer than the gap limit adds nothing. Each interval goes whole to the bucket of
its later sample.

These figures are stored apart (`est_weight_tokens`, `est_verify_steps`, `est_accepted_tokens`,
`est_draft_tokens`) and never added to the exact drafts / draft tokens / accepted tokens. Pure: no I/O."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields

ESTIMATE_BASIS = ("estimated from SGLang's spec_accept_length / spec_accept_rate gauges (last log interval), "
                  "each scrape interval weighted by its generated tokens: accept length = Σ tokens / Σ (tokens / "
                  "accept length), acceptance = Σ accepted / Σ (accepted / accept rate)")

EST_FIELDS = ("est_weight_tokens", "est_verify_steps", "est_accepted_tokens", "est_draft_tokens")


@dataclass
class EstimateParts:
    """Additive parts of the estimate over some intervals (see the module text)."""

    weight_tokens: float = 0.0  # Σ g over the intervals with a τ reading
    verify_steps: float = 0.0  # Σ g / τ
    accepted_tokens: float = 0.0  # Σ g (1 - 1/τ), over the intervals with r > 0
    draft_tokens: float = 0.0  # Σ g (1 - 1/τ) / r, over the intervals with r > 0

    def add(self, other: EstimateParts) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def accept_length(self) -> float | None:
        """τ̂ = Σ g / Σ (g/τ); None without a weighted interval."""
        return self.weight_tokens / self.verify_steps if self.verify_steps > 0 else None

    @property
    def acceptance_rate(self) -> float | None:
        """α̂ = Σ a / Σ (a/r); None without an interval that had drafts accepted and a rate."""
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens > 0 else None


def interval_parts(tokens: float, accept_length: float | None, accept_rate: float | None) -> EstimateParts | None:
    """One interval's parts: `tokens` generated, the gauges read at its end; None if it has no usable τ."""
    if accept_length is None or not math.isfinite(accept_length) or accept_length < 1.0:
        return None
    if not math.isfinite(tokens) or tokens < 0:
        return None
    steps = tokens / accept_length
    out = EstimateParts(weight_tokens=tokens, verify_steps=steps)
    if accept_rate is not None and math.isfinite(accept_rate) and 0.0 < accept_rate <= 1.0:
        out.accepted_tokens = tokens - steps
        out.draft_tokens = (tokens - steps) / accept_rate
    return out


def bucket_estimates(points: Iterable[tuple[float, float | None, float | None, float | None]], *, width: int,
                     max_gap: float, first_bucket: int | None = None,
                     last_bucket: int | None = None) -> dict[int, EstimateParts]:
    """Per bucket start, the estimate parts of one target's scrapes.

    `points`: (time, generated-token counter, τ gauge, r gauge) per scrape, in any order (None: not in that
    scrape). Each interval between consecutive scrapes with the counter in both goes to the bucket of its
    later sample (a bucket is (start, start + width]), weighted by the counter's increase (its new value after
    a drop)."""
    out: dict[int, EstimateParts] = {}
    prev: tuple[float, float] | None = None
    for t, counter, tau, rate in sorted(points, key=lambda p: p[0]):
        if counter is None or not math.isfinite(counter):
            prev = None
            continue
        if prev is not None and t - prev[0] <= max_gap:
            inc = counter - prev[1] if counter >= prev[1] else counter
            b = math.ceil(t / width) * width - width
            parts = interval_parts(inc, tau, rate)
            if parts is not None and (first_bucket is None or b >= first_bucket) \
                    and (last_bucket is None or b <= last_bucket):
                out.setdefault(b, EstimateParts()).add(parts)
        prev = (t, counter)
    return out


def mean(values: Iterable[float]) -> float | None:
    """The unweighted mean of a pool's gauge series at one scrape (None: no series)."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None
