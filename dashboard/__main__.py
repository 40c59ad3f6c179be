"""`python -m dashboard --host H --port P --api URL` (what `specwatch dashboard` execs)."""

from __future__ import annotations

import argparse
import os

from dashboard.app import serve
from dashboard.server import DEFAULT_THREADS
from dashboard.settings import AUTH_MODES, from_env


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m dashboard", description="specwatch dashboard (Dash)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8050)
    ap.add_argument("--api", default="http://127.0.0.1:8000", help="base URL of the specwatch API")
    ap.add_argument("--debug", action="store_true", help="Dash dev tools (never in production)")
    ap.add_argument("--auth", choices=AUTH_MODES, default=None,
                    help="none (default) | token (login page) | trusted-header; env SPECWATCH_DASHBOARD_AUTH")
    ap.add_argument("--secret", default=None, help="session signing key; env SPECWATCH_SECRET_KEY")
    ap.add_argument("--threads", type=int, default=None,
                    help=f"gunicorn threads (default {DEFAULT_THREADS}); env SPECWATCH_DASHBOARD_THREADS")
    a = ap.parse_args(argv)
    settings = from_env().with_(auth=a.auth, secret_key=a.secret)
    threads = a.threads
    if threads is None:
        raw = os.environ.get("SPECWATCH_DASHBOARD_THREADS") or str(DEFAULT_THREADS)
        if not raw.strip().isdigit():
            ap.error(f"SPECWATCH_DASHBOARD_THREADS must be a whole number (got {raw!r})")
        threads = int(raw)
    if threads < 1:
        ap.error(f"--threads must be >= 1 (got {threads})")
    serve(host=a.host, port=a.port, api=a.api, debug=a.debug, settings=settings, threads=threads)


if __name__ == "__main__":
    main()
