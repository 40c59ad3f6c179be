"""PromQL text, and nothing else: one builder per question the collector asks Prometheus.

Every query aggregates `by` the pool labels (plus `position` / `le` where they apply), so the number of
queries per cycle depends on the number of metric families, never on the number of pools or instances.
Increases are taken per series first, then summed (spec-math §1.3).

A family with older names (backend.domain.vllm_versions) is asked as `increase(current) or increase(older)`
per series, before the sum: a target that has only the older name counts under it, one that has both counts
once, under the current name (`or` keeps the left side's series where the label sets match).

Every builder asks vLLM's families by default; `engines` (backend.domain.engines: vllm, llamacpp, sglang) adds
the others' families as queries of their own, each Query naming its engine. llama.cpp's series have no
model label: Prometheus must add `model_name` (and the class and mode labels) as target labels. SGLang's
spec-decode gauges (kind `estimate`) are read as raw samples only (estimate_queries), never summed."""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.families import ALL_FAMILIES, RESTART_MARKER, Family, families_of

VLLM_ONLY = ("vllm",)


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
    engine: str = "vllm"  # the engine whose family it asks (backend.domain.engines)


def increase(labels: PoolLabels, metric: str | tuple[str, ...], width: int, *extra_by: str) -> str:
    """The summed increase of a series name, or of the first of several names each series has."""
    names = (metric,) if isinstance(metric, str) else metric
    inner = " or ".join(f"increase({labels.selector(n)}[{width}s])" for n in names)
    return f"sum by ({labels.by(*extra_by)}) ({inner})"


def _names(family: Family, suffix: str = "") -> tuple[str, ...]:
    return tuple(n + suffix for n in family.names)


def family_queries(labels: PoolLabels, family: Family, width: int) -> list[Query]:
    f, m, e = family.field, family.metric, family.engine
    if family.kind == "estimate":
        return []  # read as raw samples (estimate_queries), never summed
    if family.kind == "counter":
        return [Query(f, "value", None, increase(labels, _names(family), width), e)]
    if family.kind == "per_pos":
        return [Query(f, "value", "position", increase(labels, _names(family), width, "position"), e)]
    if family.kind == "gauge":
        return [Query(f, "value", None,
                      f"sum by ({labels.by()}) (avg_over_time({labels.selector(m)}[{width}s]))", e)]
    return [
        Query(f, "bucket", "le", increase(labels, _names(family, "_bucket"), width, "le"), e),
        Query(f, "sum", None, increase(labels, _names(family, "_sum"), width), e),
        Query(f, "count", None, increase(labels, _names(family, "_count"), width), e),
    ]


def restart_query(labels: PoolLabels, width: int, marker: str = RESTART_MARKER, engine: str = "vllm") -> Query:
    return Query("restarts", "value", None,
                 f"sum by ({labels.by()}) (changes({labels.selector(marker)}[{width}s]))", engine)


def restart_markers(engines: tuple[str, ...]) -> list[tuple[str, str]]:
    """(engine, `_created` series of its restart counter) of the engines that write `_created` (llama-server
    writes none: its restarts are only seen as drops, on the raw path)."""
    return [(f.engine, f.metric.removesuffix("_total") + "_created") for f in families_of(engines)
            if f.field == "generation_tokens" and f.engine != "llamacpp"]


DIP_LABEL = "specwatch_counter"  # the dip query's answer: which counter dipped


def dip_counters(engines: tuple[str, ...] = VLLM_ONLY) -> dict[str, tuple[str, str]]:
    """Every counter series the cycle stores an increase of -> (its `_created` series, the record field):
    counters and per-position counters by name, histograms by their `_count` (their `+Inf` bucket)."""
    out = {}
    for fam in families_of(engines):
        for m in fam.names:  # older names too: a target that has only them dips under them
            if fam.kind == "histogram":
                out[f"{m}_count"] = (f"{m}_created", fam.field)
            elif fam.kind in ("counter", "per_pos"):
                out[m] = (m.removesuffix("_total") + "_created", fam.field)
    return out


def dip_query(labels: PoolLabels, width: int, engines: tuple[str, ...] = VLLM_ONLY) -> Query:
    """Drops of each stored counter that are not restarts: its resets() beyond the changes of its `_created`
    (both summed over the pool's series), labelled DIP_LABEL=<counter>; one request for all counters (`or`
    of label sets that differ by that label). increase() reads every drop as a reset (adding the whole
    counter); where the exporter shows `_created` and it did not change, the drop was a dip. Pools without
    `_created` give no answer (no evidence)."""
    by = labels.by()
    parts = [f'label_replace(sum by ({by}) (resets({labels.selector(metric)}[{width}s])) - '
             f'sum by ({by}) (changes({labels.selector(created)}[{width}s])), "{DIP_LABEL}", "{metric}", '
             f'"__name__", ".*")'
             for metric, (created, _) in dip_counters(engines).items()]
    return Query("dips", "value", DIP_LABEL, " or ".join(parts))


