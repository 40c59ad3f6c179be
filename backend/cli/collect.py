"""`specwatch collect --once` and `specwatch backfill --since ...`."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import typer

_REL = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_when(value: str, *, now: datetime) -> datetime:
    """'2026-11-30T10:00:00Z', '2026-11-30', or a duration ago: '90m', '6h', '7d'."""
    m = _REL.match(value.strip())
    if m:
        return now - timedelta(seconds=int(m.group(1)) * _UNITS[m.group(2)])
    try:
        t = datetime.fromisoformat(value.strip())  # Python 3.11 reads a trailing Z
    except ValueError as exc:
        raise typer.BadParameter(f"{value!r} is neither an ISO-8601 time nor a duration like 6h or 7d") from exc
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _context(source: str | None):
    from backend.config import get_settings
    from backend.db.session import make_engine, make_sessionmaker

    s = get_settings()
    if source:
        s = s.model_copy(update={"source": source})
    return s, make_sessionmaker(make_engine(s.database_url))


def _client(s):
    from backend.prom.client import PromClient

    return PromClient(s.prometheus_url, timeout=s.prometheus_timeout_seconds, max_points=s.prometheus_max_points)


def _print(summary: dict, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(summary))
        return
    for key, value in summary.items():
        if key == "pools":
            typer.echo(f"{'pools found':>14}: {len(value)}")
            for p in value:
                typer.echo(f"{'':>16}{p['model']}  class {p['traffic_class']}  mode {p['spec_mode']}")
        else:
            typer.echo(f"{key:>14}: {value}")


def _with_pools(summary: dict, found) -> dict:
    """The cycle's summary with the pools it found, by name (`pools_written`: those given buckets now)."""
    out = {}
    for key, value in summary.items():
        if key == "pools":
            out["pools"] = [{"model": p[0], "traffic_class": p[1], "spec_mode": p[2]} for p in sorted(found)]
            out["pools_written"] = value
        else:
            out[key] = value
    return out


def _prom_unreachable(s, exc) -> None:
    """One line and exit status 2, as for every unreachable service."""
    typer.echo(f"error: {exc} (SPECWATCH_PROMETHEUS_URL={s.prometheus_url})", err=True)
    raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    @app.command("collect")
    def collect_cmd(
        once: bool = typer.Option(False, "--once", help="run one cycle and exit"),
        source: str = typer.Option(None, help="prometheus | scrape (default: SPECWATCH_SOURCE)"),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        """Run one collection cycle now and print what it did (pools, buckets written, rejected, duration)."""
        if not once:
            raise typer.BadParameter("the scheduled collector is `specwatch worker` + `specwatch beat`; "
                                     "use --once for a single cycle")
        if source not in (None, "prometheus", "scrape"):
            raise typer.BadParameter("--source must be prometheus or scrape")
        from backend.prom.client import PromError
        from backend.scrape.fetch import ScrapeUnavailable
        from backend.services import collect, scrape

        s, factory = _context(source)
        now = datetime.now(UTC)
        try:
            if s.source == "prometheus":
                client = _client(s)
                cycle = collect.run_prometheus(factory, client, s, now=now)
                # also those with no complete bucket since the last cycle (and an answer from Prometheus
                # even when there was nothing to collect)
                found = cycle.pools | collect.pools_in_prometheus(client, s, now=now)
                summary = _with_pools(cycle.as_dict(), found)
            else:
                scraped = scrape.scrape_targets(factory, s, now=now)
                cycle = scrape.finalize(factory, s, now=now)
                found = scrape.pools_found(factory, s, since=now - timedelta(seconds=1))
                summary = {**_with_pools(cycle.as_dict(), found), "scraped": {
                    k: scraped[k] for k in ("targets", "stored", "failed", "rejected", "errors")}}
                if found and not cycle.pools:
                    summary["note"] = ("no bucket complete yet: a bucket needs a scrape on each side and is "
                                       f"written {scrape.settle_of(s):g} s after it ends; run this again in a "
                                       "minute, or start `specwatch worker` and `specwatch beat`")
        except PromError as exc:
            _prom_unreachable(s, exc)
        except ScrapeUnavailable as exc:
            typer.echo(f"error: {exc} (SPECWATCH_SCRAPE_TARGETS)", err=True)
            raise typer.Exit(2) from None
        _print(summary, as_json)

    @app.command("backfill")
    def backfill_cmd(
        since: str = typer.Option(..., help="start: ISO-8601 time or a duration ago (6h, 7d)"),
        until: str = typer.Option(None, help="end (default: the newest complete bucket)"),
        as_json: bool = typer.Option(False, "--json"),
    ) -> None:
        """Re-collect a time range from Prometheus in bounded chunks, with a progress bar."""
        from tqdm import tqdm

        from backend.prom.client import PromError
        from backend.services import collect

        s, factory = _context("prometheus")
        now = datetime.now(UTC)
        start = parse_when(since, now=now)
        end = parse_when(until, now=now) if until else None
        if end is not None and end <= start:
            raise typer.BadParameter("--until must be after --since")
        bars: list = []  # made at the first progress, so a refusal before it is one line on stderr

        def progress(done: int, total: int) -> None:
            if not bars:
                bars.append(tqdm(total=0, unit="bucket", disable=as_json))
            bar = bars[0]
            bar.total = total
            bar.n = done
            bar.refresh()

        try:
            summary = collect.run_prometheus(factory, _client(s), s, now=now, since=start, until=end,
                                             kind="backfill", progress=progress).as_dict()
        except PromError as exc:
            _prom_unreachable(s, exc)
        finally:
            for bar in bars:
                bar.close()
        _print(summary, as_json)
