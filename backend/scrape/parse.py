"""Read a vLLM /metrics exposition with prometheus_client's parser, keeping only the series specwatch uses.

Samples are matched by their exact name (`..._total`, `..._bucket`, `..._sum`, `..._count`, gauges),
never by prefix: a prefix match would add `_created` timestamps into the counts (vLLM PR #41916).
`<name>_created` values are kept apart, per series, for restart detection.

parse() reads the plain form vLLM writes with backend.scrape.fastparse (~50x faster) and anything else
(escapes, timestamps, exemplars, odd comments, a value it refuses) with the full parser, parse_full()."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from backend.domain.families import FAMILIES, Family
from backend.scrape.fastparse import parse_fast

SAMPLE_FAMILY: dict[str, Family] = {}  # exact sample name -> its family
WANTED: dict[str, str] = {}  # sample name -> family base name (the key _created values are filed under)
for _fam in FAMILIES:
    if _fam.kind == "histogram":
        for _suffix in ("_bucket", "_sum", "_count"):
            SAMPLE_FAMILY[_fam.metric + _suffix] = _fam
            WANTED[_fam.metric + _suffix] = _fam.metric
    else:
        SAMPLE_FAMILY[_fam.metric] = _fam
        WANTED[_fam.metric] = _fam.metric.removesuffix("_total")
CREATED = {base + "_created": base for base in WANTED.values()}


class ExpositionError(ValueError):
    """The text is not a valid Prometheus exposition, or holds impossible raw values."""


@dataclass
class ParsedScrape:
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)
    created: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def parse(text: str) -> ParsedScrape:
    fast = parse_fast(text, WANTED, CREATED)
    if fast is None:
        return parse_full(text)
    return ParsedScrape(*fast)


def parse_full(text: str) -> ParsedScrape:
    """prometheus_client's parser: every form of the text format, and the refusal of a malformed one."""
    out = ParsedScrape()
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in WANTED:
                    _check(s.name, s.labels, s.value)
                    out.samples.append((s.name, dict(s.labels), float(s.value)))
                elif s.name in CREATED:
                    out.created.append((CREATED[s.name], dict(s.labels), float(s.value)))
    except ExpositionError:
        raise
    except Exception as exc:  # the parser raises ValueError/TypeError/IndexError on malformed text
        raise ExpositionError(f"malformed exposition: {exc}") from exc
    return out


def _check(name: str, labels: dict[str, str], value: float) -> None:
    if not math.isfinite(value):
        raise ExpositionError(f"{name}{labels} = {value}: counters and gauges must be finite")
    if value < 0:
        raise ExpositionError(f"{name}{labels} = {value}: negative value")
    if "model_name" not in labels:
        raise ExpositionError(f"{name}{labels}: no model_name label")
