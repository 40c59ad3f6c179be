"""Per-replica acceptance and latency of a model's pools (GET /replicas)."""

from datetime import datetime

from pydantic import Field

from backend.schemas.common import Wire


class ReplicaRead(Wire):
    instance: str = Field(description="Prometheus `instance` (or pod) label; for the direct scrape, the target.")
    engine: str = Field(description="vLLM's data-parallel `engine` label ('' when not reported).")
    labels: dict[str, str] = Field(default_factory=dict, description="Version labels the replica's target carries.")
    buckets: int = Field(description="Replica buckets in the window.")
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    acceptance_rate: float | None = Field(None, description="alpha = accepted / draft tokens, summed over the window.")
    mean_acceptance_length: float | None = Field(None, description="tau = 1 + accepted / drafts.")
    others_acceptance_rate: float | None = Field(
        None, description="The pool's other replicas pooled (their summed accepted / summed draft tokens).")
    tpot_p99: float | None = Field(None, description="P99 time per output token (s) from the summed buckets.")
    itl_p99: float | None = Field(None, description="P99 inter-token latency (s) from the summed buckets.")
    last_seen: datetime = Field(description="End of the replica's newest bucket.")


class ReplicaPoolRead(Wire):
    traffic_class: str
    spec_mode: str
    num_spec_tokens: int | None = None
    acceptance_rate: float | None = Field(None, description="The replicas' sums pooled: the pool's alpha.")
    drafts: float | None = None
    replicas: list[ReplicaRead]


class ReplicasRead(Wire):
    model: str
    window_seconds: float
    window_start: datetime | None = Field(None, description="null when no replica data exists.")
    window_end: datetime | None = Field(None, description="The newest replica bucket's end (at most now).")
    bucket_seconds: int = Field(description="Grain of the replica rows.")
    pools: list[ReplicaPoolRead]
