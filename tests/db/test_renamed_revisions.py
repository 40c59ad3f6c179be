"""A database migrated before the migration ids were renamed holds an old id in alembic_version:
`specwatch migrate` rewrites it to its new one and upgrades to head, and /ready reads it as needing a
migrate (not as a schema newer than this specwatch). No revision keeps an old id."""

from __future__ import annotations

import psycopg
from alembic import command
from alembic.script import ScriptDirectory

from backend.db.revision_ids import RENAMED
from backend.schema_version import schema_state as _schema
from tests.db.conftest import cfg_for


def _version(url: str, set_to: str | None = None) -> str:
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        if set_to is not None:
            conn.execute("UPDATE alembic_version SET version_num = %s", (set_to,))
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]


def test_old_id_upgrades_to_head(empty_db: str):
    cfg = cfg_for(empty_db)
    command.upgrade(cfg, "2026_12_02_cheap_inserts")
    assert _version(empty_db, set_to="i29b_cheap_inserts") == "i29b_cheap_inserts"
    assert _schema("i29b_cheap_inserts") == _schema("2026_12_02_cheap_inserts")
    assert _schema("i29b_cheap_inserts")[0] == "needs migrate"

    command.upgrade(cfg, "head")
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert _version(empty_db) == head
    assert _schema(head) == ("up to date", 0)


def test_every_new_id_is_a_revision_and_no_old_one_is():
    scripts = ScriptDirectory.from_config(cfg_for("postgresql+psycopg://unused/db"))
    revisions = {rev.revision for rev in scripts.walk_revisions()}
    assert set(RENAMED.values()) <= revisions
    assert not set(RENAMED) & revisions
