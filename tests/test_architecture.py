"""The import-linter contracts in pyproject.toml hold (layers, a pure domain, a dashboard that talks HTTP)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.deadline import deadline

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    exe = Path(sys.executable).parent / "lint-imports"
    assert exe.exists(), "import-linter is a test dependency: pip install -e '.[test]'"
    res = subprocess.run([str(exe), "--no-cache"], check=False, cwd=ROOT, capture_output=True, text=True, timeout=deadline(900))
    assert res.returncode == 0, f"lint-imports failed:\n{res.stdout}\n{res.stderr}"
