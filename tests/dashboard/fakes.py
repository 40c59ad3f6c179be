"""Plain wire objects for unit tests: schemas built from dicts, and a fake API client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backend.schemas.acceptance import AcceptanceSeriesRead
from backend.schemas.fleet import FleetPageRead, FleetRead
from backend.schemas.pools import PoolsRead
from backend.schemas.summary import SummaryRead
from backend.services import fleet_page
from dashboard.api_client import ApiUnavailable

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WINDOW = {"start": (NOW - timedelta(hours=1)).isoformat(), "end": NOW.isoformat(), "seconds": 3600}
REF = {"id": 1, "model_name": "m", "traffic_class": "chat", "spec_mode": "eagle3", "num_spec_tokens": 3}


def class_row(cls: str = "chat", **kw) -> dict:
    row = {"traffic_class": cls, "spec_mode": "eagle3", "num_spec_tokens": 3, "pools": [REF],
           "acceptance_rate": 0.7, "seed_alpha": 0.7, "mean_acceptance_length": 3.1,
           "per_position_conditional": [0.86, 0.8, None], "per_position_unconditional": [0.86, 0.69, None],
           "per_token_acceptance": 0.8, "eps_step": 0.3, "eps_step_source": "measured", "break_even_alpha": 0.1,
           "margin": 0.6, "estimated_speedup": 2.38, "measured_speedup": None, "running_mean": 12.0,
           "concurrency_band": "9-32", "volume": {"drafts": 5000, "min_drafts": 1000, "sufficient": True},
           "freshness": {"last_seen": NOW.isoformat(), "age_seconds": 10, "stale": False}}
    row.update(kw)
    return row


def summary(classes: list[dict] | None = None, start: datetime | None = None) -> SummaryRead:
    w = dict(WINDOW, start=(start or NOW - timedelta(hours=1)).isoformat())
    return SummaryRead.model_validate({"model_name": "m", "window": w, "generated_at": NOW.isoformat(),
                                       "alpha_threshold": 0.55, "classes": classes or [class_row()]})


def fleet_row(**kw) -> dict:
    row = {"model_name": "m", "traffic_class": "chat", "spec_mode": "eagle3", "num_spec_tokens": 3,
           "state": "healthy", "acceptance_rate": 0.7, "mean_acceptance_length": 3.1, "margin": 0.6,
           "p99_itl_delta": 0.012, "p99_itl_verdict": "worse", "p99_tpot_delta": None,
           "freshness": {"last_seen": NOW.isoformat(), "age_seconds": 10, "stale": False},
           "sparkline": {"step_seconds": 1800, "t": [NOW.isoformat()], "acceptance_rate": [None]}}
    row.update(kw)
    return row


def fleet(rows: list[dict]) -> FleetRead:
    return FleetRead.model_validate({"window": WINDOW, "generated_at": NOW.isoformat(), "alpha_threshold": 0.55,
                                     "rows": rows})


def series(cls: str, values: list[float | None]) -> AcceptanceSeriesRead:
    t = [(NOW - timedelta(minutes=len(values) - i)).isoformat() for i in range(len(values))]
    return AcceptanceSeriesRead.model_validate({
        "model_name": "m", "traffic_class": cls, "spec_mode": "eagle3", "num_spec_tokens": 3, "window": WINDOW,
        "step_seconds": 60, "bucket_seconds": 60, "pools": [REF], "t": t, "acceptance_rate": values,
        "mean_acceptance_length": values, "seed_alpha": values, "drafts": values, "draft_tokens": values,
        "accepted_tokens": values})


def pools(stale_models: tuple[str, ...] = ()) -> PoolsRead:
    out = []
    for i, (model, mode) in enumerate((("m", "eagle3"), ("m", "off"), ("z-old", "eagle3"))):
        out.append({"id": i, "model_name": model, "traffic_class": "chat", "spec_mode": mode,
                    "is_baseline": mode == "off", "first_seen": NOW.isoformat(), "last_seen": NOW.isoformat(),
                    "age_seconds": 0, "stale": model in stale_models})
    return PoolsRead.model_validate({"generated_at": NOW.isoformat(), "stale_after_seconds": 300, "pools": out})


class FakeClient:
    """Answers like the API; `down=True` raises ApiUnavailable for everything."""

    def __init__(self, *, down: bool = False, fleet_rows: list[dict] | None = None, quiet: bool = False):
        self.down, self.fleet_rows, self.quiet = down, fleet_rows, quiet
        self.calls: list[tuple] = []

    def _check(self, name: str, *args) -> None:
        self.calls.append((name, *args))
        if self.down:
            raise ApiUnavailable("ConnectError calling http://127.0.0.1:9")

    def pools(self):
        self._check("pools")
        return pools()

    def fleet(self, view, **page):
        self._check("fleet", view, *sorted(page.items()))
        whole = fleet(self.fleet_rows or [fleet_row()])
        if not page:
            return whole
        query = fleet_page.PageQuery(**{k: v for k, v in page.items() if v is not None})
        return FleetPageRead.model_validate(fleet_page.page(whole.model_dump(mode="json"), query))

    def summary(self, model, view=None, *, start=None, end=None):
        self._check("summary", model, start)
        if self.quiet:
            return summary([class_row(acceptance_rate=None, volume={"drafts": None, "min_drafts": 1000,
                                                                   "sufficient": False})])
        return summary([class_row(), class_row("mixed")])

    def acceptance(self, model, view, *, traffic_class="mixed", **_):
        self._check("acceptance", model, traffic_class)
        return series(traffic_class, [None, None] if self.quiet else [0.7, None, 0.72])

    def annotations(self, model, view):
        self._check("annotations", model)
        return []

    def capacity(self, model, view):
        self._check("capacity", model)
        return capacity(model)



def _side(per_replica: float, cost: float) -> dict:
    return {"tokens": 1e6, "seconds": 3600.0, "throughput": per_replica * 2, "per_replica": per_replica,
            "per_request": per_replica / 4, "replicas": 2.0, "cost_per_mtok": cost}


MONEY = {"currency": "EUR", "cost_per_mtok_spec": 25.4, "cost_per_mtok_baseline": 35.56, "saved_in_window": 12.8, "saved_in_window_low": 3.47,
         "saved_in_window_high": 23.47, "per_week_at_window_rate": 2150.4, "per_week_at_window_rate_low": 583.0,
         "per_week_at_window_rate_high": 3942.96, "compared_fraction": 1.0}


def capacity(model: str = "m"):
    from backend.schemas.capacity import CapacityRead

    band = {"band": "1-8", "spec": _side(125.0, 17.78), "baseline": _side(62.5, 35.56), "ratio_per_replica": 2.0,
            "ratio_low": 1.5, "ratio_high": 2.5, "ratio_per_request": 2.0, "saved_in_window": 16.0, "saved_in_window_low": 6.67,
            "saved_in_window_high": 26.67, "pays": "yes"}
    ref = {"id": 1, "model_name": model, "traffic_class": "chat", "spec_mode": "eagle3", "num_spec_tokens": 3}
    cls = {"traffic_class": "chat", "spec_mode": "eagle3", "spec_pool": ref,
           "baseline_pool": {**ref, "id": 2, "spec_mode": "off"}, "replicas_spec": 2.0, "replicas_baseline": 2.0,
           "replicas_source": "configured", "currency": "EUR", "gpu_hour_price": 2.0, "gpus_per_replica": 4,
           "spec": _side(87.5, 25.4), "baseline": _side(62.5, 35.56), "bands": [band], "money": MONEY,
           "stops_paying_band": ">128", "stops_paying_significant": True,
           "note": "speculation loses throughput from the >128 band on (significantly)"}
    return CapacityRead.model_validate({
        "model_name": model, "window": {"start": NOW.isoformat(), "end": NOW.isoformat(), "seconds": 3600.0},
        "generated_at": NOW.isoformat(), "currency": "EUR", "method": "percentile bootstrap", "classes": [cls],
        "total": MONEY})
