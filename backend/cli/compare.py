"""`specwatch compare`: a drafter / configuration A/B of one model (services.compare), as one sentence and a
table per class, or JSON / CSV."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer

from backend.domain import ab_compare as ab

FORMATS = ("text", "json", "csv")


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def _num(v: Any) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def text_report(r: dict[str, Any]) -> str:
    """The sentence, then per scope one line per figure: A, B, the change and its interval, the verdict."""
    lines = [r["sentence"], "",
             f"A: {r['a']['label']} ({r['a']['start']} to {r['a']['end']})",
             f"B: {r['b']['label']} ({r['b']['start']} to {r['b']['end']})"]
    for s in r["scopes"]:
        bands = ", ".join(s["bands"]) or "none"
        lines += ["", f"[{s['scope']}] compared bands: {bands}"]
        for m in s["metrics"]:
            lines.append(f"  {m['metric']:<17} A {_num(m['a']):>9}  B {_num(m['b']):>9}  "
                         f"{ab.percent_text(m['change'], m['change_low'], m['change_high']):<22} {m['verdict']}")
        for fam, v in s["p99"].items():
            lines.append(f"  P99 {fam.upper():<13} {v['verdict']}: {v['reason']}")
        lines += [f"  note: {n}" for n in s["notes"]]
    return "\n".join(lines) + "\n"


def compare(model: Annotated[str, typer.Option("--model", help="model_name")],
            a: Annotated[str | None, typer.Option("--a", help="side A (reference): a spec mode")] = None,
            b: Annotated[str | None, typer.Option("--b", help="side B (candidate): a spec mode (not with --at)")] = None,
            at: Annotated[str | None, typer.Option("--at", help="before/after this instant (RFC 3339)")] = None,
            window: Annotated[str, typer.Option("--window", help="side by side: the window ending now; "
                                                "before/after: each side's length (e.g. 24h, 7d)")] = "7d",
            traffic_class: Annotated[str | None, typer.Option("--class", help="one traffic class only")] = None,
            fmt: Annotated[str, typer.Option("--format", help="text | json | csv")] = "text") -> None:
    """Compare two drafters, versions or K on one model: per class and for the mix, load-matched."""
    from backend.config import get_settings
    from backend.db.session import make_engine, make_sessionmaker, session_scope
    from backend.services import compare as svc
    from backend.services.errors import InvalidParameter, NotFound
    from backend.services.windows import InvalidWindow, Range, parse_duration, parse_instant

    if fmt not in FORMATS:
        _fail("--format must be text, json or csv")
    s = get_settings()
    now = datetime.now(UTC)
    try:
        span = parse_duration(window, name="window")
        when = parse_instant(at, name="at") if at else None
        with session_scope(make_sessionmaker(make_engine(s.database_url))) as session:
            if when is not None:
                r = svc.compare(session, model=model, a=a, b=b, at=when, span_seconds=span,
                                traffic_class=traffic_class, now=now, settings=s)
            else:
                r = svc.compare(session, model=model, a=a, b=b, rng=Range(now - timedelta(seconds=span), now),
                                traffic_class=traffic_class, now=now, settings=s)
    except (InvalidParameter, InvalidWindow, NotFound) as exc:
        _fail(str(exc))
    if fmt == "json":
        typer.echo(json.dumps(r, indent=2, allow_nan=False))
    elif fmt == "csv":
        typer.echo(svc.to_csv(r), nl=False)
    else:
        typer.echo(text_report(r), nl=False)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)
