"""The metric families specwatch collects, per engine, and the record field each one fills.

`FAMILIES` are vLLM's (its V1 engine); `ENGINE_FAMILIES` has every engine's (backend.domain.engines: vLLM,
llama.cpp, SGLang) and `ALL_FAMILIES` all of them, each Family naming its engine. A family of kind
`estimate` (SGLang's spec-decode gauges) fills no record field: backend.domain.engines.estimate reads it.

Built from the names table, backend.domain.vllm_versions: a family's `metric` is the current name, its
`older` names are read where an exposition has no series under the current one (never both for the same
series: the current name wins). Names as exposed (prometheus_client appends `_total` to counters).
Histograms are read as their `_bucket` (cumulative per `le`), `_sum` and `_count` series. See
tests/fixtures/vllm-metrics.md and docs/vllm-versions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.engines import engines
from backend.domain.engines.table import Kind


@dataclass(frozen=True)
class Family:
    field: str
    metric: str
    kind: Kind
    older: tuple[str, ...] = ()  # older names of the same family, read where the current one is absent
    engine: str = "vllm"  # the engine that exposes it (backend.domain.engines)

    @property
    def names(self) -> tuple[str, ...]:
        """The current name, then the older ones."""
        return (self.metric, *self.older)

    def sample_names(self, metric: str | None = None) -> tuple[str, ...]:
        """The exposed sample names of one of its names (the current one by default)."""
        m = metric or self.metric
        return tuple(m + s for s in ("_bucket", "_sum", "_count")) if self.kind == "histogram" else (m,)


ENGINE_FAMILIES: dict[str, tuple[Family, ...]] = {
    e.name: tuple(Family(r.field, r.names[0], r.kind, r.names[1:], e.name) for r in e.readings)
    for e in engines().values()
}
FAMILIES: tuple[Family, ...] = ENGINE_FAMILIES["vllm"]
ALL_FAMILIES: tuple[Family, ...] = tuple(f for fams in ENGINE_FAMILIES.values() for f in fams)


def families_of(names: tuple[str, ...] | list[str]) -> tuple[Family, ...]:
    """The families of the named engines, in the order given."""
    return tuple(f for n in names for f in ENGINE_FAMILIES[n])


BY_METRIC = {f.metric: f for f in FAMILIES}
BY_FIELD = {f.field: f for f in FAMILIES}

# Every pool exports this counter, spec mode or not: its resets are the pool's restarts, and a change of its
# `_created` value marks one.
RESTART_SERIES = BY_FIELD["generation_tokens"].metric
RESTART_MARKER = RESTART_SERIES.removesuffix("_total") + "_created"
# Every engine's restart counter (its output-token counter; llama-server writes no `_created`: only drops).
RESTART_SERIES_ALL: frozenset[str] = frozenset(
    f.metric for f in ALL_FAMILIES if f.field == "generation_tokens")

# An older sample name -> the current sample name of the same series (`..._bucket` -> `..._bucket`, ...).
CURRENT_SAMPLE: dict[str, str] = {
    old_sample: new_sample
    for f in ALL_FAMILIES for old in f.older
    for old_sample, new_sample in zip(f.sample_names(old), f.sample_names(), strict=True)
}
# The same for the `_created` series (keyed by family base name, as backend.scrape.parse files them).
CURRENT_BASE: dict[str, str] = {
    old.removesuffix("_total"): f.metric.removesuffix("_total") for f in ALL_FAMILIES for old in f.older
}
