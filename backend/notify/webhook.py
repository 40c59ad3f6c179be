"""Generic JSON webhook: the channel-neutral notification as is, wrapped with a schema version and the
idempotency key (also sent as the `Idempotency-Key` header), so a receiver can drop a redelivery."""

from __future__ import annotations

from typing import Any

SCHEMA = "specwatch.alerts/v1"


def build_payload(n: dict[str, Any], *, idempotency_key: str) -> dict[str, Any]:
    """{schema, idempotency_key, group, model, incident_id, sequence, at, items: [...]}; each item has
    event (firing | resolved), rule, kind, severity, labels, value, threshold, reason, window, volume,
    values (the numbers that caused the transition), runbook and dashboard_url."""
    return {
        "schema": SCHEMA,
        "idempotency_key": idempotency_key,
        "group": n.get("group"),
        "model": n.get("model"),
        "incident_id": n.get("incident_id"),
        "sequence": n.get("sequence"),
        "title": n.get("title"),
        "at": n.get("at"),
        "items": list(n.get("items", [])),
    }
