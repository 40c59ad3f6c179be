"""`python -m benchmarks NAME OPTIONS`: every benchmark takes its own options through the dispatcher (a
benchmark whose options went to the wrong function crashed before measuring anything)."""

from __future__ import annotations

import pytest

from benchmarks.__main__ import SUITES, main


@pytest.mark.parametrize("name", sorted(SUITES))
def test_every_benchmark_parses_its_options(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main([name, "--help"])
    assert ended.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out and "--" in out.split("usage:", 1)[1]


def test_unknown_benchmark_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["no-such-bench"]) == 2
    assert "unknown benchmark" in capsys.readouterr().err
