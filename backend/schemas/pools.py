"""Pools (GET /pools), their spec-decode figures (GET /pools/figures) and their replicas (GET /replicas)."""

from datetime import datetime

from pydantic import Field

from backend.schemas.common import PoolRefRead, WindowRead, Wire


class FigureBasisRead(Wire):
    """How a pool's engine gives one spec-decode figure: exactly (counters) or as an estimate (gauges)."""

    figure: str = Field(description="acceptance_rate, accept_length, drafts, draft_tokens, accepted_tokens or "
                                    "accepted_per_pos.")
    exposed: bool = Field(description="false: the engine does not expose it; the figure stays empty (never 0).")
    exact: bool | None = Field(None, description="true: exact increases of the engine's counters; false: an "
                                                 "estimate (see estimate_basis); null: not exposed.")
    estimate_basis: str | None = Field(None, description="For an estimate: what it rests on and its weighting.")
    note: str | None = Field(None, description="E.g. the engine builds that do not expose it (the figure is "
                                               "then empty for their pools, never 0).")


class PoolRead(PoolRefRead):
    drafter: str | None = None
    vllm_version: str | None = None
    is_baseline: bool = Field(description="spec_mode equals the configured baseline mode (no drafter).")
    first_seen: datetime
    last_seen: datetime
    age_seconds: float = Field(description="now - last_seen.")
    stale: bool = Field(description="last_seen older than stale_after_seconds.")
    rejected: int = Field(0, description="Rejected (impossible) data rows recorded for this pool.")
    rejected_by_rule: dict[str, int] = Field(default_factory=dict)
    origin: str = Field("engine", description="engine: vLLM counters; requests: sums of per-request records "
                                              "(POST /requests)")
    engine: str = Field("vllm", description="The inference engine whose metrics the pool's counts come from: "
                                            "vllm, llamacpp or sglang.")
    figures: list[FigureBasisRead] = Field(default_factory=list, description="Per spec-decode figure, whether "
                                           "the pool's engine gives it exactly, as an estimate, or not at all.")
    collected_by: str | None = Field(None, description="How the pool's newest bucket was collected: scrape (raw "
                                     "samples of its targets), prometheus (raw samples through Prometheus), "
                                     "prom-increase (Prometheus' increase()), requests (per-request records).")
    counts: str | None = Field(None, description="exact: increases between raw samples (or sums of records), "
                               "the counter's own change; extrapolated: Prometheus' increase(), stretched to each "
                               "bucket's edges (off by up to a scrape interval's counts per bucket).")


class PoolsRead(Wire):
    generated_at: datetime
    stale_after_seconds: int
    pools: list[PoolRead]


class SpecFigureRead(FigureBasisRead):
    value: float | None = Field(None, description="Over the window; null when not exposed or no data.")


class PoolFigureRowRead(Wire):
    pool: PoolRefRead
    engine: str = Field(description="vllm, llamacpp or sglang.")
    figures: list[SpecFigureRead]


class PoolFiguresRead(Wire):
    """Each pool's spec-decode figures over the window, each exact (counters) or an estimate (gauges)."""

    window: WindowRead
    pools: list[PoolFigureRowRead]


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
