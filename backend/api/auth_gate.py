"""Authentication before the body: a request that carries a body (POST, PUT, PATCH, DELETE) to an endpoint
that needs a caller is checked from its headers alone, and refused (401/403) before one byte of its body is
read. FastAPI reads a body before it runs an endpoint's dependencies, so without this an anonymous client
could make the API read (and hold) a body as large as the body limit before being told no.

The check is the endpoint's own: its `backend.api.auth.Policy` objects, and the caller resolved by the
`credentials` dependency through FastAPI's dependency solver (so dependency overrides, the session and the
clock are the endpoint's). The caller found is kept in the request's state: the endpoint does not look the
token up a second time."""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, FastAPI, HTTPException
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_dependant, solve_dependencies
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.api.auth import PRINCIPAL_KEY, Policy, Principal, credentials, policies
from backend.api.deps import get_settings
from backend.config import Settings

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def _caller(principal: Annotated[Principal | None, Depends(credentials)],
                  settings: Annotated[Settings, Depends(get_settings)]) -> tuple[Principal | None, Settings]:
    return principal, settings


_CALLER: Dependant = get_dependant(path="", call=_caller)


async def _no_body() -> Message:  # the check never reads the body; a dependency that tried would get none
    return {"type": "http.request", "body": b"", "more_body": False}


class AuthBeforeBody:
    """ASGI middleware (inside the admission limit, so a flood of refusals is bounded like any request).
    `routers`: the (prefix, router) pairs the app includes; their routes' policies are read once."""

    def __init__(self, app: ASGIApp, *, api: FastAPI, routers: Sequence[tuple[str, APIRouter]]) -> None:
        self.app, self.api = app, api
        self._routes: list[tuple[re.Pattern, frozenset[str], list[Policy]]] = []
        for prefix, router in routers:
            for route in router.routes:
                if isinstance(route, APIRoute) and (rules := policies(route.dependant)):
                    regex = compile_path(prefix + route.path)[0]
                    self._routes.append((regex, frozenset(route.methods or ()), rules))

    def _route_policies(self, scope: Scope) -> list[Policy]:
        path, method = scope["path"], scope["method"]
        for regex, methods, rules in self._routes:
            if method in methods and regex.match(path):
                return rules
        return []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        rules = self._route_policies(scope)
        if rules:
            try:
                principal = await self._check(scope, rules)
            except HTTPException as exc:
                await _refuse(send, exc)
                return
            except Exception:  # noqa: BLE001 - e.g. the database is down: the endpoint's own dependency checks
                # again and answers as the app does (503 with Retry-After), never a bare 500 from here
                await self.app(scope, receive, send)
                return
            scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        await self.app(scope, receive, send)

    async def _check(self, scope: Scope, rules: list[Policy]) -> Principal | None:
        async with AsyncExitStack() as stack:
            own = {**scope, "fastapi_inner_astack": stack, "fastapi_function_astack": stack}
            solved = await solve_dependencies(request=Request(own, receive=_no_body), dependant=_CALLER,
                                              dependency_overrides_provider=self.api, async_exit_stack=stack,
                                              embed_body_fields=False)
            principal, settings = await _caller(**solved.values)
            for rule in rules:
                rule.check(principal, settings)
            return principal


async def _refuse(send: Send, exc: HTTPException) -> None:
    body = orjson.dumps({"detail": exc.detail})
    headers: list[tuple[bytes, bytes]] = [(b"content-type", b"application/json"),
                                          (b"content-length", str(len(body)).encode()),
                                          (b"connection", b"close")]  # the unread body ends the connection
    headers += [(k.lower().encode(), v.encode()) for k, v in (exc.headers or {}).items()]
    await send({"type": "http.response.start", "status": exc.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})

