"""The only HTTP caller of the dashboard: httpx with timeouts -> backend.schemas models.

Errors are typed so that a page knows what to show: `ApiUnavailable` (nothing answered, a timeout, a 5xx:
"backend unreachable — retrying") and `ApiError` (the API answered 4xx: a bad window, an unknown model).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar, copy_context
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from backend.schemas.acceptance import AcceptanceSeriesRead
from backend.schemas.calc import (
    BreakevenCalcBody,
    CalcRead,
    KAdviceSetRead,
    MixCalcBody,
    RequiredAlphaCalcBody,
    SpeedupCalcBody,
)
from backend.schemas.capacity import CapacityRead
from backend.schemas.fleet import FleetPageRead, FleetRead
from backend.schemas.pools import PoolFiguresRead, PoolsRead, ReplicasRead
from backend.schemas.summary import MIXED, SummaryRead
from dashboard.state import View

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
PREFIX = "/api/v1"
# Headers added to every API call made while serving one dashboard request (the logged-in user's bearer
# token, or the proxy's user/role headers): set per request by dashboard.auth; explicit headers win.
REQUEST_HEADERS: ContextVar[dict[str, str] | None] = ContextVar("specwatch_request_headers", default=None)


class ApiUnavailable(Exception):
    """The backend did not answer usefully (connection refused, timeout, 5xx, unparseable body)."""


class ApiError(Exception):
    """The backend refused the request (4xx); `detail` is its message, `code` what was refused (e.g.
    spec_mode_required, unknown_model; None when the API sent none), `known` the names it knows instead.
    Pages show it as a sentence with a way forward (dashboard.components.refusal), never the raw message alone."""

    def __init__(self, status: int, detail: str, known: list[str] | None = None, code: str | None = None):
        super().__init__(f"{status}: {detail}")
        self.status, self.detail, self.known, self.code = status, detail, known or [], code


@dataclass(frozen=True)
class Annotation:
    """A marker on a time axis: a restart or a drafter / vLLM version change."""

    t: datetime
    kind: str
    text: str


class ApiClient:
    def __init__(self, base_url: str, *, timeout: float = 15.0, transport: httpx.BaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, transport=transport,
                                  timeout=httpx.Timeout(timeout, connect=3.0),
                                  event_hooks={"request": [_add_request_headers]})

    def close(self) -> None:
        self._http.close()

    # --- transport ----------------------------------------------------------------------------------
    def _request(self, method: str, path: str, **kw: Any) -> Any:
        try:
            resp = self._http.request(method, PREFIX + path, **kw)
        except httpx.HTTPError as exc:
            raise ApiUnavailable(f"{type(exc).__name__} calling {self.base_url}{PREFIX}{path}") from exc
        _raise_for_status(resp, path)
        body = _json(resp)
        if body is None:
            raise ApiUnavailable(f"unparseable response from {path}")
        return body

    def _get(self, path: str, model: type[M], params: dict[str, Any]) -> M:
        body = self._request("GET", path, params={k: v for k, v in params.items() if v is not None})
        try:
            return model.model_validate(body)
        except ValidationError as exc:
            raise ApiUnavailable(f"response of {path} does not match the schema: {exc.error_count()} errors") from exc

    # --- endpoints ----------------------------------------------------------------------------------
    def pools(self) -> PoolsRead:
        return self._get("/pools", PoolsRead, {})

    def fleet(self, view: View, **page: Any) -> FleetRead:
        """Every row; with `page` (q, model, state, sort, offset, limit) one page of them (FleetPageRead)."""
        if page:
            return self._get("/fleet", FleetPageRead, {**_window(view, "window"), **page})
        return self._get("/fleet", FleetRead, _window(view, "window"))

    def pool_figures(self, model: str, view: View) -> PoolFiguresRead:
        """Per pool of the model, its engine and each spec-decode figure, exact, estimated or not exposed."""
        return self._get("/pools/figures", PoolFiguresRead, {"model": model, **_window(view, "window")})

    def summary(self, model: str, view: View | None = None, *, start: str | None = None,
                end: str | None = None) -> SummaryRead:
        params = {"start": start, "end": end} if start else _window(view or View(), "window")
        return self._get("/summary", SummaryRead, {"model": model, **params})

    def k_advice(self, model: str, view: View | None = None) -> KAdviceSetRead:
        return self._get("/k-advice", KAdviceSetRead, {"model": model, **_window(view or View(), "window")})

    def capacity(self, model: str, view: View) -> CapacityRead:
        return self._get("/capacity", CapacityRead, {"model": model, **_window(view, "window")})

    def replicas(self, model: str, window: str = "1h") -> ReplicasRead:
        """The replica table of a model (the model name goes into the path, '/' kept)."""
        return self._get(f"/models/{quote(model, safe='/')}/replicas", ReplicasRead, {"window": window})

    def acceptance(self, model: str, view: View, *, traffic_class: str = MIXED, spec_mode: str | None = None,
                   step: str | None = None, rolling: str | None = None) -> AcceptanceSeriesRead:
        params = {"model": model, "traffic_class": traffic_class, "spec_mode": spec_mode, "step": step,
                  "window": rolling, **_window(view, "range")}
        return self._get("/acceptance", AcceptanceSeriesRead, params)

    def annotations(self, model: str, view: View) -> list[Annotation]:
        """Restarts and version changes; [] when the backend has no annotations endpoint."""
        try:
            body = self._request("GET", "/annotations", params={"model": model, **_window(view, "range")})
        except ApiError as exc:
            if exc.status == 404 and "Not Found" in exc.detail:
                return []
            raise
        out = []
        for item in body.get("annotations", []):
            try:
                out.append(Annotation(t=datetime.fromisoformat(item["t"]),
                                      kind=str(item["kind"]), text=str(item.get("text", item["kind"]))))
            except (KeyError, ValueError, AttributeError):
                continue
        return out

    def calc(self, operation: str, body: SpeedupCalcBody | BreakevenCalcBody | RequiredAlphaCalcBody
             | MixCalcBody) -> CalcRead:
        data = self._request("POST", f"/calc/{operation}", json=body.model_dump(mode="json"))
        try:
            return CalcRead.model_validate(data)
        except ValidationError as exc:
            raise ApiUnavailable(f"calc/{operation} response does not match the schema") from exc


def _add_request_headers(request: httpx.Request) -> None:
    for key, val in (REQUEST_HEADERS.get() or {}).items():
        request.headers.setdefault(key, val)


def _window(view: View, duration_key: str) -> dict[str, str]:
    w = view.api_window()
    return {duration_key: w["duration"]} if "duration" in w else w


def _json(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        return None


def _detail(resp: httpx.Response) -> str:
    body = _json(resp)
    if isinstance(body, dict) and isinstance(body.get("detail"), str):
        return body["detail"]
    if isinstance(body, dict) and isinstance(body.get("detail"), list):  # FastAPI validation errors
        return "; ".join(str(d.get("msg", d)) for d in body["detail"] if isinstance(d, dict))
    return resp.reason_phrase or str(resp.status_code)


_client: ApiClient | None = None


def configure(base_url: str, **kw: Any) -> ApiClient:
    """Set the process-wide client (create_app calls this once)."""
    global _client
    if _client is not None:
        _client.close()
    _client = ApiClient(base_url, **kw)
    return _client


def get_client() -> ApiClient:
    if _client is None:
        raise RuntimeError("dashboard.api_client.configure(base_url) was not called")
    return _client


def parallel(calls: list[Callable[[], T]], workers: int = 8) -> list[T]:
    """Run independent API calls concurrently (httpx.Client is thread-safe); the first error is raised."""
    if len(calls) <= 1:
        return [f() for f in calls]
    contexts = [copy_context() for _ in calls]  # each call sees the caller's REQUEST_HEADERS
    with ThreadPoolExecutor(max_workers=min(workers, len(calls))) as ex:
        return list(ex.map(lambda cf: cf[0].run(cf[1]), zip(contexts, calls, strict=True)))


def summary_slices(client: ApiClient, model: str, start: datetime, end: datetime, n: int = 12) -> list[SummaryRead]:
    """The model's summary over n equal consecutive slices of [start, end] (for values over time)."""
    width = (end - start) / n
    bounds = [(start + i * width, start + (i + 1) * width) for i in range(n)]
    return parallel([lambda a=a, b=b: client.summary(model, start=_z(a), end=_z(b)) for a, b in bounds])


