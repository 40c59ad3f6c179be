"""The `context_drift` alert: α on long contexts falls below α on short ones. Pure: no I/O.

Input: a pool's per-request records summed per context-length band (the bands of the API's
`by_context_length`: band b holds prompt_tokens in [2^b, 2^(b+1)), the last open-ended). The bands at or
above `boundary` (a power of two, e.g. 32,768) are the long side, the others the short side. Each side's α
is pooled: Σ accepted / Σ drafted over its bands' requests (never an average of the bands' ratios).

Significance: the two sides are independent sets of requests, each α a ratio estimator with the request as
the unit (`request_stats.pooled_alpha_se`), so the difference d = α_short − α_long has the standard error
√(se_short² + se_long²) and the two-sided 95 % interval d ± z·se. The rule is breached only when the whole
interval lies above `margin` (the long side is worse by more than the margin, significantly), ok once its
lower end is at or below margin − recover_margin, and holds in between (no flapping). Each side needs at
least `min_drafts` drafts (verify steps) and two requests, else no_data (never read as recovery).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass, fields
from functools import cache

from backend.domain import request_stats
from backend.domain.alerting import Evaluation


@dataclass(frozen=True)
class ContextSums:
    """Sums over the requests of one band (or one side), with the second moments the interval needs
    (load_stability.LoadSums adds its own)."""

    requests: int = 0
    drafts: float = 0.0  # verify steps
    draft_tokens: float = 0.0  # Σd
    accepted: float = 0.0  # Σa
    saa: float = 0.0  # Σa²
    sdd: float = 0.0  # Σd²
    sad: float = 0.0  # Σa·d

    def __add__(self, o: ContextSums) -> ContextSums:  # field by field (a subclass's fields too)
        values = _values(type(self))
        return type(self)(*map(operator.add, values(self), values(o)))

    @property
    def alpha(self) -> float | None:
        return self.accepted / self.draft_tokens if self.draft_tokens else None

    @property
    def se(self) -> float | None:
        return request_stats.pooled_alpha_se(self.requests, self.accepted, self.draft_tokens, self.saa, self.sdd, self.sad)


@cache
def _values(cls: type) -> operator.attrgetter:
    """The tuple of a sums class's fields, in order."""
    return operator.attrgetter(*(f.name for f in fields(cls)))


def is_power_of_two(n: float) -> bool:
    return n >= 1 and float(n).is_integer() and (int(n) & (int(n) - 1)) == 0


def split(bands: Iterable[tuple[int, ContextSums]], boundary: int) -> tuple[ContextSums, ContextSums]:
    """(short, long): the bands below `boundary` summed, and those at or above it (band b starts at 2^b)."""
    if not is_power_of_two(boundary):
        raise ValueError(f"boundary must be a power of two (got {boundary})")
    short, long = ContextSums(), ContextSums()
    for b, s in bands:
        if 2 ** b >= boundary:
            long = long + s
        else:
            short = short + s
    return short, long


def context_drift(short: ContextSums, long: ContextSums, *, boundary: int, margin: float, recover_margin: float,
                  min_drafts: float, window: float, z: float = request_stats.Z95) -> Evaluation:
    """One evaluation of the rule (see the module docstring). value: α_long; threshold: α_short − margin."""
    a_s, a_l = short.alpha, long.alpha
    diff = a_s - a_l if a_s is not None and a_l is not None else None
    se_s, se_l = short.se, long.se
    se = math.sqrt(se_s ** 2 + se_l ** 2) if se_s is not None and se_l is not None else None
    low = diff - z * se if diff is not None and se is not None else None
    high = diff + z * se if diff is not None and se is not None else None
    line = a_s - margin if a_s is not None else None
    values = {"window": window, "boundary_prompt_tokens": boundary, "alpha_short": a_s, "alpha_long": a_l,
              "difference": diff, "difference_interval": [low, high], "margin": margin,
              "recover_margin": recover_margin, "drafts_short": short.drafts, "drafts_long": long.drafts,
              "requests_short": short.requests, "requests_long": long.requests, "min_drafts": min_drafts}
    for side, s in (("short", short), ("long", long)):
        if s.drafts < min_drafts or s.requests < 2 or s.alpha is None:
            where = f"below {boundary:,}" if side == "short" else f"at or above {boundary:,}"
            return Evaluation("no_data", a_l, line, f"too little volume with prompts {where} tokens "
                              f"({s.drafts:.0f} drafts from {s.requests} requests; at least {min_drafts:.0f} "
                              "drafts and 2 requests needed)", values)
    assert diff is not None and low is not None and high is not None
    text = (f"long-context alpha {a_l:.3f} (prompts of {boundary:,}+ tokens) vs {a_s:.3f} below: difference "
            f"{diff:.3f}, 95 % interval {low:.3f} to {high:.3f}, margin {margin:g}")
    if low > margin:
        return Evaluation("breached", a_l, line, text, values)
    if low <= margin - recover_margin:
        return Evaluation("ok", a_l, line, text, values)
    return Evaluation("hold", a_l, line, text + " (inside the recovery band)", values)
