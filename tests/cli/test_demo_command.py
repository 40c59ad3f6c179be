"""The demo prints a "more tokens" command: it must work as printed from where the demo was started, with
the virtualenv's bin directory not on PATH (as under `make demo`)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from backend.cli.demo import specwatch_command

ROOT = Path(__file__).resolve().parents[2]


def _runs(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*shlex.split(cmd), "tokens", "create", "--help"], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)}, check=False)


def test_the_printed_command_runs_without_the_venv_on_path(tmp_path):
    exe = Path(sys.executable).with_name("specwatch")
    assert exe.exists(), exe
    for cwd in (ROOT, tmp_path, exe.parent.parent):
        cmd = specwatch_command(cwd)
        assert cmd != "specwatch", cmd
        res = _runs(cmd, cwd)
        assert res.returncode == 0 and "--role" in res.stdout, (cwd, cmd, res.stderr)
    # below the directory it was started in: a relative path, as `.venv/bin/specwatch` under the repository
    assert specwatch_command(exe.parent.parent) == "bin/specwatch"
