"""Columns several tables share (the same names, types and meaning), declared once: mixins for the groups
of fact columns, annotated types for the common single columns. A mixin's columns are copied into each
table that lists it; the schema stays the migrations' (`alembic check` compares the two)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from sqlalchemy import BigInteger, DateTime, Double, ForeignKey
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

FloatArray = ARRAY(Double, dimensions=1)
BigId = Annotated[int, mapped_column(BigInteger, primary_key=True)]
Instant = Annotated[datetime, mapped_column(DateTime(timezone=True))]
OptInstant = Annotated[datetime | None, mapped_column(DateTime(timezone=True))]


class LogRow:
    """A row of an append-only log: its id and when it happened."""

    id: Mapped[BigId]
    at: Mapped[Instant]


class SpecCounts:
    """Increases of the exact spec-decode counters (NULL: not reported, never 0)."""

    drafts: Mapped[float | None] = mapped_column(Double)
    draft_tokens: Mapped[float | None] = mapped_column(Double)
    accepted_tokens: Mapped[float | None] = mapped_column(Double)


class TokenCounts:
    """Increases of the token, request and preemption counters."""

    generation_tokens: Mapped[float | None] = mapped_column(Double)
    prompt_tokens: Mapped[float | None] = mapped_column(Double)
    finished_requests: Mapped[float | None] = mapped_column(Double)
    preemptions: Mapped[float | None] = mapped_column(Double)


def histogram(family: str, *, layout: bool = True) -> type:
    """A mixin with one histogram family's increases: `<family>_buckets` (cumulative per `le`, +Inf last),
    `_sum`, `_count` and, with `layout`, `_layout_id` (its bounds, in histogram_layouts)."""
    columns = {f"{family}_buckets": mapped_column(FloatArray), f"{family}_sum": mapped_column(Double),
               f"{family}_count": mapped_column(Double)}
    if layout:
        columns[f"{family}_layout_id"] = mapped_column(ForeignKey("histogram_layouts.id"))
    return type(f"{family.capitalize()}Histogram", (), columns)
