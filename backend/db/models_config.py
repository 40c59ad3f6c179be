"""Configuration history of a pool: each change of its drafter, K (num_speculative_tokens) or vLLM version,
when it took effect and who saw it (collection, or an operator's annotation). The pool row keeps only the
current values; the A/B comparison (services.compare) and the weekly report's "what changed this week" read
the changes from here. Imported at the end of models.py so Alembic sees it."""

from __future__ import annotations

from sqlalchemy import ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from backend.db.base import Base
from backend.db.models_columns import Instant, LogRow

__all__ = ["ConfigChange"]

CONFIG_FIELDS = ("drafter", "num_spec_tokens", "vllm_version")


class ConfigChange(LogRow, Base):
    """One field of one pool changed from `old_value` to `new_value` at `at` (values as text)."""

    __tablename__ = "config_changes"
    __table_args__ = (UniqueConstraint("pool_id", "at", "field"), Index("ix_config_changes_at", "at"))

    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"))
    field: Mapped[str] = mapped_column(String(20))  # drafter | num_spec_tokens | vllm_version
    old_value: Mapped[str | None] = mapped_column(String(300))
    new_value: Mapped[str | None] = mapped_column(String(300))
    source: Mapped[str] = mapped_column(String(16))  # collection | annotation
    note: Mapped[str | None] = mapped_column(String(500))
    recorded_at: Mapped[Instant]
    by: Mapped[str | None] = mapped_column(String(120))
