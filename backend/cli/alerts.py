"""`specwatch alerts check FILE`, `specwatch alerts evaluate --once [--deliver]`, `specwatch tokens create`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

alerts_app = typer.Typer(help="Alert rules: validate, evaluate once.", no_args_is_help=True)
tokens_app = typer.Typer(help="API tokens for the alerting endpoints.", no_args_is_help=True)


def _factory():
    from backend.config import get_settings
    from backend.db.session import make_engine, make_sessionmaker

    s = get_settings()
    return s, make_sessionmaker(make_engine(s.database_url))


@alerts_app.command("check")
def check(file: Annotated[Path, typer.Argument(help="rules file (YAML), e.g. alerts.example.yaml")]) -> None:
    """Validate a rules file; print every error with the field it concerns; exit 1 when invalid."""
    from backend.domain.alert_config import ConfigError, parse_config
    from backend.services.alerts import load_file

    try:
        cfg = parse_config(load_file(file))
    except ConfigError as exc:
        for line in exc.errors:
            typer.echo(f"error: {line}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"{file}: ok, version {cfg.version}, {len(cfg.rules)} rules: "
               + ", ".join(f"{r.name} ({r.kind})" for r in cfg.rules))


@alerts_app.command("evaluate")
def evaluate(
    once: bool = typer.Option(False, "--once", help="evaluate once and exit"),
    deliver: bool = typer.Option(False, "--deliver", help="then send the due outbox messages"),
) -> None:
    """Evaluate every rule now (the schedule is `specwatch worker` + `specwatch beat`)."""
    if not once:
        raise typer.BadParameter("the scheduled evaluation runs in the worker; use --once for a single run")
    from backend.db.session import session_scope
    from backend.services import alerts, dispatch

    s, factory = _factory()
    with session_scope(factory) as session:
        result = alerts.evaluate(session, settings=s, now=datetime.now(UTC))
    if deliver:
        result["delivery"] = dispatch.deliver_due(factory, s)
    typer.echo(json.dumps(result, default=str))


@tokens_app.command("create")
def create(
    role: str = typer.Option(..., "--role", help="viewer | operator | admin | ingest (posts per-request records "
                                                 "only) | gate (reads the progressive-delivery gate only)"),
    name: str = typer.Option("cli", "--name", help="who or what uses it"),
    expires_days: float = typer.Option(0, "--expires-days", min=0, max=3650,
                                       help="the token stops working after this many days (0: never)"),
) -> None:
    """Create an API token and print it once (only its hash is stored)."""
    from backend.api.auth import ROLES, create_token
    from backend.db.session import session_scope

    if role not in ROLES:
        raise typer.BadParameter(f"--role must be one of {', '.join(ROLES)}")
    _, factory = _factory()
    with session_scope(factory) as session:
        now = datetime.now(UTC)
        expires = now + timedelta(days=expires_days) if expires_days else None
        row, token = create_token(session, name=name, role=role, by="cli", now=now, expires_at=expires)
    typer.echo(token)
    typer.echo(f"token {row.id} ({row.prefix}…, role {role}); store it now, it is not shown again", err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(alerts_app, name="alerts")
    app.add_typer(tokens_app, name="tokens")
