"""`specwatch demo`: the whole stack on one machine, as child processes.

Storage: SPECWATCH_DATABASE_URL / SPECWATCH_REDIS_URL when set, else an embedded PostgreSQL and Redis with
their data under <data dir>/postgres and <data dir>/redis (data dir: SPECWATCH_DATA_DIR, default
.specwatch), reused on the next run.

Children (each in its own process group, log in <data dir>/logs/<name>.log): the fleet simulator, a Celery
worker, one beat, the API and the dashboard; with --source prometheus also a Prometheus.

Metrics source (--source):
  scrape      (default; needs nothing but pip) the collector scrapes the simulator's per-pool endpoints
              /pools/<id>/metrics directly, each with its pool labels (SPECWATCH_SCRAPE_TARGETS).
  prometheus  a `prometheus` binary from PATH scrapes the simulator's fleet /metrics (whose series already
              carry traffic_class and spec_mode) and the collector queries it (SPECWATCH_PROMETHEUS_URL).

Ctrl-C / SIGTERM stops every child (SIGTERM to its group, SIGKILL after a timeout), then the embedded
servers. If a child dies, the demo names it, prints its last log lines, stops the rest and exits 1.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import webbrowser
from pathlib import Path

import typer

STOP_TIMEOUT = 10.0


class _Stop(Exception):
    """SIGINT/SIGTERM received."""


class ChildDied(Exception):
    def __init__(self, child: Child):
        super().__init__(child.name)
        self.child = child


class Child:
    def __init__(self, name: str, args: list[str], log_dir: Path, env: dict[str, str], oneshot: bool = False):
        self.name, self.args, self.env, self.oneshot = name, args, env, oneshot
        self.log = log_dir / f"{name}.log"
        self.popen: subprocess.Popen | None = None

    def start(self) -> Child:
        with open(self.log, "ab") as fh:
            fh.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} specwatch demo starts {self.name}\n".encode())
            fh.flush()
            self.popen = subprocess.Popen(self.args, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=self.env, start_new_session=True)
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def killpg(self, sig: int) -> None:
        if self.popen is not None:
            try:
                os.killpg(self.popen.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def stop_children(children: list[Child], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM every group, wait up to timeout, then SIGKILL what is left (leaders and their children)."""
    for c in reversed(children):
        if c.alive():
            c.killpg(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for c in children:
        if c.popen is not None:
            try:
                c.popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                typer.echo(f"  {c.name} did not stop within {timeout:.0f}s: killing it", err=True)
    for c in children:
        c.killpg(signal.SIGKILL)
        if c.popen is not None:
            try:
                c.popen.wait(5)
            except subprocess.TimeoutExpired:
                pass


def _specwatch() -> list[str]:
    exe = Path(sys.executable).with_name("specwatch")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from backend.cli import main; main()"]


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return None


def _check_children(children: list[Child]) -> None:
    """A service that exits is fatal; a one-shot job (the history seed) may finish, but not fail."""
    for c in children:
        if not c.alive() and not (c.oneshot and c.popen is not None and c.popen.returncode == 0):
            raise ChildDied(c)


def wait_http(url: str, children: list[Child], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _status(url) != 200:
        _check_children(children)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer 200 within {timeout:.0f}s")
        time.sleep(0.3)


def scrape_targets(sim_url: str) -> list[dict]:
    """One target per simulated pool, from the running simulator's /scenario: the pool's
    /pools/<id>/metrics endpoint and the labels that identify it (as Prometheus relabeling would add)."""
    with urllib.request.urlopen(f"{sim_url}/scenario", timeout=10) as resp:
        doc = json.load(resp)
    targets = []
    for pool in doc["pools"]:
        labels = {**(pool.get("labels") or {}), "traffic_class": pool["traffic_class"], "spec_mode": pool["spec_mode"]}
        targets.append({"url": f"{sim_url}/pools/{pool['pool_id']}/metrics", "labels": labels})
    return targets


def prometheus_child(data_dir: Path, log_dir: Path, port: int, sim_port: int, env: dict[str, str]) -> Child:
    binary = shutil.which("prometheus")
    if not binary:
        raise typer.BadParameter("--source prometheus needs a `prometheus` binary on PATH "
                                 "(Debian: apt-get install prometheus); or use --source scrape")
    pdir = data_dir / "prometheus"
    pdir.mkdir(parents=True, exist_ok=True)
    config = {
        "global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
        # the fleet endpoint's series already carry traffic_class / spec_mode: keep them
        "scrape_configs": [{"job_name": "specwatch-sim", "honor_labels": True,
                            "static_configs": [{"targets": [f"127.0.0.1:{sim_port}"]}]}],
    }
    (pdir / "prometheus.yml").write_text(json.dumps(config, indent=2))
    return Child("prometheus", [binary, f"--config.file={pdir / 'prometheus.yml'}",
                                f"--storage.tsdb.path={pdir / 'data'}",
                                f"--web.listen-address=127.0.0.1:{port}"], log_dir, env)


def _raise_stop(signum, frame):
    raise _Stop()


def run_demo(*, open_browser: bool, scenario: str, source: str, api_port: int, dashboard_port: int,
             sim_port: int, prometheus_port: int, startup_timeout: float, history_hours: float = 3.0,
             per_request: bool = False) -> int:
    from backend.cli.serve import migrate
    from backend.embedded import (
        start_embedded_postgres,
        start_embedded_redis,
        stop_embedded_postgres,
        stop_embedded_redis,
    )

    if source not in ("scrape", "prometheus"):
        raise typer.BadParameter("--source must be scrape or prometheus")
    ports = {"--api-port": api_port, "--dashboard-port": dashboard_port, "--sim-port": sim_port}
    if source == "prometheus":
        ports["--prometheus-port"] = prometheus_port
    busy = [f"{flag} {port}" for flag, port in ports.items() if _port_in_use(port)]
    if busy:
        typer.echo(f"port already in use: {', '.join(busy)} (pick another with the option named)", err=True)
        return 2

    data_dir = Path(os.environ.get("SPECWATCH_DATA_DIR", ".specwatch")).resolve()
    log_dir = data_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    children: list[Child] = []
    embedded: list[tuple] = []
    old_handlers = {s: signal.signal(s, _raise_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    code = 0
    try:
        db_url = os.environ.get("SPECWATCH_DATABASE_URL")
        if db_url:
            typer.echo("database:   SPECWATCH_DATABASE_URL")
        else:
            typer.echo(f"database:   embedded PostgreSQL in {data_dir / 'postgres'}")
            embedded.append((stop_embedded_postgres, data_dir / "postgres"))
            db_url = start_embedded_postgres(data_dir / "postgres")
        redis_url = os.environ.get("SPECWATCH_REDIS_URL")
        if redis_url:
            typer.echo("broker:     SPECWATCH_REDIS_URL")
        else:
            typer.echo(f"broker:     embedded Redis in {data_dir / 'redis'}")
            embedded.append((stop_embedded_redis, data_dir / "redis"))
            redis_url = start_embedded_redis(data_dir / "redis")
        typer.echo("migrating:  alembic upgrade head")
        migrate(db_url)

        sim_url = f"http://127.0.0.1:{sim_port}"
        api_url = f"http://127.0.0.1:{api_port}"
        dash_url = f"http://127.0.0.1:{dashboard_port}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "SPECWATCH_DATABASE_URL": db_url, "SPECWATCH_REDIS_URL": redis_url,
               "SPECWATCH_DATA_DIR": str(data_dir), "SPECWATCH_SOURCE": source,
               "SPECWATCH_API_HOST": "127.0.0.1", "SPECWATCH_API_PORT": str(api_port),
               "SPECWATCH_DASHBOARD_HOST": "127.0.0.1", "SPECWATCH_DASHBOARD_PORT": str(dashboard_port),
               "SPECWATCH_API_BASE_URL": api_url}
        sw = _specwatch()
        sim_extra: list[str] = []
        if per_request:  # one model, two classes, one pool: its per-request records go to the API
            from backend.cli import demo_per_request

            scenario = demo_per_request.SCENARIO
            env["SPECWATCH_INGEST_TOKEN"] = demo_per_request.ingest_token(db_url)
            sim_extra = demo_per_request.sim_args(api_url)
        if history_hours > 0:  # hours of simulated history, so the dashboard has data at once (first run only)
            children.append(Child("seed", [*sw, "seed", "--scenario", scenario, "--hours", str(history_hours),
                                           "--if-empty", "--json"], log_dir, env, oneshot=True).start())
        children.append(Child("sim", [*sw, "sim", "--port", str(sim_port), "--scenario", scenario, *sim_extra],
                              log_dir, env).start())
        wait_http(f"{sim_url}/metrics", children, startup_timeout)
        if source == "scrape":
            env["SPECWATCH_SCRAPE_TARGETS"] = json.dumps(scrape_targets(sim_url))
        else:
            env["SPECWATCH_PROMETHEUS_URL"] = f"http://127.0.0.1:{prometheus_port}"
            children.append(prometheus_child(data_dir, log_dir, prometheus_port, sim_port, env).start())
            wait_http(f"{env['SPECWATCH_PROMETHEUS_URL']}/-/ready", children, startup_timeout)
        for name, args in (("worker", ["worker"]), ("beat", ["beat"]),
                           ("api", ["api", "--port", str(api_port)]),
                           ("dashboard", ["dashboard", "--port", str(dashboard_port)])):
            children.append(Child(name, [*sw, *args], log_dir, env).start())
        wait_http(f"{api_url}/api/v1/health", children, startup_timeout)
        wait_http(f"{dash_url}/", children, startup_timeout)

        typer.echo("specwatch demo is running (Ctrl-C stops everything)")
        typer.echo(f"  dashboard   {dash_url}/")
        typer.echo(f"  api         {api_url}/api/v1/health")
        typer.echo(f"  simulator   {sim_url}/metrics")
        if source == "prometheus":
            typer.echo(f"  prometheus  {env['SPECWATCH_PROMETHEUS_URL']}/")
        typer.echo(f"  logs        {log_dir}")
        typer.echo("  pids        " + " ".join(f"{c.name}={c.popen.pid}" for c in children if c.popen))
        sys.stdout.flush()
        if open_browser:
            webbrowser.open(f"{dash_url}/")
        while True:
            _check_children(children)
            time.sleep(0.5)
    except _Stop:
        typer.echo("\nstopping ...")
    except ChildDied as e:
        c = e.child
        typer.echo(f"\n{c.name} exited with code {c.popen.returncode if c.popen else '?'}; "
                   f"last lines of {c.log}:\n{c.tail()}\n", err=True)
        code = 1
    except TimeoutError as e:
        typer.echo(f"\n{e}; last log lines:", err=True)
        for c in children:
            typer.echo(f"--- {c.name} ({c.log})\n{c.tail(10)}", err=True)
        code = 1
    finally:
        for s in old_handlers:
            signal.signal(s, signal.SIG_IGN)  # cleanup is bounded; do not interrupt it half-way
        stop_children(children)
        for stop, path in reversed(embedded):
            try:
                stop(path)
            except Exception as exc:  # noqa: BLE001  (report and go on stopping the rest)
                typer.echo(f"could not stop embedded server in {path}: {exc}", err=True)
        for s, h in old_handlers.items():
            signal.signal(s, h)
    typer.echo("stopped" if code == 0 else "stopped after a failure")
    return code


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo_cmd(
        no_browser: bool = typer.Option(False, "--no-browser", help="do not open the dashboard in a browser"),
        scenario: str = typer.Option("steady", help="simulator scenario (built-in name or YAML path)"),
        source: str = typer.Option("scrape", help="scrape (the simulator directly) | prometheus (needs the binary)"),
        api_port: int = typer.Option(8000),
        dashboard_port: int = typer.Option(8050),
        sim_port: int = typer.Option(9400),
        prometheus_port: int = typer.Option(9090),
        startup_timeout: float = typer.Option(120.0, help="seconds to wait for each service to answer"),
        history_hours: float = typer.Option(3.0, min=0, help="simulated history seeded into an empty database"),
        per_request: bool = typer.Option(False, "--per-request", help="scenario `per-request`: one more model "
                                         "whose one pool serves two classes, its per-request records posted to "
                                         "the API (docs/per-request.md)"),
    ) -> None:
        """Run simulator, worker, beat, API and dashboard locally (embedded Postgres/Redis unless configured)."""
        code = run_demo(open_browser=not no_browser, scenario=scenario, source=source, api_port=api_port,
                        dashboard_port=dashboard_port, sim_port=sim_port, prometheus_port=prometheus_port,
                        startup_timeout=startup_timeout, history_hours=history_hours, per_request=per_request)
        raise typer.Exit(code)
