"""A running dashboard stack for browser tests, screenshots and the benchmark: the real API and the real
dashboard as subprocesses, and headless Debian Chromium driven by Playwright (never `playwright install`)."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.auth import make_token
from tests.support.deadline import deadline_ms
from tests.support.procs import Proc, free_port, wait_for_http
from tests.support.stack import env_for

ROOT = Path(__file__).resolve().parents[2]
# API URL -> a viewer token in that API's database: reads need one, and the dashboard (no login) carries it
SERVICE_TOKENS: dict[str, str] = {}
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@dataclass
class Stack:
    api: Proc
    dashboard: Proc
    api_url: str
    dash_url: str

    @property
    def headers(self) -> dict[str, str]:
        """The dashboard's viewer token, for a test's own API reads."""
        return {"Authorization": f"Bearer {SERVICE_TOKENS[self.api_url]}"}


def start_api(db_url: str, log_dir: Path, port: int | None = None,
              settings: dict[str, object] | None = None) -> tuple[Proc, str]:
    """The API on `db_url` (with `settings`: more SPECWATCH_* values, e.g. {"fleet_snapshot_max_age_seconds": 86400})."""
    port = port or free_port()
    env = env_for({"database_url": db_url, **(settings or {})})
    proc = Proc("api", [sys.executable, "-m", "backend.cli", "api", "--host", "127.0.0.1", "--port", str(port)],
                log_dir / "api.log", env=env, cwd=ROOT).start()
    url = f"http://127.0.0.1:{port}"
    wait_for_http(f"{url}/api/v1/health", proc=proc)
    SERVICE_TOKENS[url] = make_token(db_url, "viewer", name="test dashboard")  # this database's (a port is reused)
    return proc, url


def start_dashboard(api_url: str, log_dir: Path, port: int | None = None) -> tuple[Proc, str]:
    """The dashboard without a login, calling the API with a viewer token of the API's database (the one
    start_api made), as `SPECWATCH_DASHBOARD_API_TOKEN`."""
    env = env_for({})
    if api_url in SERVICE_TOKENS:
        env["SPECWATCH_DASHBOARD_API_TOKEN"] = SERVICE_TOKENS[api_url]
    return run_dashboard(api_url, log_dir, env, port)


def run_dashboard(api_url: str, log_dir: Path, env: dict[str, str], port: int | None = None,
                  ready: str = "/") -> tuple[Proc, str]:
    """`python -m dashboard` on `api_url` with `env`, once `ready` answers: the process and its URL."""
    port = port or free_port()
    proc = Proc("dashboard", [sys.executable, "-m", "dashboard", "--host", "127.0.0.1", "--port", str(port),
                              "--api", api_url], log_dir / "dashboard.log", env=env, cwd=ROOT).start()
    url = f"http://127.0.0.1:{port}"
    wait_for_http(f"{url}{ready}", proc=proc)
    return proc, url


@contextmanager
def stack(db_url: str, log_dir: Path, api_settings: dict[str, object] | None = None) -> Iterator[Stack]:
    api, api_url = start_api(db_url, log_dir, settings=api_settings)
    try:
        dash, dash_url = start_dashboard(api_url, log_dir)
        try:
            yield Stack(api, dash, api_url, dash_url)
        finally:
            dash.stop()
    finally:
        api.stop()


@contextmanager
def browser_context(executable: str = CHROMIUM, width: int = 1440, height: int = 900):
    """A Playwright persistent context on a fresh profile directory (removed afterwards)."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="specwatch-chromium-") as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=executable, args=CHROMIUM_ARGS,
                                                   headless=True, viewport={"width": width, "height": height})
        try:
            yield ctx
        finally:
            ctx.close()


IDLE = """() => !document.querySelector('[data-dash-is-loading="true"]')
    && !(window.store && window.store.getState().isLoading)"""


def wait_idle(page, timeout: float | None = None) -> None:
    """Wait until Dash has no callback requested or in flight: the renderer's store says it is not loading
    (it counts callbacks from the moment a new page layout asks for them, where network silence can come
    too early on a busy machine) and no component is marked loading; `timeout` (ms) only catches a hang."""
    timeout = deadline_ms(120) if timeout is None else timeout
    page.wait_for_load_state("networkidle", timeout=timeout)
    page.wait_for_function(IDLE, timeout=timeout)
    page.wait_for_timeout(100)
    page.wait_for_function(IDLE, timeout=timeout)
