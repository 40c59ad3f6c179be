"""Worker and beat refuse to start on an invalid rules file, naming the field."""

import subprocess
import sys


def run(cmd: str, rules: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "rules.yaml"
    path.write_text(rules)
    env = {"SPECWATCH_ALERT_RULES_FILE": str(path), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "backend.cli", cmd], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_worker_and_beat_refuse_a_bad_rules_file(tmp_path):
    bad = "version: 1\nrules:\n  - name: x\n    kind: alpha_low\n    for: abc\n"
    for cmd in ("worker", "beat"):
        res = run(cmd, bad, tmp_path)
        assert res.returncode == 2
        assert "rules[0].for: must be a duration" in res.stderr
        assert "Traceback" not in res.stderr
