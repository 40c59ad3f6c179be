"""raw_scrapes in columns: a shared layout per exposition shape, the values as float64 bytes

Written by hand. A raw scrape was a JSON list of [name, labels, value] (~60 KB for a 3-engine vLLM
target); finalising a bucket re-read about six minutes of them into Python objects every minute, which did
not scale past tens of targets. Now `scrape_layouts` holds each shape of exposition once (its series and
`_created` series, in order, by sha256 digest) and a raw scrape is its layout id and two little-endian
float64 arrays (backend/scrape/layout.py). Existing rows are converted in both directions.
"""
import hashlib
import json
import struct

import sqlalchemy as sa
from alembic import op

revision = "2026_12_03_columnar_scrapes"
down_revision = "2026_12_02_cheap_inserts"
branch_labels = None
depends_on = None

BATCH = 500


def _floats(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}d", *values)


def upgrade() -> None:
    op.create_table(
        "scrape_layouts",
        sa.Column("id", sa.BigInteger(), sa.Identity(), primary_key=True),
        sa.Column("digest", sa.LargeBinary(), nullable=False),
        sa.Column("shape", sa.Text(), nullable=False),
        sa.Column("last_used", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("digest", name=op.f("uq_scrape_layouts_digest")),
    )
    op.add_column("raw_scrapes", sa.Column("layout_id", sa.BigInteger(), nullable=True))
    op.add_column("raw_scrapes", sa.Column("sample_values", sa.LargeBinary(), nullable=True))
    op.add_column("raw_scrapes", sa.Column("created_values", sa.LargeBinary(), nullable=True))
    conn = op.get_bind()
    ids: dict[bytes, int] = {}
    while True:
        rows = conn.execute(sa.text(
            "SELECT target, scraped_at, samples, created FROM raw_scrapes WHERE layout_id IS NULL LIMIT :n"),
            {"n": BATCH}).all()
        if not rows:
            break
        for target, scraped_at, samples, created in rows:
            shape = json.dumps({"series": [[n, lb] for n, lb, _v in samples],
                                "created": [[b, lb] for b, lb, _v in created]}, separators=(",", ":"))
            digest = hashlib.sha256(shape.encode()).digest()
            if digest not in ids:
                ids[digest] = conn.execute(sa.text(
                    "INSERT INTO scrape_layouts (digest, shape, last_used) VALUES (:d, :s, :t) "
                    "ON CONFLICT (digest) DO UPDATE SET last_used = excluded.last_used RETURNING id"),
                    {"d": digest, "s": shape, "t": scraped_at}).scalar_one()
            conn.execute(sa.text(
                "UPDATE raw_scrapes SET layout_id = :l, sample_values = :v, created_values = :c "
                "WHERE target = :target AND scraped_at = :at"),
                {"l": ids[digest], "v": _floats([float(v) for _n, _lb, v in samples]),
                 "c": _floats([float(v) for _b, _lb, v in created]), "target": target, "at": scraped_at})
    op.drop_column("raw_scrapes", "samples")
    op.drop_column("raw_scrapes", "created")
    for col in ("layout_id", "sample_values", "created_values"):
        op.alter_column("raw_scrapes", col, nullable=False)
    # 2-5 KB of float64 a row: kept in the row (no TOAST lookups on every read) and never compressed (floats
    # barely compress); only a row over 8 KB goes out of line
    op.execute("ALTER TABLE raw_scrapes ALTER COLUMN sample_values SET STORAGE EXTERNAL")
    op.execute("ALTER TABLE raw_scrapes SET (toast_tuple_target = 8160)")
    op.create_foreign_key(op.f("fk_raw_scrapes_layout_id_scrape_layouts"), "raw_scrapes", "scrape_layouts",
                          ["layout_id"], ["id"])
    op.create_index("ix_raw_scrapes_layout_id", "raw_scrapes", ["layout_id"])


def downgrade() -> None:
    from sqlalchemy.dialects import postgresql

    op.add_column("raw_scrapes", sa.Column("samples", postgresql.JSONB(), nullable=True))
    op.add_column("raw_scrapes", sa.Column("created", postgresql.JSONB(), nullable=True))
    conn = op.get_bind()
    shapes: dict[int, dict] = {}
    while True:
        rows = conn.execute(sa.text(
            "SELECT target, scraped_at, layout_id, sample_values, created_values FROM raw_scrapes "
            "WHERE samples IS NULL LIMIT :n"), {"n": BATCH}).all()
        if not rows:
            break
        for target, scraped_at, layout_id, values, created in rows:
            if layout_id not in shapes:
                shapes[layout_id] = json.loads(conn.execute(sa.text(
                    "SELECT shape FROM scrape_layouts WHERE id = :i"), {"i": layout_id}).scalar_one())
            shape = shapes[layout_id]
            v = struct.unpack(f"<{len(values) // 8}d", values)
            c = struct.unpack(f"<{len(created) // 8}d", created)
            conn.execute(sa.text(
                "UPDATE raw_scrapes SET samples = CAST(:s AS jsonb), created = CAST(:c AS jsonb) "
                "WHERE target = :target AND scraped_at = :at"),
                {"s": json.dumps([[n, lb, x] for (n, lb), x in zip(shape["series"], v, strict=True)]),
                 "c": json.dumps([[b, lb, x] for (b, lb), x in zip(shape["created"], c, strict=True)]),
                 "target": target, "at": scraped_at})
    op.execute("ALTER TABLE raw_scrapes RESET (toast_tuple_target)")
    op.drop_index("ix_raw_scrapes_layout_id", table_name="raw_scrapes")
    op.drop_constraint(op.f("fk_raw_scrapes_layout_id_scrape_layouts"), "raw_scrapes", type_="foreignkey")
    for col in ("layout_id", "sample_values", "created_values"):
        op.drop_column("raw_scrapes", col)
    op.alter_column("raw_scrapes", "samples", nullable=False)
    op.alter_column("raw_scrapes", "created", nullable=False)
    op.drop_table("scrape_layouts")
