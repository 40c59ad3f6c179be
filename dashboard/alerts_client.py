"""The HTTP calls of the Alerts page, the overview's firing banner and the login (whoami), made through
dashboard.api_client's request helper: the same timeouts, the same typed errors (ApiUnavailable / ApiError)
and the same per-user headers (the logged-in user's bearer token, see dashboard.auth).

The wire objects are read into this module's own pydantic models (the dashboard does not import
backend.api, where the route models live); unknown fields are ignored, a missing one is ApiUnavailable.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from backend.schemas.alerts import AlertRead, SilenceRead, TransitionRead, WhoAmI
from dashboard.api_client import ApiClient, ApiError, ApiUnavailable

M = TypeVar("M", bound=BaseModel)


class Alert(AlertRead):
    """An alert as the API sends it, with the views the page shows."""

    @property
    def threshold(self) -> float | None:
        t = (self.last_values or {}).get("threshold")
        return float(t) if isinstance(t, (int, float)) else None

    @property
    def window(self) -> str | None:
        return (self.last_values or {}).get("window") or None

    @property
    def since(self) -> datetime | None:
        return self.firing_since if self.phase == "firing" else self.pending_since


Transition = TransitionRead
Silence = SilenceRead


def _parse(path: str, body: Any, kind: Any) -> Any:
    try:
        return TypeAdapter(kind).validate_python(body)
    except ValidationError as exc:
        raise ApiUnavailable(f"response of {path} does not match the schema: {exc.error_count()} errors") from exc


def alerts(client: ApiClient) -> list[Alert]:
    """Every alert that is not inactive (pending, firing, resolved), with the silence matching it."""
    return _parse("/alerts", client._request("GET", "/alerts"), list[Alert])


def history(client: ApiClient, *, limit: int = 200, alert_id: int | None = None) -> list[Transition]:
    params = {"limit": limit, **({"alert_id": alert_id} if alert_id is not None else {})}
    return _parse("/alerts/history", client._request("GET", "/alerts/history", params=params), list[Transition])


def silences(client: ApiClient) -> list[Silence]:
    return _parse("/silences", client._request("GET", "/silences"), list[Silence])


def create_silence(client: ApiClient, *, matchers: dict[str, str], duration_seconds: float, reason: str) -> Silence:
    """An operator's silence starting now; the API records the caller (the logged-in user) as its author."""
    body = {"matchers": matchers, "duration_seconds": duration_seconds, "reason": reason}
    return _parse("/silences", client._request("POST", "/silences", json=body), Silence)


def acknowledge(client: ApiClient, alert_id: int, comment: str = "") -> dict[str, Any]:
    return client._request("POST", f"/alerts/{alert_id}/ack", json={"comment": comment})


def whoami(client: ApiClient, token: str | None = None) -> WhoAmI:
    """Who the API takes the caller for; with `token`, who that token is (the login check)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return _parse("/whoami", client._request("GET", "/whoami", headers=headers), WhoAmI)


def needs_token(exc: BaseException) -> bool:
    """The API runs with access control and this request carried no (valid) credentials."""
    return isinstance(exc, ApiError) and exc.status == 401
