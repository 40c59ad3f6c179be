"""A user's clone has nothing beside it: no test may read a file outside the repository (such as the
project's research folder beside the clone). Fixtures and reference pages the tests need live in tests/fixtures."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a path built from the repository's parent: `.parent` joined with the folder's name, `parents[2].parent`,
# or a relative one up a level
SHARED = "shared"
OUTSIDE = re.compile(rf"""\.\./{SHARED}|parents\[\d+\]\.parent|\.parent\s*/\s*["']{SHARED}["']""")


def test_no_test_reads_outside_the_repository():
    offenders = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "tests").rglob("*.py")) if p != Path(__file__)
                 for n, line in enumerate(p.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert offenders == []


def test_fixtures_are_in_the_repository():
    from tests.support.paths import FIXTURES

    assert FIXTURES.is_relative_to(ROOT)
    for name in ("vllm_metrics_sample.prom", "known_answers_public.json", "vllm-metrics.md"):
        assert (FIXTURES / name).stat().st_size > 0, name