REPLICA_FIELDS = ("drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos", "itl", "tpot")


def replica_queries(labels: PoolLabels, width: int, replica_labels: tuple[str, ...],
                    engines: tuple[str, ...] = VLLM_ONLY) -> list[Query]:
    """The per-replica queries (10 per engine, whatever the number of replicas): the spec-decode and TPOT/ITL
    families summed by the pool labels plus the replica labels (instance, engine)."""
    out = []
    for fam in families_of(engines):
        if fam.field in REPLICA_FIELDS:
            for q in family_queries(labels, fam, width):
                by = labels.by(*((q.group,) if q.group else ()))
                out.append(Query(q.field, q.part, q.group,
                                 q.promql.replace(f"sum by ({by})", f"sum by ({by}, {', '.join(replica_labels)})", 1),
                                 q.engine))
    return out


def cycle_queries(labels: PoolLabels, width: int, engines: tuple[str, ...] = VLLM_ONLY) -> list[Query]:
    """All queries of one collection cycle, whatever the number of pools."""
    out = [q for fam in families_of(engines) for q in family_queries(labels, fam, width)]
    if engines == VLLM_ONLY:
        out.append(restart_query(labels, width))
    else:
        out += [restart_query(labels, width, marker, engine) for engine, marker in restart_markers(engines)]
    out.append(dip_query(labels, width, engines))
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
    engine: str = "vllm"


def names_selector(labels: PoolLabels, names: list[str]) -> str:
    """A selector for the series of any of `names` (one request), with the configured extra matchers."""
    matchers = ['__name__=~"' + "|".join(names) + '"']  # metric names hold no regex metacharacter but `:`
    if labels.extra_matchers:
        matchers.append(labels.extra_matchers)
    return "{" + ",".join(matchers) + "}"


def created_of(metric: str) -> str:
    """The `_created` series of a stored counter series: histograms' parts share their family's."""
    for fam in ALL_FAMILIES:
        if fam.kind == "histogram":
            for m in fam.names:
                if metric in (f"{m}_bucket", f"{m}_sum", f"{m}_count"):
                    return f"{m}_created"
    return metric.removesuffix("_total") + "_created"


def raw_queries(labels: PoolLabels, engines: tuple[str, ...] = VLLM_ONLY) -> list[RawQuery]:
    """The raw-sample reads of a chunk: every counter, the per-position counter, each histogram's
    `_bucket`, `_sum` and `_count`, and (one more request) the `_created` series of all of them. A family with
    older names asks for all its names in one selector; backend.prom.assemble.series_increases keeps one
    reading per series (the current name where a series has both)."""

    def sel(fam: Family, suffix: str = "") -> str:
        names = _names(fam, suffix)
        return labels.selector(names[0]) if len(names) == 1 else names_selector(labels, list(names))

    out: list[RawQuery] = []
    for fam in families_of(engines):
        f, e = fam.field, fam.engine
        if fam.kind == "counter":
            out.append(RawQuery(f, "value", None, sel(fam), e))
        elif fam.kind == "per_pos":
            out.append(RawQuery(f, "value", "position", sel(fam), e))
        elif fam.kind == "histogram":
            out += [RawQuery(f, "bucket", "le", sel(fam, "_bucket"), e),
                    RawQuery(f, "sum", None, sel(fam, "_sum"), e),
                    RawQuery(f, "count", None, sel(fam, "_count"), e)]
    created = sorted({c for c, _field in dip_counters(engines).values()})
    out.append(RawQuery("created", "created", None, names_selector(labels, created)))
    return out


def estimate_queries(labels: PoolLabels, engines: tuple[str, ...] = VLLM_ONLY) -> list[RawQuery]:
    """The raw samples of the engines' estimate gauges (SGLang's accept length and rate), part `gauge`: with
    the generated-token counter's raw samples they give backend.domain.engines.estimate's parts."""
    return [RawQuery(fam.field, "gauge", None, labels.selector(fam.metric), fam.engine)
            for fam in families_of(engines) if fam.kind == "estimate"]


def gauge_queries(labels: PoolLabels, width: int, engines: tuple[str, ...] = VLLM_ONLY) -> list[Query]:
    """The gauges (a mean per bucket, not an increase): range queries as with increase()."""
    return [q for fam in families_of(engines) if fam.kind == "gauge" for q in family_queries(labels, fam, width)]


def config_query(labels: PoolLabels, names: tuple[str, str]) -> str:
    """Per pool and (drafter, vLLM version) label pair, the time of its latest sample (`names`: the labels
    the deployment sets; vLLM exposes neither): at a bucket's end, the pair with the latest sample is the
    one in force (a replaced series lingers for Prometheus' lookback)."""
    return f"max by ({labels.by(*names)}) (timestamp({labels.selector('vllm:num_requests_running')}))"
