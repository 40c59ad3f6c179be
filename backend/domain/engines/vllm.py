"""vLLM's table: the names table of backend.domain.vllm_versions (every V1 release line), as an engine.

Every series carries `model_name` (and `engine`, the data-parallel engine index, a replica label); every
spec-decode figure is an exact counter (drafts, draft tokens, accepted tokens, accepted per position)."""

from __future__ import annotations

from backend.domain.engines.table import Engine, Reading
from backend.domain.vllm_versions import READINGS

VLLM = Engine(
    "vllm", "vLLM", "vllm:",
    readings=tuple(Reading(r.field, r.kind, tuple(n.metric for n in r.names), r.what) for r in READINGS),
    model_label="model_name",
)
