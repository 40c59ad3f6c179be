"""per-request records are a source of the engine's own pools: unique (model, class, spec mode, origin);
request_records.replica and prompt_tokens

Written by hand. Per-request sums used to live in pools of a spec mode of their own (the setting
`requests_spec_mode`, "per-request" by default). They now live under the spec mode of the engine that served
them, as a second source (`origin = 'requests'`) beside the engine pool of the same key, so the unique key
gains `origin`. Each model's records pools take the model's only spec mode among its engine pools; a model
with none or several needs `alembic -x records_spec_mode=NAME upgrade head` (or SPECWATCH_RECORDS_SPEC_MODE)
and the upgrade stops, changing nothing, until it is given. Rows move by renaming their pool, so every
record, bucket and rollup keeps its pool id: nothing is copied or lost. Alert states of the renamed pools
take the new spec mode (and fingerprint); one whose new label set already has a state (the old records-only
`mixed` row, now the engine's) is dropped with its transitions, as its target no longer exists. A record
may name the engine replica that served it (`replica`, NULL when the caller does not know) and its context
length (`prompt_tokens`, vLLM's usage.prompt_tokens; NULL when not sent).
"""
import hashlib
import json
import os

import sqlalchemy as sa
from alembic import context, op

revision = "2026_12_05_records_source"
down_revision = "2026_12_05_model_senders"
branch_labels = None
depends_on = None

OLD_UQ = "uq_pools_model_name_traffic_class_spec_mode"
NEW_UQ = "uq_pools_model_name_traffic_class_spec_mode_origin"


def _fingerprint(labels: dict) -> str:  # backend.domain.alerting.fingerprint, as of this revision
    return hashlib.sha256(json.dumps(dict(sorted(labels.items())), separators=(",", ":")).encode()).hexdigest()[:32]


def _given_mode() -> str | None:
    x = context.get_x_argument(as_dictionary=True) if context.config is not None else {}
    return x.get("records_spec_mode") or os.environ.get("SPECWATCH_RECORDS_SPEC_MODE") or None


def upgrade() -> None:
    conn = op.get_bind()
    baseline = os.environ.get("SPECWATCH_BASELINE_MODE", "off")
    records = conn.execute(sa.text(
        "SELECT id, model_name, traffic_class, spec_mode FROM pools WHERE origin = 'requests' ORDER BY id")).all()
    engine_modes: dict[str, list[str]] = {}
    for model, mode in conn.execute(sa.text(
            "SELECT DISTINCT model_name, spec_mode FROM pools WHERE origin = 'engine' AND spec_mode <> :b "
            "ORDER BY 1, 2"), {"b": baseline}):
        engine_modes.setdefault(model, []).append(mode)
    given = _given_mode()
    target: dict[int, str] = {}
    unclear = []
    for pid, model, _cls, _mode in records:
        found = engine_modes.get(model, [])
        if len(found) == 1:
            target[pid] = found[0]
        elif given:
            target[pid] = given
        else:
            unclear.append(f"{model!r} ({'engine spec modes ' + ', '.join(found) if found else 'no engine pool'})")
    if unclear:
        raise RuntimeError(
            "per-request records of " + "; ".join(sorted(set(unclear))) + " cannot be given the spec mode of the "
            "engine that served them; run `alembic -x records_spec_mode=NAME upgrade head` (or set "
            "SPECWATCH_RECORDS_SPEC_MODE) with the spec mode those pools run")
    seen: dict[tuple, int] = {}
    for pid, model, cls, _mode in records:
        key = (model, cls, target[pid])
        if key in seen:
            raise RuntimeError(f"per-request pools {seen[key]} and {pid} would both become {key}; merge or delete "
                               "one of them first")
        seen[key] = pid

    op.drop_constraint(OLD_UQ, "pools", type_="unique")
    op.create_unique_constraint(NEW_UQ, "pools", ["model_name", "traffic_class", "spec_mode", "origin"])
    op.add_column("request_records", sa.Column("replica", sa.String(length=200), nullable=True))
    op.add_column("request_records", sa.Column("prompt_tokens", sa.Integer(), nullable=True))
    renamed: dict[tuple[str, str], str] = {}  # (model, old mode) -> new mode
    for pid, model, _cls, mode in records:
        conn.execute(sa.text("UPDATE pools SET spec_mode = :s WHERE id = :id"), {"s": target[pid], "id": pid})
        renamed[(model, mode)] = target[pid]
    _relabel_alerts(conn, renamed)


def _relabel_alerts(conn, renamed: dict[tuple[str, str], str]) -> None:
    if not renamed:
        return
    rows = conn.execute(sa.text("SELECT id, fingerprint, labels FROM alert_states ORDER BY id")).all()
    taken = {fp for _id, fp, _l in rows}
    for sid, fp, labels in rows:
        new = renamed.get((labels.get("model"), labels.get("spec_mode")))
        if new is None or new == labels.get("spec_mode"):
            continue
        labels = {**labels, "spec_mode": new}
        nfp = _fingerprint(labels)
        if nfp in taken:  # the engine's row of this label set has its own state: the old target is gone
            conn.execute(sa.text("DELETE FROM alert_states WHERE id = :id"), {"id": sid})
        else:
            conn.execute(sa.text("UPDATE alert_states SET labels = CAST(:l AS jsonb), fingerprint = :f WHERE id = :id"),
                         {"l": json.dumps(labels), "f": nfp, "id": sid})
            taken.add(nfp)
        taken.discard(fp)


def downgrade() -> None:
    conn = op.get_bind()
    old = os.environ.get("SPECWATCH_REQUESTS_SPEC_MODE", "per-request")
    conn.execute(sa.text("UPDATE pools SET spec_mode = :s WHERE origin = 'requests'"), {"s": old})
    op.drop_column("request_records", "prompt_tokens")
    op.drop_column("request_records", "replica")
    op.drop_constraint(NEW_UQ, "pools", type_="unique")
    op.create_unique_constraint(OLD_UQ, "pools", ["model_name", "traffic_class", "spec_mode"])
