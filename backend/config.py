"""Settings, read from the environment with the prefix SPECWATCH_ (see the README's table): the plumbing's
(backend.config_core) and the features' below."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

from backend.config_core import CoreSettings, comma_list
from backend.domain.money import DEFAULT_CURRENCY, check_currency


class Settings(CoreSettings):
    """Every setting: CoreSettings' and the features' (analytics, alerts, rollout, storage work, capacity,
    per-request records, replicas)."""

    # --- analytics (owned by the analytics API) ---
    eps_default_by_band: dict[str, float] = Field(
        default_factory=lambda: {"1-8": 0.1, "9-32": 0.2, "33-128": 0.5, ">128": 1.0}
    )  # step overhead eps_step per concurrency band when no baseline ITL measures it (the API says "default-for-band")
    eps_default: float = 0.2  # eps_step when the concurrency band is unknown (no running-requests data)
    speedup_check_tolerance: float = Field(0.03, ge=0.0, le=1.0)  # estimate tau/(1+eps_step) vs measured speedup: a gap beyond the uncertainty is a finding only when larger than this share
    k_advisor_eps0_share: float = Field(0.0, ge=0.0, le=1.0)  # K advisor: fixed share of a class's eps_step (eps0 = share x eps_step, the rest grows with K); 0 = all of it grows with K
    k_advisor_min_trials: int = Field(200, ge=0)  # K advisor: positions fewer drafts reached are left out of the decay fit
    max_points: int = 1500  # automatic step: about this many points per series
    max_points_hard: int = 50000  # an explicit step giving more points is refused (422): 30 d at 1 min fits
    max_cells: int = 2_000_000  # series reads: pools read x time grains per request; more is refused (422)
    max_range_seconds: int = 400 * 24 * 3600
    verdict_max_samples: int = 180  # latency verdict: per-bucket increments re-binned to at most this many
    sparkline_seconds: int = 24 * 3600
    sparkline_step_seconds: int = 1800
    sparkline_fine_seconds: int = 3600  # the sparkline's last this-many seconds in finer steps
    sparkline_fine_step_seconds: int = 300
    metrics_window_seconds: int = 3600  # window of the /metrics gauges
    default_window_seconds: int = 3600

    # --- alerting (owned by alerts) ---
    environment: str = "dev"  # dev | staging | prod: outside dev a placeholder secret_key refuses to start
    secret_key: str = "dev-insecure-change-me"  # Fernet key (or any passphrase, hashed into one)
    alert_rules_file: Path = Path("alerts.example.yaml")
    alert_eval_interval_seconds: float = 60.0
    alert_deliver_interval_seconds: float = 10.0
    alert_deliver_max_run_seconds: float = 30.0  # a deliver task keeps pacing due messages this long at most
    alert_min_send_interval_seconds: float = 1.0  # <= ~1 message/s per webhook (Slack's limit)
    alert_retry_base_seconds: float = 2.0  # 5xx / transport errors: base * 2^attempt, capped
    alert_retry_max_seconds: float = 300.0
    alert_max_attempts: int = 50  # transient failures before a message is given up (status failed)
    alert_http_timeout_seconds: float = 10.0
    alertmanager_resend_seconds: float = 600.0  # firing alerts re-sent to Alertmanager channels this often
    dashboard_base_url: str = "http://127.0.0.1:8050"
    auth_mode: str = "token"  # token | trusted-header
    # false: every read needs a viewer credential. true: a caller without one reads the aggregate endpoints
    # as a viewer; never the per-request endpoints (request ids, tenant labels), alerts, channels or tokens
    anonymous_read: bool = False  # true: reads of aggregates need no credential (never per-request data, alerts, tokens)
    auth_header: str = "X-Forwarded-User"  # trusted-header mode: the proxy's user header
    auth_role_header: str = "X-Forwarded-Role"  # trusted-header mode: role (viewer when absent)
    # trusted-header mode: the user/role headers count only on a request from one of these addresses
    # (CIDRs; comma-separated in the environment) or one carrying the shared secret in auth_proxy_secret_header
    auth_trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["127.0.0.1/32", "::1/128"])  # trusted-header mode: user/role headers count only from these TCP peers (CIDRs, comma-separated)
    auth_proxy_secret: str = ""  # trusted-header mode: a request carrying this secret is trusted from any address (empty: address check only)
    auth_proxy_secret_header: str = "X-Specwatch-Proxy-Secret"  # the header that carries auth_proxy_secret

    @field_validator("alertmanager_resend_seconds")
    @classmethod
    def _alertmanager_resend(cls, v: float) -> float:
        if not 0 < v <= 3600:
            raise ValueError("alertmanager_resend_seconds must be > 0 and <= 3600 (Alertmanager expires a "
                             "forwarded alert 4 h after its last re-send)")
        return v

    @field_validator("auth_trusted_proxies", mode="before")
    @classmethod
    def _proxies(cls, v: Any) -> Any:
        v = comma_list(v)
        for cidr in v:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise ValueError(f"auth_trusted_proxies: {cidr!r} is not an address or CIDR") from None
        return v

    @model_validator(mode="after")
    def _no_placeholder_secret(self) -> Settings:
        if self.environment != "dev" and (not self.secret_key or "change-me" in self.secret_key
                                          or len(self.secret_key) < 32):
            raise ValueError("SPECWATCH_SECRET_KEY is a placeholder (or shorter than 32 characters); set a real "
                             "key outside SPECWATCH_ENVIRONMENT=dev (e.g. `python -c 'from cryptography.fernet "
                             "import Fernet; print(Fernet.generate_key().decode())'`)")
        return self

    # --- rollout (owned by rollout) ---
    rollout_gate_alpha: float = 0.55  # go/no-go: acceptance rate on the production mix
    rollout_min_drafts: int = 20000  # volume guard: fewer drafts in the window = Inconclusive
    rollout_window_seconds: int = 6 * 3600  # trailing window of one gate evaluation
    rollout_eval_interval_seconds: float = 900.0  # how often the stage derivation runs
    rollout_failure_limit: int = 0  # failed evaluations allowed (cumulative over the gate run)
    rollout_consecutive_error_limit: int = 4  # the gate is Error once more errors than this come in a row
    rollout_inconclusive_limit: int = 3  # inconclusive evaluations allowed (cumulative) before holding
    rollout_consecutive_successes: int = 2  # passes in a row for the gate to pass
    rollout_dry_run: bool = False  # measure and record, never move a stage past `measuring`
    report_timezone: str = "UTC"  # ISO weeks of the weekly report start on Monday 00:00 here
    digest_enabled: bool = True
    digest_weekday: int = 1  # ISO weekday (1 = Monday) the weekly digest goes out, for the week before
    digest_time: str = "09:00"  # local time (report_timezone) the digest goes out
    digest_check_interval_seconds: float = 900.0  # beat checks this often whether the digest is due
    digest_week: Literal["previous", "current"] = "previous"  # the week the digest reports: previous (the complete week before) or current (the week so far, sent once a week; the demo's choice)

    @field_validator("report_timezone")
    @classmethod
    def _report_tz(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"report_timezone {v!r} is not an IANA time zone") from None
        return v

    @field_validator("digest_time")
    @classmethod
    def _digest_time(cls, v: str) -> str:
        hh, _, mm = v.partition(":")
        if not (hh.isdigit() and mm.isdigit() and int(hh) < 24 and int(mm) < 60):
            raise ValueError("digest_time must be HH:MM")
        return v

    # --- performance (owned by performance) ---
    raw_retention_days: int = 14  # 1-minute buckets: daily partitions wholly older are dropped (0 = keep)
    rollup_retention_days: int = 400  # hourly and daily rollups kept this long, in whole UTC days (0 = keep)
    partitions_ahead_days: int = 7  # daily partitions created ahead by the storage task
    rollup_interval_seconds: float = 60.0  # beat period of the rollup maintenance
    rollup_batch_hours: int = 20000  # dirty (pool, hour) entries per rollup transaction
    storage_interval_seconds: float = 3600.0  # beat period of partition creation and retention
    shard_count: int = 1  # Prometheus collection split over this many workers (by a hash of model_name)
    shard_index: int = 0  # this worker's shard, 0 .. shard_count - 1 (its own cursor)
    fleet_snapshot_windows: Annotated[list[int], NoDecode] = Field(default_factory=lambda: [3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400])  # precomputed /fleet
    fleet_snapshot_interval_seconds: float = 60.0  # beat period of the fleet snapshot task
    fleet_snapshot_max_age_seconds: float = 180.0  # an older snapshot is ignored: /fleet computes live
    # a window's snapshot is recomputed once older than this fraction of the window (6 h: ~2 min, 24 h:
    # ~7 min), at most every interval and at least every fleet_snapshot_max_period_seconds (0: every window
    # every run; 7 d and 30 d: every 15 min, 0.15 % and 0.03 % of their length)
    fleet_snapshot_refresh_fraction: float = 0.005
    fleet_snapshot_max_period_seconds: float = 900.0

    # --- capacity and money ---
    gpu_hour_price: dict[str, float] = Field(default_factory=dict)  # price of one GPU-hour per model, JSON `{"model": 2.5}`; key `*` for every other model; empty: no cost figures
    gpus_per_replica: dict[str, int] = Field(default_factory=lambda: {"*": 1})  # GPUs one replica (one vLLM server) holds, per model; key `*` for every other model
    pool_replicas: dict[str, dict[str, int]] = Field(default_factory=dict)  # replicas per pool until collected per replica: `{"model": {"*": 2, "chat": 4, "chat:off": 3}}` (most specific wins; model `*` for the rest); absent: per-replica figures and costs are null
    capacity_boot_samples: int = 1000  # capacity: bootstrap replicates of the saving's interval (1-20000)
    currency: str = DEFAULT_CURRENCY  # currency of every money figure (the GPU-hour price's): a 3-letter ISO 4217 code such as `EUR`, or a short symbol such as `$` or `€`

    @field_validator("currency")
    @classmethod
    def _currency(cls, v: str) -> str:
        return check_currency(v)

    @model_validator(mode="after")
    def _capacity(self) -> Settings:
        for model, price in self.gpu_hour_price.items():
            if not model or not 0 < price <= 100_000:
                raise ValueError(f"gpu_hour_price[{model!r}] must be in (0, 100000]")
        for model, n in self.gpus_per_replica.items():
            if not model or not 1 <= n <= 1024:
                raise ValueError(f"gpus_per_replica[{model!r}] must be in 1..1024")
        for model, by_pool in self.pool_replicas.items():
            for key, n in by_pool.items():
                if not model or not key or key.count(":") > 1 or not 1 <= n <= 100_000:
                    raise ValueError(f"pool_replicas[{model!r}][{key!r}]: key *, class or class:mode; "
                                     "value in 1..100000")
        if not 1 <= self.capacity_boot_samples <= 20_000:
            raise ValueError("capacity_boot_samples must be in 1..20000")
        return self

    # --- per-request acceptance (owned by POST /requests) ---
    requests_labels: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["traffic_class", "tenant", "route"])  # labels a record may carry
    requests_class_label: str = "traffic_class"  # the label that names a record's traffic class
    requests_label_max_values: int = 200  # distinct values per label within requests_label_values_window_seconds; more: 422
    requests_label_values_window_seconds: float = 86400.0  # the window of requests_label_max_values
    requests_label_value_max_length: int = 120  # characters of one per-request label value (longer: 422)
    requests_max_batch: int = 10000  # records per POST; more is refused (413)
    requests_max_body_bytes: int = 16 * 1024 * 1024  # body of one POST; more is refused (413)
    requests_retention_days: float = 7.0  # per-request rows kept (their bucket sums follow raw_retention_days)
    requests_future_seconds: float = 300.0  # a finish_time further ahead than this is refused
    requests_export_max: int = 10000  # rows one lowest-acceptance export may return
    # a batch taking a sender past the cap is refused whole (422); new per-request pools count against max_pools
    requests_max_models_per_sender: int = 50  # distinct models one ingest token (or proxy user) may post per window; more: 422
    requests_models_window_seconds: float = 86400.0  # the window of requests_max_models_per_sender

    # --- replicas ---
    replica_bucket_seconds: int = 600  # grain of per-replica rows, rounded up to a multiple of bucket_seconds (0 = none)
    replica_retention_days: float = 7.0  # per-replica rows kept this long (deleted by the storage task)
    replica_instance_label: str = "instance"  # Prometheus label naming a replica (e.g. pod); scrape: the target
    replica_engine_label: str = "engine"  # vLLM's data-parallel engine label (a replica is instance x engine)

    @field_validator("requests_labels", "fleet_snapshot_windows", mode="before")
    @classmethod
    def _comma_lists(cls, v: Any) -> Any:
        return comma_list(v)

    @model_validator(mode="after")
    def _requests(self) -> Settings:
        if self.requests_class_label not in self.requests_labels:
            raise ValueError("requests_class_label must be one of requests_labels")
        for name in ("requests_label_max_values", "requests_max_batch", "requests_max_body_bytes",
                     "requests_export_max", "requests_label_value_max_length", "requests_max_models_per_sender"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if not self.requests_retention_days > 0:
            raise ValueError("requests_retention_days must be > 0")
        for name in ("requests_models_window_seconds", "requests_label_values_window_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0")
        return self

    @model_validator(mode="after")
    def _shard(self) -> Settings:
        if self.shard_count < 1 or not 0 <= self.shard_index < self.shard_count:
            raise ValueError("shard_index must be in 0 .. shard_count - 1 (shard_count >= 1)")
        return self

    @model_validator(mode="after")
    def _snapshot_periods(self) -> Settings:
        if not self.fleet_snapshot_interval_seconds > 0:
            raise ValueError("fleet_snapshot_interval_seconds must be > 0")
        if not 0 <= self.fleet_snapshot_refresh_fraction <= 1:
            raise ValueError("fleet_snapshot_refresh_fraction must be in [0, 1]")
        if self.fleet_snapshot_max_period_seconds < 0 or self.fleet_snapshot_max_age_seconds < 0:
            raise ValueError("fleet_snapshot_max_period_seconds and fleet_snapshot_max_age_seconds must be >= 0")
        return self

    @model_validator(mode="after")
    def _replica_grain(self) -> Settings:
        if self.replica_bucket_seconds < 0:
            raise ValueError("replica_bucket_seconds must be >= 0")
        if self.replica_retention_days <= 0:
            raise ValueError("replica_retention_days must be > 0")
        return self

    @property
    def replica_grain(self) -> int:
        """The replica rows' width: replica_bucket_seconds rounded up to a whole number of buckets (0: off)."""
        g, w = self.replica_bucket_seconds, self.bucket_seconds
        return -(-g // w) * w if g > 0 else 0


@lru_cache
def get_settings() -> Settings:
    return Settings()
