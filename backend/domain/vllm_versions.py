"""The vLLM releases specwatch reads, and the metric name each release line exposes for each figure it reads.

This is the one table of names. backend.domain.families builds the families the parsers and the Prometheus
queries use from it (each figure's current name, and the older names read where they are the only ones);
docs/vllm-versions.md shows it (tests/scrape/test_vllm_versions.py checks the page against `markdown_table`);
tests parse an exposition of each release line with it.

Read from the vLLM sources of each release: `vllm/v1/metrics/loggers.py` and
`vllm/v1/spec_decode/metrics.py` (V1 engine), `vllm/engine/metrics.py` and `vllm/spec_decode/metrics.py`
(V0 engine). Names are as exposed: prometheus_client appends `_total` to a counter; a histogram is its
`_bucket`, `_sum` and `_count` series. Every V1 series carries `model_name` and `engine` labels.

The minimum is 0.8.5, the first release whose V1 engine exposes all four speculative-decoding counters
(`num_drafts` and the per-position counter came in 0.8.5; 0.8.3 and 0.8.4 have only draft and accepted tokens,
0.8.0 to 0.8.2 none, and no `engine` label). The V0 engine (the fallback in 0.8.x to 0.10.x, removed in
0.11) is not read: it adds its running totals to its spec-decode counters again at every log interval, so
their increases are not counts, and it has no draft count; an exposition carrying its spec-decode gauges is
refused (backend.scrape.parse).

Pure data and formatting: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "per_pos", "histogram", "gauge"]

MINIMUM_VERSION = "0.8.5"


@dataclass(frozen=True)
class Line:
    """A run of vLLM releases that expose the same names (as far as specwatch reads them)."""

    key: str
    label: str  # as the docs show it
    first: str  # its first release
    last: str | None  # its last release; None: up to the current one


LINES: tuple[Line, ...] = (
    Line("0.8", "0.8.5 – 0.10.1", "0.8.5", "0.10.1.1"),
    Line("0.10.2", "0.10.2", "0.10.2", "0.10.2"),
    Line("0.11", "0.11", "0.11.0", "0.11.2"),
    Line("0.12", "0.12 – 0.14", "0.12.0", "0.14.1"),
    Line("0.15", "0.15 and later", "0.15.0", None),
)
ALL = tuple(line.key for line in LINES)


@dataclass(frozen=True)
class Name:
    metric: str  # the family name as exposed (a counter with `_total`, a histogram without its suffixes)
    lines: tuple[str, ...]  # the release lines that expose it
    hidden: tuple[str, ...] = ()  # lines that expose it only with --show-hidden-metrics-for-version


@dataclass(frozen=True)
class Reading:
    """One figure specwatch reads: the record field it fills and its names, the current one first.

    Of the names a series has in one exposition, the first in this order is read and the others are not
    (never both: in 0.10.2 and 0.11 the two inter-token latency names carry the same observations)."""

    field: str
    kind: Kind
    what: str
    names: tuple[Name, ...]

    @property
    def metric(self) -> str:
        return self.names[0].metric

    @property
    def older(self) -> tuple[str, ...]:
        return tuple(n.metric for n in self.names[1:])

    def exposed_in(self, line: str) -> list[Name]:
        """The names a release line exposes for this figure by default, in reading order."""
        return [n for n in self.names if line in n.lines]

    def read_in(self, line: str) -> Name | None:
        """The name specwatch reads for this figure from a release line (None: the line has none)."""
        exposed = self.exposed_in(line)
        return exposed[0] if exposed else None


_SINCE_0_10_2 = ("0.10.2", "0.11", "0.12", "0.15")
_SINCE_0_11 = ("0.11", "0.12", "0.15")


def _always(field: str, kind: Kind, metric: str, what: str) -> Reading:
    """A figure with one name, exposed by every release line."""
    return Reading(field, kind, what, (Name(metric, ALL),))


READINGS: tuple[Reading, ...] = (
    _always("drafts", "counter", "vllm:spec_decode_num_drafts_total",
            "Drafts (one per request per verify step)"),
    _always("draft_tokens", "counter", "vllm:spec_decode_num_draft_tokens_total", "Draft tokens verified"),
    _always("accepted_tokens", "counter", "vllm:spec_decode_num_accepted_tokens_total",
            "Accepted draft tokens"),
    _always("accepted_per_pos", "per_pos", "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            "Accepted tokens per draft position (`position` label)"),
    Reading("itl", "histogram", "Inter-token latency, one sample per engine step",
            (Name("vllm:inter_token_latency_seconds", _SINCE_0_10_2),
             Name("vllm:time_per_output_token_seconds", ("0.8", "0.10.2", "0.11"), hidden=("0.12",)))),
    Reading("tpot", "histogram", "Time per output token, one sample per finished request",
            (Name("vllm:request_time_per_output_token_seconds", _SINCE_0_11),)),
    _always("ttft", "histogram", "vllm:time_to_first_token_seconds", "Time to first token"),
    _always("generation_tokens", "counter", "vllm:generation_tokens_total",
            "Output tokens (also the restart marker, by its `_created`)"),
    _always("prompt_tokens", "counter", "vllm:prompt_tokens_total", "Prompt tokens"),
    _always("finished_requests", "counter", "vllm:request_success_total", "Finished requests"),
    _always("preemptions", "counter", "vllm:num_preemptions_total", "Preemptions"),
    _always("running_mean", "gauge", "vllm:num_requests_running", "Running requests (mean over the minute)"),
)

# The V0 engine's spec-decode series (vllm/engine/metrics.py): a gauge pair no V1 release has. Their presence
# marks a V0 exposition, whose spec-decode counters specwatch must not read.
V0_MARKERS: tuple[str, ...] = ("vllm:spec_decode_draft_acceptance_rate", "vllm:spec_decode_efficiency")


def version_key(version: str) -> tuple[int, ...]:
    """`0.10.1.1` -> (0, 10, 1, 1); a suffix such as `.post1` or `+cpu` is ignored. ValueError if it is not
    a release number."""
    core = version.strip().split("+")[0]
    parts = []
    for part in core.split("."):
        if not part.isdigit():
            if part.startswith(("post", "dev", "rc")):
                break
            raise ValueError(f"{version!r} is not a vLLM release number")
        parts.append(int(part))
    if not parts:
        raise ValueError(f"{version!r} is not a vLLM release number")
    return tuple(parts)


def line_of(version: str) -> Line | None:
    """The release line of a vLLM version (the last line starting at or below it); None below the minimum."""
    key = version_key(version)
    for line in reversed(LINES):
        if version_key(line.first) <= key:
            return line
    return None


def expected_names(line: str, *, hidden: bool = False) -> set[str]:
    """The names the table says a release line exposes (with hidden metrics shown, if `hidden`)."""
    return {n.metric for r in READINGS for n in r.names if line in n.lines or (hidden and line in n.hidden)}


def table_mismatch(version: str, exposed: set[str]) -> tuple[set[str], set[str]]:
    """An exposition's family names (as exposed, counters with `_total`) against the table's line for `version`:
    (names the table expects but the exposition lacks, names the table does not expect for that line but the
    exposition has). Both empty when they agree. For checking a live server's /metrics against the table."""
    line = line_of(version)
    if line is None:
        raise ValueError(f"vLLM {version} is below the minimum, {MINIMUM_VERSION}")
    known = {n.metric for r in READINGS for n in r.names}
    want = expected_names(line.key)
    return want - exposed, (exposed & known) - want - expected_names(line.key, hidden=True)


READ = "read"
NOT_READ = "exposed, not read (the current name wins)"
HIDDEN = "only with hidden metrics shown; not read"
ABSENT = "—"


def cell(reading: Reading, name: Name, line: str) -> str:
    """What specwatch does with one name of a figure in one release line."""
    if line in name.lines:
        return READ if reading.read_in(line) is name else NOT_READ
    return HIDDEN if line in name.hidden else ABSENT


def markdown_table() -> str:
    """The names table as docs/vllm-versions.md shows it: a row per name, a column per release line."""
    rows = ["| Figure | Name | " + " | ".join(line.label for line in LINES) + " |",
            "|---|---|" + "---|" * len(LINES)]
    for r in READINGS:
        for name in r.names:
            what = r.what if name is r.names[0] else f"{r.what} (older name)"
            rows.append(f"| {what} | `{name.metric}` | "
                        + " | ".join(cell(r, name, line.key) for line in LINES) + " |")
    return "\n".join(rows)
