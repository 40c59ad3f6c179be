"""The dashboard's HTTP server: gunicorn (one process, gthread workers) in production, Flask's development
server only with --debug (Dash's dev tools and reloader) or where gunicorn does not run (Windows).

One process on purpose: the session-signing key is random per process when no SPECWATCH_SECRET_KEY is
set, and Dash keeps nothing else between requests, so threads serve concurrency (the dashboard's own work
per request is small; it waits on the API). gunicorn's control socket is off (it would write under $HOME).
"""

from __future__ import annotations

from flask import Flask

DEFAULT_THREADS = 16
TIMEOUT_SECONDS = 120  # a worker silent this long is restarted (the API's longest reads are well under it)


def options(host: str, port: int, threads: int) -> dict[str, object]:
    """gunicorn settings (the names of its config file); unknown ones are skipped on older gunicorns."""
    return {"bind": f"{host}:{port}", "workers": 1, "worker_class": "gthread", "threads": threads,
            "timeout": TIMEOUT_SECONDS, "graceful_timeout": 10, "keepalive": 5, "accesslog": None,
            "errorlog": "-", "loglevel": "info", "proc_name": "specwatch-dashboard",
            "control_socket_disable": True}


def run(server: Flask, *, host: str, port: int, threads: int = DEFAULT_THREADS) -> None:
    """Serve `server` (the Dash app's Flask) with gunicorn until it is stopped (SIGTERM/SIGINT)."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1 (got {threads})")
    from gunicorn.app.base import BaseApplication

    class Application(BaseApplication):
        def load_config(self) -> None:
            for key, value in options(host, port, threads).items():
                if key in self.cfg.settings:
                    self.cfg.set(key, value)

        def load(self) -> Flask:
            return server

    Application().run()


def available() -> bool:
    try:
        import gunicorn.app.base  # noqa: F401  (POSIX only: fcntl)
    except ImportError:
        return False
    return True
