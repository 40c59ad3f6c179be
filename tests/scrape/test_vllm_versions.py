"""The names table (backend.domain.vllm_versions) against expositions of each vLLM release line, the real
0.32.0 one included, and the direct-scrape path's reading of them: an older name read where it is the only
one, the current one where a target has both, never both added up; a V0 exposition refused.

Which names an exposition has is read with prometheus_client's own parser, independently of specwatch's."""

from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from backend.domain.families import FAMILIES
from backend.domain.vllm_versions import (
    ALL,
    HIDDEN,
    LINES,
    MINIMUM_VERSION,
    READ,
    READINGS,
    expected_names,
    line_of,
    markdown_table,
    table_mismatch,
    version_key,
)
from backend.scrape.assemble import PoolNaming, Scrape, assemble
from backend.scrape.layout import LayoutCache
from backend.scrape.parse import ExpositionError, ParsedScrape, UnsupportedEngine, parse
from tests.support.paths import FIXTURES

ROOT = FIXTURES.parents[1]
REAL_032 = FIXTURES / "vllm-0.32.0-cpu.prom"
# release line -> the fixture written as a release of that line writes it (tests/support/make_vllm_fixtures.py)
LINE_FIXTURES = {"0.8": "vllm-0.10.1-spec.prom", "0.10.2": "vllm-0.10.2-spec.prom", "0.11": "vllm-0.11.0-spec.prom"}
HIDDEN_SHOWN = "vllm-0.12.0-hidden-spec.prom"  # 0.12 with --show-hidden-metrics-for-version=0.11
V0 = "vllm-0.10.1-v0-spec.prom"
ITL_STEPS, TPOT_REQUESTS, DRAFTS = 104, 10, 100  # the fixtures' counts (make_vllm_fixtures)
NAMING = PoolNaming("traffic_class", "spec_mode", "default", "eagle3")


def exposed_names(text: str) -> set[str]:
    """The family names an exposition has samples of, as exposed (counters with `_total`)."""
    out = set()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            out.add(re.sub(r"_(bucket|sum|count)$", "", s.name) if fam.type == "histogram" else s.name)
    return out


def read_names() -> set[str]:
    return {n.metric for r in READINGS for n in r.names}


def samples(parsed: ParsedScrape, name: str) -> list[tuple[dict, float]]:
    return [(lb, v) for n, lb, v in parsed.samples if n == name]


# --- the table -------------------------------------------------------------------------------------------


def test_the_docs_page_shows_the_code_table_and_the_minimum():
    page = (ROOT / "docs" / "vllm-versions.md").read_text()
    assert markdown_table() in page, "docs/vllm-versions.md's names table differs from vllm_versions.markdown_table()"
    assert f"## Minimum version: vLLM {MINIMUM_VERSION}, V1 engine" in page
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Connecting a real vLLM fleet", 1)[1].split("\n## ", 1)[0]
    assert "docs/vllm-versions.md" in section and f"vLLM {MINIMUM_VERSION} or later" in section


def test_the_families_are_the_tables():
    assert [(f.field, f.kind, f.names) for f in FAMILIES] == [
        (r.field, r.kind, tuple(n.metric for n in r.names)) for r in READINGS]
    assert next(f for f in FAMILIES if f.field == "itl").older == ("vllm:time_per_output_token_seconds",)
    # every figure but TPOT is read from every supported line; each line reads exactly one name per figure
    for r in READINGS:
        for line in ALL:
            assert [n for n in r.names if line in n.lines][:1] == ([r.read_in(line)] if r.read_in(line) else [])
    tpot = next(r for r in READINGS if r.field == "tpot")
    assert [line for line in ALL if tpot.read_in(line) is None] == ["0.8", "0.10.2"]


@pytest.mark.parametrize("version, line", [
    ("0.8.5", "0.8"), ("0.8.5.post1", "0.8"), ("0.10.1.1", "0.8"), ("0.10.2", "0.10.2"), ("0.11.2", "0.11"),
    ("0.12.0", "0.12"), ("0.14.1", "0.12"), ("0.15.0", "0.15"), ("0.32.0+cpu", "0.15"), ("1.0.0", "0.15"),
])
def test_a_release_falls_in_its_line(version, line):
    assert line_of(version).key == line


@pytest.mark.parametrize("version", ["0.8.4", "0.8.0", "0.7.3"])
def test_releases_below_the_minimum_have_no_line(version):
    assert line_of(version) is None


@pytest.mark.parametrize("text", ["", "latest", "v0.10", "0.x.1"])
def test_a_version_that_is_not_a_release_number_is_refused(text):
    with pytest.raises(ValueError, match="not a vLLM release number"):
        version_key(text)


# --- the table against expositions ------------------------------------------------------------------------


@pytest.mark.parametrize("line, file", sorted(LINE_FIXTURES.items()))
def test_each_line_exposes_what_the_table_says(line, file):
    have = exposed_names((FIXTURES / file).read_text()) & read_names()
    assert have == expected_names(line)


def test_a_mismatch_names_what_is_missing_and_what_is_unexpected():
    old = exposed_names((FIXTURES / LINE_FIXTURES["0.8"]).read_text())
    assert table_mismatch("0.10.1", old) == (set(), set())
    missing, unexpected = table_mismatch("0.32.0", old)  # a 0.10.1 server claimed to be 0.32.0
    assert missing == {"vllm:inter_token_latency_seconds", "vllm:request_time_per_output_token_seconds"}
    assert unexpected == {"vllm:time_per_output_token_seconds"}
    both = exposed_names((FIXTURES / HIDDEN_SHOWN).read_text())
    assert table_mismatch("0.12.0", both) == (set(), set())  # a hidden name shown is not unexpected
    with pytest.raises(ValueError, match="below the minimum"):
        table_mismatch("0.8.4", old)


