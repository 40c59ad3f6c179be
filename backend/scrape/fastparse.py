"""A fast reader of the plain vLLM exposition, for the direct scrape of many targets.

prometheus_client's parser costs ~50-100 µs a line in Python (a character loop per label set); this one
checks the whole text with one compiled regex and builds label dicts only for the series specwatch keeps
(found by a second regex on their exact names). It accepts only the plain form vLLM and prometheus_client
write, and answers None for anything else, so the caller falls back to the full parser
(backend.scrape.parse.parse_full), which then gives the result or the refusal:

- the text: printable ASCII, newlines and tabs only, no backslash (so no escapes anywhere);
- a sample line: `name{label="value",...} value` or `name value`, one space, no timestamp, no exemplar,
  no trailing comma, no space around it; label names not reserved (`__...`), none twice in a set; a
  number the full parser reads as well;
- a comment line: starts with `#`; `# HELP name ...` and `# TYPE name type` (a known type) with a plain
  name; no sample named as a `counter` TYPE line without `_total` (the full parser renames it).

Every line is checked, the ones whose series are not kept too: a malformed line anywhere is the full
parser's refusal, so it must not pass here. A kept value the checks refuse (negative, not finite, no
model_name) also falls back, so the refusal's text is the full parser's own. Whenever this returns a
result, the full parser returns an equal one (tests/scrape/test_fastparse.py).
"""

from __future__ import annotations

import functools
import math
import re

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'(?!__)[a-zA-Z_][a-zA-Z0-9_]*="[^"\n]*"'
_NUMBER = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Inf|NaN"
_SAMPLE = rf"{_NAME}(?:\{{(?:{_LABEL}(?:,{_LABEL})*)?\}})? (?:{_NUMBER})"
VALID = re.compile(rf"(?:(?:{_SAMPLE}|#[^\n]*)?\n)*(?:{_SAMPLE}|#[^\n]*)?")
VALUE = re.compile(r'="[^"\n]*"')
LABEL_NAMES = re.compile(r"\n[^#\n][^{\n]*\{([^}\n]*)\}")  # of every sample line, its values taken out
COMMENT = re.compile(r"\n(#[^\n]*)")
METRIC_NAME = re.compile(_NAME)
PAIR = re.compile(r'([^=,]+)="([^"]*)"')  # one label of a VALID label text (its values hold no `"`)
TYPES = {"counter", "gauge", "summary", "histogram", "gaugehistogram", "unknown", "info", "stateset", "untyped"}


@functools.lru_cache(maxsize=16)
def _kept(names: frozenset[str]) -> re.Pattern[str]:
    """The lines of the kept series (exact names): name, label text (without braces), number."""
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"\n({alternatives})(?:\{{([^\n]*)\}})? ([^ \n]*)(?=\n|\Z)")


@functools.lru_cache(maxsize=64)
def _named(names: frozenset[str]) -> re.Pattern[str]:
    """A sample line of any of these names."""
    return re.compile(rf"\n(?:{'|'.join(re.escape(n) for n in names)})[{{ ]")


def _plain(text: str) -> bool:
    """Printable ASCII, newlines and tabs only, and no backslash."""
    rest = text.replace("\n", "").replace("\t", "")
    return rest.isascii() and rest.isprintable() and "\\" not in rest


def _duplicate_label(lines: str) -> bool:
    """Whether a label set names a label twice (`lines`: VALID text after a newline)."""
    for names in set(LABEL_NAMES.findall(VALUE.sub("", lines))):
        split = names.split(",")
        if len(set(split)) != len(split):
            return True
    return False


def _comments_plain(text: str) -> frozenset[str] | None:
    """The names of `counter` TYPE lines without `_total`, or None if a HELP/TYPE line is not plain."""
    counters = set()
    for line in COMMENT.findall(text):
        parts = line.split(None, 3)
        if len(parts) < 2 or parts[1] not in ("HELP", "TYPE"):
            continue
        if any('"' in p for p in parts[:3]):
            return None
        if parts[1] == "TYPE":
            if len(parts) < 4 or parts[3] not in TYPES or parts[2] == "_total" or not METRIC_NAME.fullmatch(parts[2]):
                return None
            if parts[3] == "counter" and not parts[2].endswith("_total"):
                counters.add(parts[2])
        elif len(parts) > 2 and not METRIC_NAME.fullmatch(parts[2]):
            return None
    return frozenset(counters)


def parse_fast(text: str, wanted: dict, created: dict, unlabelled: frozenset[str] = frozenset()
               ) -> tuple[list[tuple[str, dict[str, str], float]], list[tuple[str, dict[str, str], float]]] | None:
    """(samples, created) as backend.scrape.parse.parse keeps them, or None: use the full parser. A kept sample
    needs a `model_name` label unless its name is in `unlabelled` (an engine without one: llama.cpp)."""
    if not _plain(text) or VALID.fullmatch(text) is None:
        return None
    lines = "\n" + text  # every line after a newline: the patterns below start with one
    if _duplicate_label(lines):
        return None
    counters = _comments_plain(lines)
    if counters is None or (counters and _named(counters).search(lines)):
        return None
    samples: list = []
    created_out: list = []
    for name, label_text, number in _kept(frozenset(wanted) | frozenset(created)).findall(lines):
        if label_text:
            if '=",' in label_text:  # a value starting with a comma (or one ending in `=`): the split would cut it
                labels = dict(PAIR.findall(label_text))
            else:
                labels = dict(pair.split('="', 1) for pair in label_text[:-1].split('",'))
        else:
            labels = {}
        if number[0] == "-":
            return None
        value = float(number)
        if not math.isfinite(value):
            return None
        if name in wanted:
            if "model_name" not in labels and name not in unlabelled:
                return None
            samples.append((name, labels, value))
        else:
            created_out.append((created[name], labels, value))
    return samples, created_out
