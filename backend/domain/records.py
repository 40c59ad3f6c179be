"""What one pool reported over one bucket: the additive increases the fact table stores (pure types)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple


def known_add(a: float | None, b: float | None) -> float | None:
    """a + b where both were reported, the one reported where only one was, None (not reported) for neither."""
    return b if a is None else a if b is None else a + b


class PoolKey(NamedTuple):
    model_name: str
    traffic_class: str
    spec_mode: str


class ReplicaKey(NamedTuple):
    """One replica of a pool: the Prometheus `instance` (or pod, or the scrape target) and vLLM's `engine`."""

    instance: str
    engine: str


@dataclass
class Histogram:
    """Increases of one histogram family over a bucket: finite bounds, cumulative counts per bound with the
    +Inf count last (len(counts) == len(bounds) + 1), and the _sum/_count increases."""

    bounds: tuple[float, ...]
    counts: list[float]
    sum: float | None = None
    count: float | None = None

    def as_pairs(self) -> list[tuple[float, float]]:
        return list(zip((*self.bounds, math.inf), self.counts, strict=True))


HISTOGRAM_FIELDS = ("itl", "tpot", "ttft")
SCALAR_FIELDS = (
    "drafts",
    "draft_tokens",
    "accepted_tokens",
    "generation_tokens",
    "prompt_tokens",
    "finished_requests",
    "preemptions",
    "running_mean",
)

ESTIMATE_FIELDS = ("est_weight_tokens", "est_verify_steps", "est_accepted_tokens", "est_draft_tokens")


@dataclass
class BucketRecord:
    pool: PoolKey
    bucket_start: float  # unix seconds; the bucket is (start, start + width]
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    accepted_per_pos: list[float] | None = None
    itl: Histogram | None = None
    tpot: Histogram | None = None
    ttft: Histogram | None = None
    generation_tokens: float | None = None
    prompt_tokens: float | None = None
    finished_requests: float | None = None
    preemptions: float | None = None
    running_mean: float | None = None
    restarts: int | None = None
    flags: list[str] = field(default_factory=list)
    dips: dict[str, int] = field(default_factory=dict)  # counter series -> small drops not read as resets
    gap_seconds: float = 0.0  # > 0: holds whole the increase over a gap this long (samples on both sides)
    engine: str | None = None  # the engine whose series gave it (backend.domain.engines); None: not known
    # estimated spec-decode parts (SGLang's gauges, backend.domain.engines.estimate): never exact counts,
    # never added to drafts / draft_tokens / accepted_tokens
    est_weight_tokens: float | None = None
    est_verify_steps: float | None = None
    est_accepted_tokens: float | None = None
    est_draft_tokens: float | None = None
    drafter: str | None = None  # the pool's drafter label at the bucket's end (the deployment sets it)
    vllm_version: str | None = None  # the pool's vLLM version label at the bucket's end

    def is_empty(self) -> bool:
        scalars = (getattr(self, name) for name in SCALAR_FIELDS)
        hists = (getattr(self, name) for name in HISTOGRAM_FIELDS)
        return (all(v is None for v in scalars) and self.accepted_per_pos is None and all(h is None for h in hists)
                and all(getattr(self, name) is None for name in ESTIMATE_FIELDS))

    @property
    def k(self) -> int | None:
        return len(self.accepted_per_pos) if self.accepted_per_pos else None


def histogram(rec: BucketRecord, field: str) -> Histogram:
    """The record's histogram for `field`, created empty when the first of its series arrives."""
    hist = getattr(rec, field)
    if hist is None:
        hist = Histogram(bounds=(), counts=[])
        setattr(rec, field, hist)
    return hist


def set_per_position(rec: BucketRecord, by_position: dict[str, float]) -> None:
    """accepted_per_pos from {position label: increase}; a missing position in 0..K-1 becomes NaN (refused)."""
    positions = sorted(int(p) for p in by_position if p.isdigit())
    k = positions[-1] + 1 if positions else 0
    rec.accepted_per_pos = [by_position.get(str(i), math.nan) for i in range(k)] or None


def set_buckets(rec: BucketRecord, field: str, by_le: dict[str, float]) -> None:
    """Cumulative bucket increases from {le label: increase}, sorted by le, +Inf last."""
    bounds, order = _le_order(tuple(by_le))
    values = list(by_le.values())
    hist = histogram(rec, field)
    hist.bounds = bounds
    hist.counts = [values[i] for i in order]


@functools.lru_cache(maxsize=1024)
def _le_order(les: tuple[str, ...]) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """(finite bounds in order, the labels' positions in that order) of a set of le labels."""
    items = sorted(((math.inf if le in ("+Inf", "Inf", "inf") else float(le), i) for i, le in enumerate(les)),
                   key=lambda kv: kv[0])
    return tuple(le for le, _ in items if math.isfinite(le)), tuple(i for _, i in items)


class ConfigSeen(NamedTuple):
    """A pool's configuration in one bucket (start, start + width]: None where the bucket did not report it."""

    start: datetime
    num_spec_tokens: int | None = None
    drafter: str | None = None
    vllm_version: str | None = None


class PoolSeen(NamedTuple):
    """What one batch saw of a pool: its first bucket start, its last bucket end, the bucket width, and its
    configuration per bucket in time order (the history of drafter, K and vLLM version is built from it)."""

    first: datetime
    end: datetime
    width: int
    config: tuple[ConfigSeen, ...] = ()
