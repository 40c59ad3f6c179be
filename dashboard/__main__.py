"""`python -m dashboard --host H --port P --api URL` (what `specwatch dashboard` execs)."""

from __future__ import annotations

import argparse

from dashboard.app import serve
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
    a = ap.parse_args(argv)
    settings = from_env().with_(auth=a.auth, secret_key=a.secret)
    serve(host=a.host, port=a.port, api=a.api, debug=a.debug, settings=settings)


if __name__ == "__main__":
    main()
