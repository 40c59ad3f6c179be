"""The engine test's figures (timings, the engine's counts, what specwatch stored) at the end of the run."""

from __future__ import annotations

import warnings

import pytest

from tests.support.skips import MissingDependencyWarning

REPORT: list[str] = []  # lines the engine test adds while it runs


def pytest_terminal_summary(terminalreporter) -> None:
    if REPORT:
        terminalreporter.section("real engines")
        for line in REPORT:
            terminalreporter.write_line(line)


def skip_unless_available(engine) -> None:
    """Skip the module's run (loudly: a warning in the summary) when `engine` (backend.engines.llama_server or
    .vllm_cpu) says it cannot run here."""
    reason = engine.unavailable_reason()
    if reason:
        reason = f"REAL ENGINE NOT AVAILABLE: {reason}"
        warnings.warn(reason, MissingDependencyWarning, stacklevel=2)
        pytest.skip(reason)
