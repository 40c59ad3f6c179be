"""PromQL text, and nothing else: one builder per question the collector asks Prometheus.

Every query aggregates `by` the pool labels (plus `position` / `le` where they apply), so the number of
queries per cycle depends on the number of metric families, never on the number of pools or instances.
Increases are taken per series first, then summed (spec-math §1.3).

A family with older names (backend.domain.vllm_versions) is asked as `increase(current) or increase(older)`
per series, before the sum: a target that has only the older name counts under it, one that has both counts
once, under the current name (`or` keeps the left side's series where the label sets match)."""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.families import FAMILIES, RESTART_MARKER, Family


@dataclass(frozen=True)
class PoolLabels:
    class_label: str = "traffic_class"
    mode_label: str = "spec_mode"
    extra_matchers: str = ""  # e.g. 'namespace="prod"'

    def by(self, *extra: str) -> str:
        return ", ".join(("model_name", self.class_label, self.mode_label, *extra))

    def selector(self, metric: str) -> str:
        return f"{metric}{{{self.extra_matchers}}}" if self.extra_matchers else metric


@dataclass(frozen=True)
class Query:
    field: str  # record field the answer fills
    part: str  # "value" | "bucket" | "sum" | "count" | "restarts"
    group: str | None  # extra grouping label in the answer: position / le / None
    promql: str


def increase(labels: PoolLabels, metric: str | tuple[str, ...], width: int, *extra_by: str) -> str:
    """The summed increase of a series name, or of the first of several names each series has."""
    names = (metric,) if isinstance(metric, str) else metric
    inner = " or ".join(f"increase({labels.selector(n)}[{width}s])" for n in names)
    return f"sum by ({labels.by(*extra_by)}) ({inner})"


def _names(family: Family, suffix: str = "") -> tuple[str, ...]:
    return tuple(n + suffix for n in family.names)


def family_queries(labels: PoolLabels, family: Family, width: int) -> list[Query]:
    f, m = family.field, family.metric
    if family.kind == "counter":
        return [Query(f, "value", None, increase(labels, _names(family), width))]
    if family.kind == "per_pos":
        return [Query(f, "value", "position", increase(labels, _names(family), width, "position"))]
    if family.kind == "gauge":
        return [Query(f, "value", None,
                      f"sum by ({labels.by()}) (avg_over_time({labels.selector(m)}[{width}s]))")]
    return [
        Query(f, "bucket", "le", increase(labels, _names(family, "_bucket"), width, "le")),
        Query(f, "sum", None, increase(labels, _names(family, "_sum"), width)),
        Query(f, "count", None, increase(labels, _names(family, "_count"), width)),
    ]


def restart_query(labels: PoolLabels, width: int) -> Query:
    return Query("restarts", "value", None,
                 f"sum by ({labels.by()}) (changes({labels.selector(RESTART_MARKER)}[{width}s]))")


DIP_LABEL = "specwatch_counter"  # the dip query's answer: which counter dipped


def dip_counters() -> dict[str, tuple[str, str]]:
    """Every counter series the cycle stores an increase of -> (its `_created` series, the record field):
    counters and per-position counters by name, histograms by their `_count` (their `+Inf` bucket)."""
    out = {}
    for fam in FAMILIES:
        for m in fam.names:  # older names too: a target that has only them dips under them
            if fam.kind == "histogram":
                out[f"{m}_count"] = (f"{m}_created", fam.field)
            elif fam.kind in ("counter", "per_pos"):
                out[m] = (m.removesuffix("_total") + "_created", fam.field)
    return out


def dip_query(labels: PoolLabels, width: int) -> Query:
    """Drops of each stored counter that are not restarts: its resets() beyond the changes of its `_created`
    (both summed over the pool's series), labelled DIP_LABEL=<counter>; one request for all counters (`or`
    of label sets that differ by that label). increase() reads every drop as a reset (adding the whole
    counter); where the exporter shows `_created` and it did not change, the drop was a dip. Pools without
    `_created` give no answer (no evidence)."""
    by = labels.by()
    parts = [f'label_replace(sum by ({by}) (resets({labels.selector(metric)}[{width}s])) - '
             f'sum by ({by}) (changes({labels.selector(created)}[{width}s])), "{DIP_LABEL}", "{metric}", '
             f'"__name__", ".*")'
             for metric, (created, _) in dip_counters().items()]
    return Query("dips", "value", DIP_LABEL, " or ".join(parts))


REPLICA_FIELDS = ("drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos", "itl", "tpot")