def test_hidden_metrics_shown_bring_back_the_older_name():
    have = exposed_names((FIXTURES / HIDDEN_SHOWN).read_text()) & read_names()
    assert have == expected_names("0.12", hidden=True)
    assert {r.field: [n.metric for n in r.names if "0.12" in n.hidden] for r in READINGS}["itl"] == [
        "vllm:time_per_output_token_seconds"]


def test_the_table_matches_the_real_032_exposition():
    """The exposition of a real vLLM 0.32.0 server (tests/fixtures/vllm-0.32.0-cpu.prom): every name the table
    says 0.32 exposes is there, and none it says 0.32 lacks."""
    assert line_of("0.32.0").key == "0.15"
    have = exposed_names(REAL_032.read_text())
    assert expected_names("0.15") <= have
    assert not (read_names() - expected_names("0.15")) & have
    assert table_mismatch("0.32.0", have) == (set(), set())
    parsed = parse(REAL_032.read_text())
    assert {n for n, _lb, _v in parsed.samples} >= {f"{r.metric}_count" for r in READINGS if r.kind == "histogram"}
    # every series read carries the labels the table's page promises
    assert all({"model_name", "engine"} <= set(lb) for _n, lb, _v in parsed.samples)


# --- reading them -------------------------------------------------------------------------------------------


def test_older_name_only_is_read_under_the_current_name():
    parsed = parse((FIXTURES / LINE_FIXTURES["0.8"]).read_text())
    ((labels, count),) = samples(parsed, "vllm:inter_token_latency_seconds_count")
    assert count == ITL_STEPS and labels["engine"] == "0"
    assert len(samples(parsed, "vllm:inter_token_latency_seconds_bucket")) == 20  # 19 bounds and +Inf
    assert not any(n.startswith("vllm:time_per_output_token") for n, _lb, _v in parsed.samples)
    assert "vllm:inter_token_latency_seconds" in {b for b, _lb, _v in parsed.created}
    assert not samples(parsed, "vllm:request_time_per_output_token_seconds_count")  # no TPOT before 0.11
    assert samples(parsed, "vllm:spec_decode_num_drafts_total")[0][1] == DRAFTS


@pytest.mark.parametrize("file", [LINE_FIXTURES["0.10.2"], LINE_FIXTURES["0.11"], HIDDEN_SHOWN])
def test_both_names_are_read_once_under_the_current_one(file):
    text = (FIXTURES / file).read_text()
    assert "vllm:time_per_output_token_seconds_count" in text and "vllm:inter_token_latency_seconds_count" in text
    parsed = parse(text)
    assert [v for _lb, v in samples(parsed, "vllm:inter_token_latency_seconds_count")] == [ITL_STEPS]
    assert len(samples(parsed, "vllm:inter_token_latency_seconds_bucket")) == 20
    assert [b for b, _lb, _v in parsed.created].count("vllm:inter_token_latency_seconds") == 1
    assert not any("time_per_output_token_seconds" in n and "request_" not in n for n, _lb, _v in parsed.samples)


def _scaled(parsed: ParsedScrape, k: float) -> ParsedScrape:
    """The same target later: every counter k times its value, `_created` unchanged (no restart)."""
    return ParsedScrape([(n, lb, v * k) for n, lb, v in parsed.samples], list(parsed.created))


@pytest.mark.parametrize("line", sorted(LINE_FIXTURES))
def test_assembled_increases_count_each_observation_once(line):
    """Two scrapes of one target, the second three times the first: the minute's ITL count is the engine's
    own increase (2 x 104 steps), from the older name, the current one, or both."""
    first = parse((FIXTURES / LINE_FIXTURES[line]).read_text())
    layouts = LayoutCache()
    scrapes = [Scrape.of("t", 10.0, first, layouts), Scrape.of("t", 40.0, _scaled(first, 3.0), layouts)]
    (rec,) = assemble(scrapes, target_labels={}, width=60, first_bucket=0, last_bucket=0, max_gap=300,
                      naming=NAMING).values()
    assert rec.itl.count == 2 * ITL_STEPS
    assert rec.drafts == 2 * DRAFTS
    assert rec.tpot is None if line in ("0.8", "0.10.2") else rec.tpot.count == 2 * TPOT_REQUESTS
    assert rec.restarts == 0


def test_a_v0_exposition_is_refused_with_its_own_rule():
    with pytest.raises(UnsupportedEngine, match=f"vLLM {re.escape(MINIMUM_VERSION)} or later") as err:
        parse((FIXTURES / V0).read_text())
    assert isinstance(err.value, ExpositionError) and err.value.rule == "unsupported_vllm_version"


def test_the_v0_markers_only_count_as_samples():
    """A HELP line naming a V0 gauge is not a V0 exposition."""
    text = ("# HELP vllm:spec_decode_efficiency gone\n"
            '# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total{model_name="m",engine="0"} 5.0\n')
    assert samples(parse(text), "vllm:generation_tokens_total")[0][1] == 5.0


def test_every_line_has_a_fixture_or_the_real_exposition():
    covered = set(LINE_FIXTURES) | {"0.12", "0.15"}  # 0.12 by the hidden-metrics file, 0.15 by the real 0.32.0
    assert covered == {line.key for line in LINES}
    assert READ in markdown_table() and HIDDEN in markdown_table()
