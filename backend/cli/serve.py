"""Long-running processes: migrate, api, dashboard, worker, beat."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from backend.schema_version import alembic_config


def migrate(url: str | None = None) -> None:
    from alembic import command

    command.upgrade(alembic_config(url), "head")


def check_rules_at_start() -> None:
    """Workers and beat refuse to start on an invalid alert rules file, naming every bad field."""
    from backend.config import get_settings
    from backend.domain.alert_config import ConfigError
    from backend.services.alerts import load_file

    path = Path(get_settings().alert_rules_file)
    if not path.exists():
        typer.echo(f"note: no alert rules file at {path}; rules stored through the API are used", err=True)
        return
    try:
        load_file(path)
    except ConfigError as exc:
        for line in exc.errors:
            typer.echo(f"error: {line}", err=True)
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    @app.command("migrate")
    def migrate_cmd() -> None:
        """Apply the database migrations (alembic upgrade head)."""
        migrate()
        typer.echo("database at head")

    @app.command("api")
    def api_cmd(host: str = typer.Option(None), port: int = typer.Option(None)) -> None:
        """Serve the HTTP API (FastAPI under /api/v1) in SPECWATCH_API_WORKERS processes."""
        import uvicorn

        from backend.config import get_settings

        s = get_settings()
        uvicorn.run("backend.api.app:create_app", factory=True, host=host or s.api_host,
                    port=port or s.api_port, log_level="info", timeout_keep_alive=s.api_keepalive_seconds,
                    access_log=s.api_access_log, timeout_graceful_shutdown=s.api_shutdown_timeout_seconds,
                    proxy_headers=False,  # the client address is the TCP peer (trusted-header allowlist)
                    workers=s.api_workers if s.api_workers > 1 else None)

    @app.command("dashboard")
    def dashboard_cmd(host: str = typer.Option(None), port: int = typer.Option(None)) -> None:
        """Serve the Dash dashboard (a separate process; it talks to the API over HTTP only)."""
        from backend.config import get_settings

        s = get_settings()
        os.execvp(sys.executable, [sys.executable, "-m", "dashboard", "--host", host or s.dashboard_host,
                                   "--port", str(port or s.dashboard_port), "--api", s.api_base_url])

    @app.command("worker")
    def worker_cmd(concurrency: int = typer.Option(1, min=1, help="processes per worker (each runs one task "
                                                   "at a time)"),
                   queues: str = typer.Option("", help="comma-separated groups (collect, compute, deliver, "
                                              "reports) or queues for one worker process; default: one "
                                              "supervised process per group (docs/operations.md)"),
                   stop_timeout: float = typer.Option(30.0, min=0, help="seconds a running task gets to "
                                                      "finish after SIGTERM"),
                   name: str = typer.Option("", help="Celery node name with --queues (default celery@HOST; "
                                            "without --queues each group's is GROUP@HOST)")) -> None:
        """Run the Celery workers: one process per queue group (collect, compute, deliver, reports), so
        delivery and reports never hold up collection; --queues GROUP runs one group."""
        from backend.queues import GROUPS, resolve_queues

        try:
            names = resolve_queues(queues) if queues else []
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--queues") from None
        check_rules_at_start()
        if names:
            os.execvp(sys.executable, [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
                                       "--loglevel=INFO", f"--concurrency={concurrency}", "-Q", ",".join(names),
                                       *(["-n", name] if name else [])])
            return  # (exec does not return)
        from backend.cli.supervise import Child, supervise, worker_args

        children = [Child(group, worker_args(group, qs, concurrency)) for group, qs in GROUPS.items()]
        raise typer.Exit(supervise(children, stop_timeout=stop_timeout))

    @app.command("beat")
    def beat_cmd(schedule_file: str = typer.Option(None, help="celerybeat schedule file")) -> None:
        """Run the Celery beat scheduler (run exactly one)."""
        check_rules_at_start()
        from backend.config import get_settings

        path = schedule_file or str(get_settings().data_dir / "celerybeat-schedule")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        os.execvp(sys.executable, [sys.executable, "-m", "celery", "-A", "workers.celery_app", "beat",
                                   "--loglevel=INFO", "-s", path])
