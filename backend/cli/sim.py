"""`specwatch sim`: serve a simulated vLLM fleet's /metrics (see backend/sim); `specwatch slack-receiver`: a
local Slack-compatible channel whose page shows what it received."""

from __future__ import annotations

import time

import typer


def register(app: typer.Typer) -> None:
    @app.command("sim")
    def sim_cmd(
        scenario: str = typer.Option(None, "--scenario", help="a scenario YAML file or a built-in name"),
        port: int = typer.Option(9400, "--port", help="port to listen on (0 = any free port)"),
        host: str = typer.Option("127.0.0.1", "--host"),
        seed: int = typer.Option(0, "--seed", help="random seed; same seed + scenario => same values"),
        tick: float = typer.Option(None, "--tick", help="simulated seconds per tick (default: the scenario's)"),
        time_scale: float = typer.Option(1.0, "--time-scale", help="simulated seconds per wall-clock second"),
        history: float = typer.Option(None, "--history-seconds", help="how far back /truth?at= answers"),
        start: float = typer.Option(None, "--start", help="unix time the simulation starts at, counters at 0 "
                                                           "(default: now; at most a day back)"),
        list_scenarios: bool = typer.Option(False, "--list-scenarios", help="list the built-in scenarios"),
        post_requests: str = typer.Option(None, "--post-requests", help="POST the per-request records of pools "
                                          "with `per_request` to this specwatch URL (…/api/v1/requests); the "
                                          "ingest token is read from SPECWATCH_INGEST_TOKEN"),
    ) -> None:
        """Serve a simulated vLLM fleet: /metrics, /pools/<id>/metrics, /truth?at=, /scenario, /healthz."""
        from backend.sim.scenario import ScenarioError, builtin_names, load_scenario
        from backend.sim.server import Simulator, serve

        if list_scenarios:
            for name in builtin_names():
                sc = load_scenario(name)
                typer.echo(f"{name:14s} {' '.join(sc.description.split())}")
            return
        if not scenario:
            typer.echo("error: --scenario FILE|NAME is required (see --list-scenarios)", err=True)
            raise typer.Exit(2)
        if tick is not None and not 0 < tick <= 60:
            typer.echo(f"error: --tick: must be between 0 and 60 seconds, got {tick}", err=True)
            raise typer.Exit(2)
        if time_scale <= 0:
            typer.echo(f"error: --time-scale: must be > 0, got {time_scale}", err=True)
            raise typer.Exit(2)
        if start is not None and not time.time() - 86400 <= start <= time.time() + 1:
            typer.echo(f"error: --start: must be a unix time within the last day, got {start}", err=True)
            raise typer.Exit(2)
        try:
            sim = Simulator(load_scenario(scenario), seed=seed, tick=tick, time_scale=time_scale,
                            history_seconds=history, start=start)
        except ScenarioError as exc:
            typer.echo(f"error: invalid scenario: {exc}", err=True)
            raise typer.Exit(2) from None
        try:
            handle = serve(sim, host=host, port=port)
        except OSError as exc:
            typer.echo(f"error: cannot listen on {host}:{port}: {exc}", err=True)
            raise typer.Exit(2) from None
        poster = None
        if post_requests:
            import os

            from backend.sim.post import RequestPoster

            token = os.environ.get("SPECWATCH_INGEST_TOKEN", "")
            if not token:
                handle.stop()
                typer.echo("error: --post-requests needs an ingest token in SPECWATCH_INGEST_TOKEN", err=True)
                raise typer.Exit(2)
            poster = RequestPoster(sim, post_requests, token).start()
        pools = ", ".join(p.spec.id for p in sim.fleet.pools)
        typer.echo(f"specwatch sim: scenario {sim.scenario.name!r} seed {seed} tick {sim.tick:g}s "
                   f"on {handle.url}/metrics (pools: {pools})")

        def stop() -> None:
            if poster:
                poster.stop()
            handle.stop()
        _serve_until_interrupted(stop)

    @app.command("slack-receiver")
    def slack_receiver_cmd(
        port: int = typer.Option(9401, "--port", help="port to listen on (0 = any free port)"),
        host: str = typer.Option("127.0.0.1", "--host"),
        keep: int = typer.Option(1000, "--keep", min=1, help="messages kept (the oldest are dropped)"),
    ) -> None:
        """A local Slack-compatible incoming webhook: POSTs are answered as Slack would; GET / shows them."""
        from backend.sim.slack import SlackReceiver

        try:
            receiver = SlackReceiver(host, port, keep=keep).start()
        except OSError as exc:
            typer.echo(f"error: cannot listen on {host}:{port}: {exc}", err=True)
            raise typer.Exit(2) from None
        typer.echo(f"specwatch slack-receiver: webhook {receiver.webhook_url}  page {receiver.url}/")
        _serve_until_interrupted(receiver.stop)


def _serve_until_interrupted(stop) -> None:
    """Serve (in the server's threads) until Ctrl-C; then stop. SIGTERM ends the process as it is."""
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        stop()
