"""`specwatch seed`: fill the database with simulated history (demo data), through the collector's code."""

from __future__ import annotations

import json
import time

import typer


def register(app: typer.Typer) -> None:
    @app.command("seed")
    def seed_cmd(
        scenario: str = typer.Option("steady", help="built-in scenario name or a YAML file"),
        hours: float = typer.Option(6.0, min=0.1, help="hours of history ending now"),
        seed: int = typer.Option(0),
        scrape_interval: float = typer.Option(15.0, min=1.0),
        tick: float = typer.Option(1.0, min=0.01, help="simulator tick for the history (coarser = faster)"),
        if_empty: bool = typer.Option(False, "--if-empty", help="do nothing when the database already has data"),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        """Simulate HOURS of vLLM fleet history and store it, so the dashboard has data at once."""
        from tqdm import tqdm

        from backend.config import get_settings
        from backend.db.session import make_engine, make_sessionmaker
        from backend.services.history import seed_history
        from backend.sim.scenario import ScenarioError

        s = get_settings()
        from backend.db.repositories import has_facts
        from backend.db.session import session_scope

        factory = make_sessionmaker(make_engine(s.database_url))
        with session_scope(factory) as session:  # reach the database before simulating anything
            if has_facts(session) and if_empty:
                typer.echo(json.dumps({"skipped": "the database already has data"}) if as_json
                           else "the database already has data: nothing seeded")
                return
        bar = tqdm(total=0, unit="bucket", disable=as_json)

        def progress(done: int, total: int) -> None:
            bar.total, bar.n = total, done
            bar.refresh()

        try:
            summary = seed_history(factory, s, scenario=scenario, seconds=int(hours * 3600), end=time.time(),
                                   seed=seed, scrape_interval=scrape_interval, tick=tick, progress=progress)
        except ScenarioError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        finally:
            bar.close()
        out = summary.__dict__ | {"duration": round(summary.duration, 2)}
        typer.echo(json.dumps(out) if as_json else "\n".join(f"{k:>10}: {v}" for k, v in out.items()))
