"""Security headers on every API answer: no framing, no MIME sniffing, a Content-Security-Policy that lets
a JSON answer load nothing (the interactive docs at /docs and /redoc get what they load from their CDN),
and `Cache-Control: no-store` where a credential may be in the answer (tokens, channels, whoami)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

API_CSP = b"default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
DOCS_CSP = (b"default-src 'none'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
            b"style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; img-src 'self' data: https:; "
            b"connect-src 'self'; worker-src blob:; frame-ancestors 'none'; base-uri 'none'")
DOCS = ("/docs", "/redoc")
NO_STORE = ("/api/v1/tokens", "/api/v1/channels", "/api/v1/whoami")


class ResponseHeaders:
    """ASGI middleware base: `headers(scope, headers)` gives each http response's start headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def headers(self, scope: Scope, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        raise NotImplementedError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})  # the request's note, shared with the app (read_headers)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": self.headers(scope, list(message.get("headers", [])))}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class SecurityHeaders(ResponseHeaders):
    """The headers above on each response (a header the app set wins)."""

    def headers(self, scope: Scope, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        path: str = scope["path"]
        extra = [(b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff"),
                 (b"referrer-policy", b"no-referrer"),
                 (b"content-security-policy", DOCS_CSP if path.startswith(DOCS) else API_CSP)]
        if path.startswith(NO_STORE):
            extra.append((b"cache-control", b"no-store"))
        present = {k.lower() for k, _ in headers}
        return headers + [(k, v) for k, v in extra if k not in present]
