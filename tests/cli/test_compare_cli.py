"""`specwatch compare` on a real database: the sentence and the table, JSON, and bad values as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy.orm import Session

from backend.db.session import make_engine
from tests.support.compare_seed import MODEL, seed

ROOT = Path(__file__).resolve().parents[2]


def _cli(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPECWATCH_DATABASE_URL": url, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "backend.cli", *args], check=False, capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)


def test_compare_prints_the_sentence_and_a_table(fresh_db_url):
    engine = make_engine(fresh_db_url)
    t0 = (datetime.now(UTC) - timedelta(minutes=20)).replace(second=0, microsecond=0)
    with Session(engine) as session, session.begin():
        seed(session, t0)
    engine.dispose()
    res = _cli(fresh_db_url, "compare", "--model", MODEL, "--a", "eagle3", "--b", "eagle3.1", "--window", "1h")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == ("EAGLE-3.1 vs EAGLE-3 on llama-70b: speedup +25 % (12–40 %) on chat; "
                        "saving per week n/a (no GPU price or replica count)")
    alpha = next(line for line in lines if line.strip().startswith("alpha"))
    assert alpha.split() == ["alpha", "A", "0.5", "B", "0.6", "+20", "%", "(15–25", "%)", "better"]
    body = json.loads(_cli(fresh_db_url, "compare", "--model", MODEL, "--a", "eagle3", "--b", "eagle3.1",
                           "--window", "1h", "--format", "json").stdout)
    assert body["mode"] == "side-by-side" and body["a"]["drafter"] == "EAGLE-3"
    bad = _cli(fresh_db_url, "compare", "--model", MODEL, "--a", "eagle3", "--b", "nope")
    assert bad.returncode == 2 and bad.stderr.startswith("error: model 'llama-70b' has no spec mode 'nope'")
    bad = _cli(fresh_db_url, "compare", "--model", MODEL, "--a", "eagle3", "--format", "xml")
    assert bad.returncode == 2 and "--format must be text, json or csv" in bad.stderr
