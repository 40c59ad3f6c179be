"""Security headers on every dashboard answer, and Markdown that cannot be injected into.

The Content-Security-Policy allows scripts from the dashboard's own origin plus, by hash, exactly the
inline scripts Dash writes into its pages (its renderer start-up and the clientside callbacks;
`dash.Dash.csp_hashes`), so an injected inline script does not run. Styles may be inline (Plotly and the
grid set them at run time). Pages cannot be framed (clickjacking) and responses are not MIME-sniffed."""

from __future__ import annotations

import re

import dash
import flask

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~&])")


def md_text(text: str) -> str:
    """`text` as literal Markdown text: every character Markdown gives a meaning is escaped, so a name like
    ``evil](https://x) [x`` stays text inside a link instead of becoming a link of its own."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def policy(app: dash.Dash) -> str:
    scripts = " ".join(["'self'", *app.csp_hashes()])
    return "; ".join([
        "default-src 'self'", f"script-src {scripts}", "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:", "font-src 'self' data:", "connect-src 'self'", "object-src 'none'",
        "base-uri 'self'", "form-action 'self'", "frame-ancestors 'none'"])


def install(app: dash.Dash) -> None:
    """Add the headers to every response of the app's Flask server (the policy is computed at the first
    response, once Dash has collected its inline scripts)."""
    cached: list[str] = []

    def add_headers(response: flask.Response) -> flask.Response:
        if not cached:
            cached.append(policy(app))
        response.headers.setdefault("Content-Security-Policy", cached[0])
        response.headers.setdefault("X-Frame-Options", "DENY")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    app.server.after_request(add_headers)
