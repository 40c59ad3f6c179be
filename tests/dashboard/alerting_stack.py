"""Alerts on seeded data for the browser tests and the screenshots: the rules file evaluated a few times
(so alerts go pending, then firing, with their audit trail), API tokens made by `specwatch tokens create`,
the dashboard started with authentication, and a login in the browser."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.dashboard.browser import ROOT, run_dashboard, start_api, wait_idle
from tests.support.deadline import deadline_ms
from tests.support.procs import Proc
from tests.support.stack import env_for

RULES = ROOT / "alerts.example.yaml"


def fire_alerts(db_url: str, rules: Path = RULES, now: datetime | None = None) -> dict:
    """Evaluate the rules at now-150 s, -90 s, -30 s and now: a condition that holds goes pending, then
    firing after its `for` (2 min in the example rules). Returns the last cycle's counts."""
    from backend.config import Settings
    from backend.db.session import make_engine, make_sessionmaker, session_scope
    from backend.services import alerts

    now = now or datetime.now(UTC)
    settings = Settings(_env_file=None, database_url=db_url, alert_rules_file=rules)
    engine = make_engine(db_url)
    try:
        factory = make_sessionmaker(engine)
        result: dict = {}
        for back in (150, 90, 30, 0):
            with session_scope(factory) as session:
                result = alerts.evaluate(session, settings=settings, now=now - timedelta(seconds=back))
    finally:
        engine.dispose()
    return result


def make_token(db_url: str, role: str, name: str) -> str:
    """`specwatch tokens create --role ROLE --name NAME` against db_url; the plaintext token it prints."""
    out = subprocess.run([sys.executable, "-m", "backend.cli", "tokens", "create", "--role", role, "--name", name],
                         env=env_for({"database_url": db_url}), cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.strip().splitlines()[-1]


def start_dashboard_auth(api_url: str, log_dir: Path, mode: str = "token", secret: str = "s" * 40,
                         port: int | None = None) -> tuple[Proc, str]:
    """`python -m dashboard --auth MODE` (the secret from the environment, as in production)."""
    return run_dashboard(api_url, log_dir, env_for({"dashboard_auth": mode, "secret_key": secret}), port, "/login")


@contextmanager
def auth_stack(db_url: str, log_dir: Path) -> Iterator[tuple[str, str]]:
    """The API (token auth, its default) and the dashboard with token auth on `db_url`: (api, dashboard) URLs."""
    api, api_url = start_api(db_url, log_dir)
    try:
        dash, dash_url = start_dashboard_auth(api_url, log_dir)
        try:
            yield api_url, dash_url
        finally:
            dash.stop()
    finally:
        api.stop()


def login(page, dash_url: str, token: str, path: str = "/") -> None:
    """Open `path` (which redirects to /login), log in with `token`, land back on `path`."""
    page.context.clear_cookies()
    page.goto(dash_url + path)
    page.wait_for_url("**/login?next=**", timeout=deadline_ms(60))
    page.fill("#sw-token", token)
    page.click("#sw-login-submit")
    page.wait_for_selector("#nav-user-name", timeout=deadline_ms(120))
    wait_idle(page)
