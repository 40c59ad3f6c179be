"""Per-process resources for tasks: settings, the session factory and the Prometheus client, built on
first use in the worker process (never at import, never shared across a fork)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from backend.config import Settings, get_settings
from backend.db.session import make_engine, make_sessionmaker
from backend.prom.client import PromClient

_state: dict = {}


def reset() -> None:
    engine = _state.pop("engine", None)
    if engine is not None:
        engine.dispose(close=False)
    _state.clear()


def settings() -> Settings:
    return get_settings()


def session_factory() -> sessionmaker[Session]:
    if "factory" not in _state:
        _state["engine"] = make_engine(settings().database_url)
        _state["factory"] = make_sessionmaker(_state["engine"])
    return _state["factory"]


def prom_client() -> PromClient:
    if "prom" not in _state:
        s = settings()
        _state["prom"] = PromClient(s.prometheus_url, timeout=s.prometheus_timeout_seconds,
                                    max_points=s.prometheus_max_points)
    return _state["prom"]


def utcnow() -> datetime:
    return datetime.now(UTC)


DB_TRANSIENT = (OperationalError, InterfaceError, ConnectionError, TimeoutError)


def retry_options(*transient: type[BaseException]) -> dict:
    """Celery task options: late acks, and retries with backoff on transient errors only (the database or
    the named services unreachable); everything else fails the task at once."""
    return {"autoretry_for": DB_TRANSIENT + transient, "retry_backoff": 2, "retry_backoff_max": 60,
            "retry_jitter": True, "max_retries": 5, "acks_late": True}
