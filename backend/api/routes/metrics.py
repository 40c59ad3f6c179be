"""Prometheus exposition of the computed values per pool, for Grafana users (served at /metrics)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest

from backend.api.auth import read_aggregate
from backend.api.deps import NowDep, ReadSessionDep, SettingsDep
from backend.services import fleet
from backend.services.windows import Range

router = APIRouter(tags=["metrics"], dependencies=[Depends(read_aggregate)])

LABELS = ("model_name", "traffic_class", "spec_mode")
GAUGES = {
    "acceptance_rate": "Draft acceptance rate A/D over the window",
    "seed_alpha": "Accepted per draft / K, A/(N K), over the window",
    "mean_acceptance_length": "Tokens per verify step, 1 + A/N, over the window",
    "break_even_alpha": "eps_step / K: seed alpha below which speculation loses",
    "margin": "seed_alpha - eps_step / K",
    "eps_step": "Step overhead: mean ITL spec / baseline - 1 in the same band (else the band default)",
    "eps_effective": "tau / measured speedup - 1 (only with a baseline)",
    "estimated_speedup": "tau / (1 + eps_step)",
    "measured_speedup": "TPOT mean baseline / spec in the same concurrency band",
    "drafts": "Drafts (verify steps with drafts) in the window",
}


@router.get("/metrics", summary="Prometheus metrics of the computed values", response_class=Response)
def get_metrics(session: ReadSessionDep, settings: SettingsDep, now: NowDep) -> Response:
    """Gauges `specwatch_<name>{model_name, traffic_class, spec_mode}` over the last
    `metrics_window_seconds`; an undefined value is omitted, never exported as NaN or 0."""
    registry = CollectorRegistry()
    gauges = {name: Gauge(f"specwatch_{name}", doc, LABELS, registry=registry) for name, doc in GAUGES.items()}
    window = Gauge("specwatch_window_seconds", "Window of the specwatch_* gauges", registry=registry)
    window.set(settings.metrics_window_seconds)
    rng = Range(datetime.fromtimestamp(now.timestamp() - settings.metrics_window_seconds, tz=UTC), now)
    for pools, row in fleet.summaries(session, rng=rng, now=now, settings=settings, quantiles=()):
        labels = (pools[0].model_name, row.traffic_class, row.spec_mode)
        for name, gauge in gauges.items():
            value = row.volume.drafts if name == "drafts" else getattr(row, name)
            if value is not None and math.isfinite(value):
                gauge.labels(*labels).set(value)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
