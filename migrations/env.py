import re
from logging.config import fileConfig

from alembic import context
from sqlalchemy import inspect, pool, text

from backend.config import get_settings
from backend.db import models  # noqa: F401  (registers the tables)
from backend.db.base import Base
from backend.db.revision_ids import RENAMED
from backend.db.session import lock_for_migrations, make_engine

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def include_object(obj, name, type_, reflected, compare_to) -> bool:
    """Daily partitions of pool_buckets (pool_buckets_pYYYYMMDD) are made at run time, not by the models."""
    return not (type_ == "table" and reflected and compare_to is None and re.fullmatch(r"pool_buckets_p\d{8}", name or ""))


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or get_settings().database_url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, compare_type=True,
                      include_object=include_object)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is None:
        engine = make_engine(_url(), poolclass=pool.NullPool)
        with engine.connect() as connection:
            _run(connection)
        engine.dispose()
    else:
        _run(connectable)


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True,
                      include_object=include_object)
    with context.begin_transaction():
        lock_for_migrations(connection)  # before the version is read: concurrent runs go one at a time
        if inspect(connection).has_table("alembic_version"):  # an id from before the rename: its new one
            for old, new in RENAMED.items():
                connection.execute(text("UPDATE alembic_version SET version_num = :n WHERE version_num = :o"),
                                   {"n": new, "o": old})
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
