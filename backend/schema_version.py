"""The database schema against this version's migrations (alembic), for `specwatch migrate` and /ready."""

from pathlib import Path

from backend.db.revision_ids import RENAMED

ROOT = Path(__file__).resolve().parents[1]  # the checkout: alembic.ini, migrations/, the example files


def alembic_config(url: str | None = None):
    from alembic.config import Config

    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    if url:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def schema_state(current: str | None) -> tuple[str, int | None]:
    """The state in words and how many migrations `specwatch migrate` would apply; no id (opaque to users)."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory.from_config(alembic_config())
    head = scripts.get_current_head()
    current = RENAMED.get(current, current)  # an id from before the rename: `specwatch migrate` rewrites it
    if current == head:
        return "up to date", 0
    known = {rev.revision for rev in scripts.walk_revisions()}
    if current is not None and current not in known:
        return "newer than this specwatch", None
    pending = sum(1 for _ in scripts.iterate_revisions(head, current or "base"))
    return "needs migrate", pending
