"""The HTTP API: `create_app()` builds the app; the lifespan builds the engine and sessionmaker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI

from backend.api import errors, openapi
from backend.api.auth import credentials
from backend.api.auth_gate import AuthBeforeBody
from backend.api.cache import ResponseCache
from backend.api.headers import SecurityHeaders
from backend.api.limits import Admission, BodyLimit, RefuseNul
from backend.api.read_headers import ReadSourceHeaders
from backend.api.routes import (
    acceptance,
    alerts,
    annotations,
    calc,
    capacity,
    channels,
    compare,
    fleet,
    gates,
    health,
    k_advice,
    latency,
    metrics,
    plan,
    pools,
    replicas,
    report,
    requests,
    rollout,
    summary,
    tokens,
)
from backend.config import Settings, get_settings
from backend.db import data_version
from backend.db.replica import ReadRoute
from backend.db.session import Reader, ReadPool, make_engine, make_sessionmaker

API_PREFIX = "/api/v1"
# bodies checked record by record by their endpoint (a record with a NUL is refused alone, the others stored)
RAW_BODIES = (f"{API_PREFIX}/requests",)
GATE_BODY_BYTES = 16 * 1024  # Flagger's webhook payload (name, namespace, phase, checksum, metadata)
DESCRIPTION = """Is speculative decoding (EAGLE-3) paying off on the vLLM fleet, per model x traffic class?

Every ratio is computed from counters summed over the window (never an average of ratios); undefined
values are `null`, never 0. Windows: durations such as `5m`, `1h`, `24h`, `7d`, `30d`, or `start`/`end` as
RFC 3339 times (`2026-11-30T12:00:00Z`; without an offset, UTC) or unix seconds. Each parameter's pattern is
the form the API reads; no text may hold a NUL character. ITL is per engine step (chunk), TPOT per token."""


def _replica(settings: Settings, app: FastAPI, sizes: dict) -> tuple[ReadRoute, list]:
    """The read replica's engine, read pool and Reader, and the route between it and the primary's; with
    what closes them. A replica connection not open within its connect timeout counts as down."""
    url, timeout = settings.database_read_url, settings.database_read_connect_timeout_seconds
    engine = make_engine(url, pool_size=settings.api_max_concurrency, max_overflow=5,
                         connect_args={"connect_timeout": timeout})
    pool = ReadPool(url, **sizes, timeout=timeout, connect_timeout=timeout)
    pool.open()
    route = ReadRoute(standby=make_sessionmaker(engine), primary_reader=app.state.reader,
                      standby_reader=Reader(pool), retry_seconds=settings.database_read_retry_seconds)
    return route, [pool.close, engine.dispose]


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # every request admitted (backend.api.limits) can hold a session and end it in a second thread hop
        engine = make_engine(settings.database_url, pool_size=settings.api_max_concurrency, max_overflow=5)
        limiter = anyio.to_thread.current_default_thread_limiter()
        limiter.total_tokens = max(limiter.total_tokens, 2 * settings.api_max_concurrency + 4)
        sizes = {"idle": settings.api_read_pool_idle, "max_size": settings.api_read_pool_max}
        read_pool = ReadPool(settings.database_url, **sizes)
        read_pool.open()
        versions = data_version.Versions(read_pool.conninfo)
        await versions.pool.open()
        app.state.engine = engine
        app.state.sessionmaker = make_sessionmaker(engine)
        app.state.reader = Reader(read_pool, versions)
        replica = _replica(settings, app, sizes) if settings.database_read_url else None
        app.state.read_route = replica[0] if replica else None
        try:
            yield
        finally:
            await versions.pool.close()
            for closing in (replica[1] if replica else ()):
                closing()
            read_pool.close()
            engine.dispose()

    app = FastAPI(title="specwatch API", version="1", description=DESCRIPTION, lifespan=lifespan)
    app.state.settings = settings
    app.state.cache = ResponseCache(entries=settings.api_cache_entries, max_bytes=settings.api_cache_max_bytes,
                                    ttl=settings.api_cache_ttl_seconds)
    errors.install(app)
    routers = [(API_PREFIX, module.router) for module in (
        health, pools, acceptance, latency, annotations, summary, k_advice, fleet, calc, alerts, channels, tokens, rollout,
        gates, report, plan, requests, capacity, replicas, compare)] + [("", metrics.router)]
    # innermost (the last added is the outermost): a body is read under the admission limit and BodyLimit
    app.add_middleware(RefuseNul, body_exempt=RAW_BODIES)
    # outside RefuseNul, inside the admission limit: refuses a caller from its headers before any body is read
    app.add_middleware(AuthBeforeBody, api=app, routers=routers)
    app.add_middleware(Admission, limit=settings.api_max_concurrency, queue=settings.api_max_queue,
                       wait_seconds=settings.api_queue_wait_seconds,
                       retry_after_seconds=settings.api_retry_after_seconds, exempt=(f"{API_PREFIX}/health",))
    app.add_middleware(BodyLimit, default=settings.api_max_body_bytes,
                       limits={f"{API_PREFIX}/requests": settings.requests_max_body_bytes,
                               f"{API_PREFIX}/gate/flagger": GATE_BODY_BYTES})
    app.add_middleware(ReadSourceHeaders)
    app.add_middleware(SecurityHeaders)  # outermost: also on the admission's own 503s
    for prefix, router in routers:
        app.include_router(router, prefix=prefix)
    openapi.install(app, routers, principal=credentials, raw_bodies=RAW_BODIES)
    return app