def _z(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- rollout, weekly report, plan (owned by rollout) ----------------------------------------------------
# The rollout/report/plan wire models live beside their routes; the dashboard reads them as plain dicts.

def rollout_tracks(client: ApiClient, model: str | None = None) -> dict[str, Any]:
    return client._request("GET", "/rollout", params={k: v for k, v in {"model": model}.items() if v})


def rollout_events(client: ApiClient, model: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    return client._request("GET", "/rollout/events", params={k: v for k, v in {"model": model, "limit": limit}.items() if v})


def rollout_transition(client: ApiClient, *, token: str, model: str, scope: str, action: str,
                       reason: str) -> dict[str, Any]:
    """An operator's manual transition; the token (operator role) goes in the Authorization header."""
    return client._request("POST", "/rollout/transitions", headers={"Authorization": f"Bearer {token}"},
                           json={"model": model, "scope": scope, "action": action, "reason": reason})


def weekly_report(client: ApiClient, week: str | None = None) -> dict[str, Any]:
    return client._request("GET", "/reports/weekly", params={"week": week} if week else {})


def _raise_for_status(resp: httpx.Response, where: str, *, detail: bool = True) -> None:
    """ApiUnavailable on a 5xx ("503 from <where>", with the API's detail unless told not to); ApiError with
    the detail, the names it knows instead and its code on a 4xx."""
    if resp.status_code >= 500:
        raise ApiUnavailable(f"{resp.status_code} from {where}" + (f": {_detail(resp)}" if detail else ""))
    if resp.status_code >= 400:
        body = _json(resp)
        body = body if isinstance(body, dict) else {}
        raise ApiError(resp.status_code, _detail(resp), body.get("known_models") or body.get("known"),
                       body.get("code") if isinstance(body.get("code"), str) else None)


def weekly_export(client: ApiClient, week: str, fmt: str) -> bytes:
    """The report file (md | csv | pdf) as bytes."""
    try:
        resp = client._http.get(PREFIX + "/reports/weekly/export", params={"week": week, "format": fmt})
    except httpx.HTTPError as exc:
        raise ApiUnavailable(f"{type(exc).__name__} exporting the report") from exc
    _raise_for_status(resp, "the report export", detail=False)
    return resp.content


def rollout_plan(client: ApiClient, *, model: str, k: int, traffic: dict[str, float], concurrency: int,
                 alpha: dict[str, float] | None = None) -> dict[str, Any]:
    return client._request("POST", "/plan", json={"model": model, "k": k, "traffic": traffic,
                                                  "concurrency": concurrency, "alpha": alpha or {}})


def compare_params(model: str, a: str | None, b: str | None, at: str | None, window: str | None) -> dict[str, str]:
    """The /compare query of the page's fields: side by side (a, b) or before/after (at, a optional)."""
    params = {"model": model, "a": a, "b": b, "at": at, "range": window}
    return {k: v.strip() for k, v in params.items() if v and v.strip()}


def compare_report(client: ApiClient, params: dict[str, str]) -> dict[str, Any]:
    return client._request("GET", "/compare", params=params)


def compare_csv(client: ApiClient, params: dict[str, str]) -> bytes:
    """The comparison as CSV (GET /compare?format=csv)."""
    try:
        resp = client._http.get(PREFIX + "/compare", params={**params, "format": "csv"})
    except httpx.HTTPError as exc:
        raise ApiUnavailable(f"{type(exc).__name__} exporting the comparison") from exc
    if resp.status_code >= 500:
        raise ApiUnavailable(f"{resp.status_code} from the comparison export")
    if resp.status_code >= 400:
        raise ApiError(resp.status_code, _detail(resp))
    return resp.content


def request_acceptance(client: ApiClient, model: str, view: View) -> dict[str, Any]:
    """GET /requests/acceptance over the view's window: per class of the model's per-request records, the α
    distribution and `by_context_length` (the model page's α by context length)."""
    return client._request("GET", "/requests/acceptance", params={"model": model, **_window(view, "window")})
