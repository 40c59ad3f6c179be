"""`python -m dashboard --host H --port P --api URL` (what `specwatch dashboard` execs)."""

from __future__ import annotations

import argparse

from dashboard.app import serve


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m dashboard", description="specwatch dashboard (Dash)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8050)
    ap.add_argument("--api", default="http://127.0.0.1:8000", help="base URL of the specwatch API")
    ap.add_argument("--debug", action="store_true", help="Dash dev tools (never in production)")
    a = ap.parse_args(argv)
    serve(host=a.host, port=a.port, api=a.api, debug=a.debug)


if __name__ == "__main__":
    main()
