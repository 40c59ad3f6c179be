"""Several `specwatch migrate` at once on one database (the Helm chart migrates in an init container of
every API pod): each waits for the one before it and then finds the schema at head; all exit 0, one
version row at head, no error."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg

from tests.support import db as dbsupport
from tests.support.deadline import deadline

ROOT = Path(__file__).resolve().parents[2]
RUNS = 4


def _head() -> str:
    from alembic.script import ScriptDirectory

    from backend.schema_version import alembic_config

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def test_concurrent_migrations_all_succeed(pg_admin_url, tmp_path):
    name = f"specwatch_cm_{uuid.uuid4().hex[:10]}"
    url = dbsupport.create_database(pg_admin_url, name)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPECWATCH_")}
        env.update(SPECWATCH_DATABASE_URL=url, SPECWATCH_DATA_DIR=str(tmp_path))
        procs = [subprocess.Popen([sys.executable, "-m", "backend.cli", "migrate"], cwd=ROOT, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for _ in range(RUNS)]
        outs = [p.communicate(timeout=deadline(600))[0] for p in procs]
        assert [p.returncode for p in procs] == [0] * RUNS, "\n---\n".join(outs)
        with psycopg.connect(dbsupport.libpq(url)) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(_head(),)]
    finally:
        dbsupport.drop_database(pg_admin_url, name)
