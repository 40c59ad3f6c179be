"""The settings of specwatch's plumbing: database and broker, metric sources and collection bounds, pool
identity, time, Celery and the API's serving. backend.config.Settings adds the features' settings to them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def comma_list(v: Any) -> Any:
    """A list setting as the docs show it: comma-separated (`a,b`), a JSON list (`["a","b"]`), or empty
    (`=` alone: none). pydantic-settings would JSON-decode list fields first (NoDecode turns that off)."""
    if not isinstance(v, str):
        return v
    v = v.strip()
    if v.startswith("["):
        return json.loads(v)
    return [x.strip() for x in v.split(",") if x.strip()]


# settings that take one of a few words (auth_mode is backend.config.Settings', validated here all the same)
CHOICES = {"source": ("prometheus", "scrape"), "auth_mode": ("token", "trusted-header")}


class ScrapeTarget(BaseModel):
    """One engine's /metrics endpoint for the direct-scrape source, and the pool labels it stands for. Its
    engine (vllm, llamacpp, sglang) is detected from its metric names; `engine` declares it (an exposition of
    another engine is then refused). llama.cpp names no model: its target needs a `model_name` label."""

    url: str
    labels: dict[str, str] = Field(default_factory=dict)
    engine: str | None = None

    @field_validator("engine")
    @classmethod
    def _engine(cls, v: str | None) -> str | None:
        from backend.domain.engines import ENGINE_NAMES
        if v is not None and v not in ENGINE_NAMES:
            raise ValueError(f"engine must be one of {', '.join(ENGINE_NAMES)}, not {v!r}")
        return v


class CoreSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SPECWATCH_", extra="ignore")

    # storage and broker
    database_url: str = "postgresql+psycopg://postgres@127.0.0.1:5432/specwatch"
    database_read_url: str | None = None  # a streaming replica for the API's reads (docs/scale.md); unset: all on the primary
    database_read_retry_seconds: float = 30.0  # after the replica failed a read, reads use the primary this long
    database_read_connect_timeout_seconds: int = 3  # a connection to the replica not open by then counts as down
    redis_url: str = "redis://127.0.0.1:6379/0"
    data_dir: Path = Path(".specwatch")

    # where metrics come from
    source: str = "prometheus"  # prometheus | scrape
    prometheus_url: str = "http://127.0.0.1:9090"
    prometheus_timeout_seconds: float = 30.0
    prometheus_max_points: int = 11000  # points per series per range query (Prometheus' own cap)
    prometheus_max_samples: int = 50_000_000  # samples one range query may load (--query.max-samples); 0 = no limit
    prometheus_scrape_interval_seconds: float = 15.0  # how often Prometheus scrapes vLLM (for the samples estimate)
    prometheus_increases: str = "raw"  # raw: exact increases between the raw samples a range selector returns (as direct scrape); increase: Prometheus' increase() per bucket (extrapolated), for back ends that cannot return raw samples
    extra_matchers: str = ""  # e.g. namespace="prod",cluster="eu1"
    prometheus_engines: str = "vllm"  # the engines whose metrics the Prometheus source asks for, comma-separated: vllm, llamacpp, sglang (llama.cpp needs a model_name target label)
    scrape_targets: Annotated[list[ScrapeTarget], NoDecode] = Field(default_factory=list)
    scrape_timeout_seconds: float = 10.0  # total deadline of one target's scrape (connect + headers + body)
    # --- collection hardening: bounds per scrape target ---
    scrape_max_body_bytes: int = 16 * 2**20  # a larger /metrics body is cut and refused (docs/collection-limits.md)
    scrape_concurrency: int = 16  # targets fetched at once (each in its own thread, each within its deadline)
    # a counter drop to no less than (1 - this) x its highest value, with the same `_created`, is a dip (increase
    # 0, flagged `counter_dip`), not a reset; 0 = every drop is a reset, as in Prometheus' increase()
    counter_dip_tolerance: float = 0.1  # a drop smaller than this fraction without a _created change is a dip (increase 0, flagged counter_dip), not a reset
    max_pools: int = 2000  # pools collection or per-request ingest may create; past it new pools are refused, stored ones go on

    # pool identity
    class_label: str = "traffic_class"
    mode_label: str = "spec_mode"
    baseline_mode: str = "off"
    default_class: str = "default"
    default_mode: str = "on"  # spec_mode of a pool whose series carry no mode label
    drafter_label: str = "drafter"  # target/series label naming a pool's drafter (its changes are recorded)
    vllm_version_label: str = "vllm_version"  # target/series label naming a pool's vLLM version (its changes are recorded)

    # time
    bucket_seconds: int = 60
    collect_interval_seconds: float = 60.0
    scrape_interval_seconds: float = 15.0
    settle_seconds: float = 30.0  # a bucket is complete this long after its end (scrape + ingestion lag)
    initial_lookback_seconds: int = 3600  # first cycle with an empty database reaches back this far
    backfill_chunk_buckets: int = 720  # buckets per range query / transaction when back-filling
    max_gap_seconds: int = 7 * 24 * 3600  # the automatic back-fill reaches back at most this far
    stale_after_seconds: int = 300
    raw_retention_seconds: int = 3600  # direct-scrape raw samples kept after their bucket is final
    scrape_max_gap_seconds: float = 300.0  # two raw samples further apart than this give no increase

    # celery
    broker_visibility_timeout_seconds: int = 3600  # an unacked task is re-delivered after this long
    task_time_limit_seconds: int = 1800

    # analytics
    alpha_threshold: float = 0.55
    min_drafts: int = 1000

    # serving
    api_host: str = "127.0.0.1"
    api_port: int = 8000
    api_keepalive_seconds: int = 75  # idle keep-alive connections are closed after this (above LB idle timeouts)
    api_access_log: bool = True  # a log line per request (uvicorn's access log; ~0.2-0.4 ms a request here)
    api_read_pool_idle: int = 5  # series reads: database connections kept open between requests
    api_read_pool_max: int = 15  # series reads: connections open at once (a read waits up to 5 s for one, then 503)
    # API admission and hardening (backend.api.limits, backend.api.auth): at most api_max_concurrency
    # requests in the app at once (the database pool is sized to it), api_max_queue more waiting, each at
    # most api_queue_wait_seconds; beyond that 503 with Retry-After instead of a deadlock
    api_max_concurrency: int = 10  # requests running inside the API at once (1-100; the database pool is sized to it)
    api_max_queue: int = 200  # requests waiting for a slot; beyond it 503 with Retry-After at once (/health is never queued)
    api_queue_wait_seconds: float = 10.0  # how long a queued request waits for a slot before its 503
    api_retry_after_seconds: float = 2.0  # the Retry-After of a busy 503
    api_max_body_bytes: int = 1024 * 1024  # request body of any endpoint but POST /requests (its own limit); more: 413
    api_shutdown_timeout_seconds: float = 10.0  # in-flight requests get this long after SIGTERM
    api_workers: int = 1  # API processes `specwatch api` runs (1-32); each has its own admission limit, pools and cache
    # response cache (backend.api.cache, docs/api-cache.md): /summary and /fleet's snapshots per API process,
    # each answer kept until any write to the data it was read from, and at most api_cache_ttl_seconds
    api_cache_entries: int = 512  # answers kept at most (0: no cache, every request computes)
    api_cache_max_bytes: int = 64 * 1024 * 1024  # their JSON bytes at most; the least recently used go first
    api_cache_ttl_seconds: float = 60.0  # an answer is computed again after this long even with no new data
    dashboard_host: str = "127.0.0.1"
    dashboard_port: int = 8050
    api_base_url: str = "http://127.0.0.1:8000"

    @field_validator(*CHOICES, check_fields=False)
    @classmethod
    def _one_of(cls, v: str, info: ValidationInfo) -> str:
        if v not in CHOICES[info.field_name]:
            raise ValueError(f"{info.field_name} must be " + " or ".join(f"'{o}'" for o in CHOICES[info.field_name]))
        return v

    @model_validator(mode="after")
    def _read_replica_bounds(self) -> CoreSettings:
        if not 0 <= self.database_read_retry_seconds <= 86400 or not 1 <= self.database_read_connect_timeout_seconds <= 300:
            raise ValueError("database_read_retry_seconds must be in [0, 86400] and "
                             "database_read_connect_timeout_seconds in [1, 300]")
        return self

    @model_validator(mode="after")
    def _scrape_bounds(self) -> CoreSettings:
        if self.scrape_max_body_bytes < 1 or self.scrape_concurrency < 1 or not self.scrape_timeout_seconds > 0:
            raise ValueError("scrape_max_body_bytes, scrape_concurrency and scrape_timeout_seconds must be > 0")
        if not 0 <= self.counter_dip_tolerance < 1:
            raise ValueError("counter_dip_tolerance must be in [0, 1)")
        return self

    @field_validator("prometheus_increases")
    @classmethod
    def _prometheus_increases(cls, v: str) -> str:
        if v not in ("raw", "increase"):
            raise ValueError("prometheus_increases must be 'raw' (exact, from raw samples) or 'increase' "
                             "(Prometheus' increase(), extrapolated)")
        return v

    @field_validator("prometheus_engines")
    @classmethod
    def _prometheus_engines(cls, v: str) -> str:
        from backend.domain.engines import ENGINE_NAMES
        names = [n.strip() for n in v.split(",") if n.strip()]
        bad = [n for n in names if n not in ENGINE_NAMES]
        if not names or bad:
            raise ValueError(f"prometheus_engines must name one or more of {', '.join(ENGINE_NAMES)} "
                             f"(comma-separated), not {v!r}")
        return ",".join(dict.fromkeys(names))

    @property
    def engines(self) -> tuple[str, ...]:
        """prometheus_engines as a tuple, in the order given."""
        return tuple(self.prometheus_engines.split(","))

    @field_validator("prometheus_max_samples")
    @classmethod
    def _max_samples(cls, v: int) -> int:
        if v < 0:
            raise ValueError("prometheus_max_samples must be >= 0 (0 = no limit)")
        return v

    @field_validator("prometheus_scrape_interval_seconds")
    @classmethod
    def _prom_scrape_interval(cls, v: float) -> float:
        if not v > 0:
            raise ValueError("prometheus_scrape_interval_seconds must be > 0")
        return v

    @model_validator(mode="after")
    def _admission(self) -> CoreSettings:
        if not 1 <= self.api_max_concurrency <= 100 or self.api_max_queue < 0:
            raise ValueError("api_max_concurrency must be in 1..100 and api_max_queue >= 0")
        if self.api_read_pool_max < self.api_max_concurrency:
            raise ValueError("api_read_pool_max must be >= api_max_concurrency (each running request may read)")
        if not 0 <= self.api_read_pool_idle <= self.api_read_pool_max:
            raise ValueError("api_read_pool_idle must be in 0 .. api_read_pool_max")
        if not (self.api_queue_wait_seconds > 0 and self.api_retry_after_seconds > 0
                and self.api_shutdown_timeout_seconds > 0):
            raise ValueError("api_queue_wait_seconds, api_retry_after_seconds and api_shutdown_timeout_seconds "
                             "must be > 0")
        if not 1 <= self.api_workers <= 32:
            raise ValueError("api_workers must be in 1..32")
        if self.api_cache_entries < 0 or self.api_cache_max_bytes < 0 or not self.api_cache_ttl_seconds > 0:
            raise ValueError("api_cache_entries and api_cache_max_bytes must be >= 0, api_cache_ttl_seconds > 0")
        if self.api_max_body_bytes < 1024:
            raise ValueError("api_max_body_bytes must be >= 1024")
        return self

    @field_validator("bucket_seconds")
    @classmethod
    def _bucket(cls, v: int) -> int:
        if v < 1 or (v < 60 and 60 % v) or (v >= 60 and v % 60):
            raise ValueError("bucket_seconds must divide a minute or be a whole number of minutes")
        return v

    @field_validator("scrape_targets", mode="before")
    @classmethod
    def _targets(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = v.strip()
            if not v:
                return []
            if v.startswith("["):
                return json.loads(v)
            # compact form: url|label=value;label=value, comma separated (`engine=` declares the engine)
            out = []
            for item in v.split(","):
                url, _, rest = item.partition("|")
                labels = dict(kv.split("=", 1) for kv in rest.split(";") if kv)
                engine = labels.pop("engine", None)
                out.append({"url": url.strip(), "labels": labels, **({"engine": engine} if engine else {})})
            return out
        return v
