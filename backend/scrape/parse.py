"""Read an engine's /metrics exposition (vLLM, llama.cpp, SGLang: backend.domain.engines), keeping only the
series specwatch uses.

Samples are matched by their exact name (`..._total`, `..._bucket`, `..._sum`, `..._count`, gauges),
never by prefix: a prefix match would add `_created` timestamps into the counts (vLLM PR #41916).
`<name>_created` values are kept apart, per series, for restart detection.

Names come from the names table (backend.domain.vllm_versions, through backend.domain.families): a series
under an older name (`vllm:time_per_output_token_seconds`, before 0.10.2) is read under the current one; where
the exposition has the same series under both names (0.10.2 to 0.11, and later with hidden metrics shown),
only the current one is read. An exposition of vLLM's V0 engine with speculative decoding is refused
(UnsupportedEngine): its spec-decode counters re-add their running totals at every log interval.

parse() reads the plain form vLLM writes with backend.scrape.fastparse (~50x faster) and anything else
(escapes, timestamps, exemplars, odd comments, a value it refuses) with the full parser, parse_full()."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from backend.domain.engines import engines
from backend.domain.families import ALL_FAMILIES, CURRENT_BASE, CURRENT_SAMPLE, Family
from backend.domain.vllm_versions import MINIMUM_VERSION, V0_MARKERS
from backend.scrape.fastparse import parse_fast

SAMPLE_FAMILY: dict[str, Family] = {}  # exact sample name -> its family
WANTED: dict[str, str] = {}  # sample name -> family base name (the key _created values are filed under)
for _fam in ALL_FAMILIES:
    for _metric in _fam.names:
        for _sample in _fam.sample_names(_metric):
            SAMPLE_FAMILY[_sample] = _fam
            WANTED[_sample] = _metric.removesuffix("_total")
CREATED = {base + "_created": base for base in WANTED.values()}
OLDER_NAMES = tuple(sorted(CURRENT_BASE))  # older family names, to look for in the text
# samples whose series carry no model label: their engine has none (the target's labels name the model)
UNLABELLED: frozenset[str] = frozenset(
    name for name, fam in SAMPLE_FAMILY.items() if engines()[fam.engine].model_label is None)
V0_SAMPLE = re.compile(r"(?m)^(?:" + "|".join(re.escape(m) for m in V0_MARKERS) + r")[{ ]")


class ExpositionError(ValueError):
    """The text is not a valid Prometheus exposition, or holds impossible raw values."""

    rule = "malformed_exposition"  # the rejection rule a refused scrape is stored under


class UnsupportedEngine(ExpositionError):
    """The exposition comes from a vLLM engine specwatch does not read (the V0 engine's spec decoding)."""

    rule = "unsupported_vllm_version"


@dataclass
class ParsedScrape:
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)
    created: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def parse(text: str) -> ParsedScrape:
    if any(m in text for m in V0_MARKERS) and V0_SAMPLE.search(text):
        raise UnsupportedEngine(
            f"the exposition has vLLM V0 speculative-decoding gauges ({', '.join(V0_MARKERS)}): the V0 engine's "
            f"spec-decode counters are not counts; specwatch reads the V1 engine, vLLM {MINIMUM_VERSION} or later")
    fast = parse_fast(text, WANTED, CREATED, UNLABELLED)
    out = parse_full(text) if fast is None else ParsedScrape(*fast)
    if any(name in text for name in OLDER_NAMES):
        out = current_names(out)
    return out


def _labels_key(labels: dict[str, str]) -> frozenset:
    return frozenset(labels.items())


def current_names(parsed: ParsedScrape) -> ParsedScrape:
    """Series under an older name renamed to the current one, or left out where the exposition has the same
    series (same labels) under the current name: one reading per series, never both."""
    return ParsedScrape(samples=_renamed(parsed.samples, CURRENT_SAMPLE),
                        created=_renamed(parsed.created, CURRENT_BASE))


def _renamed(rows: list, current: dict[str, str]) -> list:
    have = {(n, _labels_key(lb)) for n, lb, _v in rows if n not in current}
    out = []
    for name, labels, value in rows:
        new = current.get(name)
        if new is None:
            out.append((name, labels, value))
        elif (new, _labels_key(labels)) not in have:
            out.append((new, labels, value))
    return out


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
    if "model_name" not in labels and name not in UNLABELLED:
        raise ExpositionError(f"{name}{labels}: no model_name label")


def engines_in(parsed: ParsedScrape) -> set[str]:
    """The engines whose series a parsed exposition holds (by the family of each kept sample)."""
    return {SAMPLE_FAMILY[name].engine for name, _labels, _v in parsed.samples}


class EngineMismatch(ExpositionError):
    """The exposition is not (only) of the engine its target declares, or mixes engines."""

    rule = "engine_mismatch"


class NoModelLabel(ExpositionError):
    """The engine's series name no model and the target gives none."""

    rule = "no_model_label"


def target_engine(parsed: ParsedScrape, target_labels: dict[str, str], declared: str | None = None) -> str | None:
    """The engine of a target's parsed exposition: the one its kept series' names say (`vllm:`, `llamacpp:`,
    `sglang:`), which must be the `declared` one if the target declares it; None if it holds no kept series.
    EngineMismatch if it mixes engines or is not the declared one; NoModelLabel if its engine's series have
    no model label (llama.cpp) and the target's labels have no `model_name`."""
    found = engines_in(parsed)
    if len(found) > 1:
        raise EngineMismatch(f"the exposition mixes engines ({', '.join(sorted(found))}): one target, one engine")
    got = next(iter(found), None)
    if declared is not None and got is not None and got != declared:
        raise EngineMismatch(f"the target is declared as engine {declared!r} but its exposition is {got!r}")
    if got is not None and engines()[got].model_label is None and not target_labels.get("model_name"):
        raise NoModelLabel(f"{engines()[got].label} exposes no model label: give the target a model_name label")
    return got
