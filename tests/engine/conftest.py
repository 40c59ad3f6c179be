"""The engine test's figures (timings, the engine's counts, what specwatch stored) at the end of the run."""

from __future__ import annotations

REPORT: list[str] = []  # lines the engine test adds while it runs


def pytest_terminal_summary(terminalreporter) -> None:
    if REPORT:
        terminalreporter.section("real engines")
        for line in REPORT:
            terminalreporter.write_line(line)
