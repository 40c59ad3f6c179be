"""Plain wire objects for unit tests: schemas built from dicts, and a fake API client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backend.schemas import AcceptanceSeriesRead, FleetPageRead, FleetRead, PoolsRead, SummaryRead
from backend.services import fleet_page
from dashboard.api_client import ApiUnavailable

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WINDOW = {"start": (NOW - timedelta(hours=1)).isoformat(), "end": NOW.isoformat(), "seconds": 3600}
REF = {"id": 1, "model_name": "m", "traffic_class": "chat", "spec_mode": "eagle3", "num_spec_tokens": 3}


def class_row(cls: str = "chat", **kw) -> dict:
    row = {"traffic_class": cls, "spec_mode": "eagle3", "num_spec_tokens": 3, "pools": [REF],
           "acceptance_rate": 0.7, "seed_alpha": 0.7, "mean_acceptance_length": 3.1,
           "per_position_conditional": [0.86, 0.8, None], "per_position_unconditional": [0.86, 0.69, None],
           "per_token_acceptance": 0.8, "eps": 0.3, "eps_source": "measured", "break_even_alpha": 0.1,
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
