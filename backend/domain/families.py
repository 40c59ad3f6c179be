"""The vLLM V1 metric families specwatch collects, and the record field each one fills.

Built from the names table, backend.domain.vllm_versions: a family's `metric` is the current name, its
`older` names are read where an exposition has no series under the current one (never both for the same
series: the current name wins). Names as exposed (prometheus_client appends `_total` to counters).
Histograms are read as their `_bucket` (cumulative per `le`), `_sum` and `_count` series. See
tests/fixtures/vllm-metrics.md and docs/vllm-versions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.vllm_versions import READINGS, Kind


@dataclass(frozen=True)
class Family:
    field: str
    metric: str
    kind: Kind
    older: tuple[str, ...] = ()  # older names of the same family, read where the current one is absent

    @property
    def names(self) -> tuple[str, ...]:
        """The current name, then the older ones."""
        return (self.metric, *self.older)

    def sample_names(self, metric: str | None = None) -> tuple[str, ...]:
        """The exposed sample names of one of its names (the current one by default)."""
        m = metric or self.metric
        return tuple(m + s for s in ("_bucket", "_sum", "_count")) if self.kind == "histogram" else (m,)


FAMILIES: tuple[Family, ...] = tuple(Family(r.field, r.metric, r.kind, r.older) for r in READINGS)

BY_METRIC = {f.metric: f for f in FAMILIES}
BY_FIELD = {f.field: f for f in FAMILIES}

# Every pool exports this counter, spec mode or not: its resets are the pool's restarts, and a change of its
# `_created` value marks one.
RESTART_SERIES = BY_FIELD["generation_tokens"].metric
RESTART_MARKER = RESTART_SERIES.removesuffix("_total") + "_created"

# An older sample name -> the current sample name of the same series (`..._bucket` -> `..._bucket`, ...).
CURRENT_SAMPLE: dict[str, str] = {
    old_sample: new_sample
    for f in FAMILIES for old in f.older
    for old_sample, new_sample in zip(f.sample_names(old), f.sample_names(), strict=True)
}
# The same for the `_created` series (keyed by family base name, as backend.scrape.parse files them).
CURRENT_BASE: dict[str, str] = {
    old.removesuffix("_total"): f.metric.removesuffix("_total") for f in FAMILIES for old in f.older
}