def replica_queries(labels: PoolLabels, width: int, replica_labels: tuple[str, ...]) -> list[Query]:
    """The per-replica queries (10, whatever the number of replicas): the spec-decode and TPOT/ITL families
    summed by the pool labels plus the replica labels (instance, engine)."""
    out = []
    for fam in FAMILIES:
        if fam.field in REPLICA_FIELDS:
            for q in family_queries(labels, fam, width):
                by = labels.by(*((q.group,) if q.group else ()))
                out.append(Query(q.field, q.part, q.group,
                                 q.promql.replace(f"sum by ({by})", f"sum by ({by}, {', '.join(replica_labels)})", 1)))
    return out


def cycle_queries(labels: PoolLabels, width: int) -> list[Query]:
    """All queries of one collection cycle, whatever the number of pools."""
    out = [q for fam in FAMILIES for q in family_queries(labels, fam, width)]
    out.append(restart_query(labels, width))
    out.append(dip_query(labels, width))
    return out


# --- raw samples ----------------------------------------------------------------------------------------
#
# The exact path: instead of increase() per bucket, the collector reads every series' raw samples over the
# chunk (plus a lookback for the sample before its first bucket) with one range selector per family part,
# and computes the increases between consecutive samples itself (backend.prom.assemble.assemble_raw).
# Range vectors cannot be aggregated, so the answers are per series; still one request per family part,
# whatever the number of pools.


@dataclass(frozen=True)
class RawQuery:
    field: str  # record field the answer fills; "created" for the `_created` series of every counter
    part: str  # "value" | "bucket" | "sum" | "count" | "created"
    group: str | None  # position / le / None
    selector: str  # a series selector, without the range


def names_selector(labels: PoolLabels, names: list[str]) -> str:
    """A selector for the series of any of `names` (one request), with the configured extra matchers."""
    matchers = ['__name__=~"' + "|".join(names) + '"']  # metric names hold no regex metacharacter but `:`
    if labels.extra_matchers:
        matchers.append(labels.extra_matchers)
    return "{" + ",".join(matchers) + "}"


def created_of(metric: str) -> str:
    """The `_created` series of a stored counter series: histograms' parts share their family's."""
    for fam in FAMILIES:
        if fam.kind == "histogram":
            for m in fam.names:
                if metric in (f"{m}_bucket", f"{m}_sum", f"{m}_count"):
                    return f"{m}_created"
    return metric.removesuffix("_total") + "_created"


def raw_queries(labels: PoolLabels) -> list[RawQuery]:
    """The raw-sample reads of a chunk: every counter, the per-position counter, each histogram's
    `_bucket`, `_sum` and `_count`, and (one more request) the `_created` series of all of them. A family with
    older names asks for all its names in one selector; backend.prom.assemble.series_increases keeps one
    reading per series (the current name where a series has both)."""

    def sel(fam: Family, suffix: str = "") -> str:
        names = _names(fam, suffix)
        return labels.selector(names[0]) if len(names) == 1 else names_selector(labels, list(names))

    out: list[RawQuery] = []
    for fam in FAMILIES:
        f = fam.field
        if fam.kind == "counter":
            out.append(RawQuery(f, "value", None, sel(fam)))
        elif fam.kind == "per_pos":
            out.append(RawQuery(f, "value", "position", sel(fam)))
        elif fam.kind == "histogram":
            out += [RawQuery(f, "bucket", "le", sel(fam, "_bucket")),
                    RawQuery(f, "sum", None, sel(fam, "_sum")),
                    RawQuery(f, "count", None, sel(fam, "_count"))]
    created = sorted({c for c, _field in dip_counters().values()})
    out.append(RawQuery("created", "created", None, names_selector(labels, created)))
    return out


def gauge_queries(labels: PoolLabels, width: int) -> list[Query]:
    """The gauges (a mean per bucket, not an increase): range queries as with increase()."""
    return [q for fam in FAMILIES if fam.kind == "gauge" for q in family_queries(labels, fam, width)]


def config_query(labels: PoolLabels, names: tuple[str, str]) -> str:
    """Per pool and (drafter, vLLM version) label pair, the time of its latest sample (`names`: the labels
    the deployment sets; vLLM exposes neither): at a bucket's end, the pair with the latest sample is the
    one in force (a replaced series lingers for Prometheus' lookback)."""
    return f"max by ({labels.by(*names)}) (timestamp({labels.selector('vllm:num_requests_running')}))"
