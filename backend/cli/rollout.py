"""`specwatch report weekly`, `specwatch plan`, `specwatch rollout status|evaluate|snapshot|transition`."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

report_app = typer.Typer(help="Reports for managers.", no_args_is_help=True)
rollout_app = typer.Typer(help="Rollout status: the 5-step recipe per model x traffic class.", no_args_is_help=True)


def _factory():
    from backend.config import get_settings
    from backend.db.session import make_engine, make_sessionmaker

    s = get_settings()
    return s, make_sessionmaker(make_engine(s.database_url))


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


@report_app.command("weekly")
def weekly(week: Annotated[str | None, typer.Option("--week", help="ISO week, e.g. 2026-W48 (default: last week)")] = None,
           fmt: Annotated[str, typer.Option("--format", help="md | csv | pdf")] = "md",
           output: Annotated[Path | None, typer.Option("--output", "-o", help="file (default: stdout; pdf needs it "
                                                                                "unless stdout is a pipe)")] = None,
           model: Annotated[str | None, typer.Option("--model")] = None) -> None:
    """The weekly rollout report of one ISO week in settings.report_timezone."""
    from backend.db.session import session_scope
    from backend.services import report, report_export, report_wording
    from backend.services.errors import InvalidParameter, NotFound

    if fmt not in report_export.MEDIA:
        _fail("--format must be md, csv or pdf")
    s, factory = _factory()
    now = datetime.now(UTC)
    try:
        with session_scope(factory) as session:
            week = week or report.previous_week(report.week_of(now, s.report_timezone))
            r = report.weekly(session, week=week, now=now, settings=s, model=model)
            data = report_export.export(r, fmt)
    except (InvalidParameter, NotFound) as exc:
        _fail(str(exc))
    if not report_wording.has_data(r):
        typer.echo(f"note: no data for {week}: no model reported speculative-decoding metrics that week", err=True)
    if output:
        output.write_bytes(data)
        typer.echo(f"wrote {output} ({len(data)} bytes)", err=True)
    elif fmt == "pdf" and sys.stdout.isatty():
        _fail("refusing to write a PDF to a terminal; use --output FILE")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()


def plan(model: Annotated[str, typer.Option("--model")], k: Annotated[int, typer.Option("--k")],
         traffic: Annotated[str, typer.Option("--traffic", help="request shares, e.g. chat=0.7,code=0.3")],
         concurrency: Annotated[int, typer.Option("--concurrency", help="production running requests")],
         alpha: Annotated[str | None, typer.Option("--alpha", help="assumed alpha per class, e.g. chat=0.7,code=0.4")] = None,
         offline: Annotated[bool, typer.Option("--offline", help="do not read measured values from the database")] = False,
         as_json: Annotated[bool, typer.Option("--json", help="print the inputs and numbers as JSON")] = False) -> None:
    """A staged rollout plan (Markdown) with the calculator's numbers, filled with measured values when
    the model has data."""
    from sqlalchemy.exc import OperationalError

    from backend.db import queries
    from backend.db.session import session_scope
    from backend.domain import calc as dcalc
    from backend.domain import plan as dplan
    from backend.services import rollout

    s, factory = _factory()
    try:
        shares = dplan.parse_shares(traffic)
        alphas = dplan.parse_shares(alpha, name="alpha", hi=1.0) if alpha else {}
        total = sum(shares.values())
        if total > 0 and abs(total - 1) > 1e-9:
            typer.echo(f"note: --traffic shares add up to {total:g}, not 1; rescaled to "
                       + ",".join(f"{c}={v / total:.3f}" for c, v in shares.items()), err=True)
        kw = {"model": model, "k": k, "traffic": shares, "concurrency": concurrency, "alpha": alphas, "settings": s,
              "now": datetime.now(UTC)}
        try:
            if offline:
                raise OperationalError("offline", None, Exception("offline"))
            with session_scope(factory) as session:
                known = queries.model_names(session)
                if model not in known:
                    shown = ", ".join(known[:10]) + (f" and {len(known) - 10} more" if len(known) > 10 else "")
                    _fail(f"unknown model {model!r} (known: {shown or 'none yet'}); to plan a model specwatch "
                          "does not watch yet, add --offline (and --alpha per class)")
                inputs, nums = rollout.build_plan(session, **kw)
        except OperationalError:
            if not offline:
                typer.echo("warning: database unreachable; planning without measured values", err=True)
            inputs, nums = rollout.build_plan(None, **kw)
    except (dcalc.CalcError, ValueError) as exc:
        _fail(str(exc))
    if as_json:
        typer.echo(json.dumps({"inputs": {"eps_step": inputs.eps_step, "eps_step_source": inputs.eps_step_source,
                                          "eps_step_by_class": dict(inputs.eps_step_by_class), "band": inputs.band,
                                          "alpha": dict(inputs.alpha), "traffic": dict(inputs.traffic)},
                               "numbers": nums}, indent=2))
    else:
        typer.echo(dplan.render(inputs, nums))


@rollout_app.command("status")
def status(model: Annotated[str | None, typer.Option("--model")] = None,
           as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Stage, gate and latency result per model x scope."""
    from backend.db import rollout_repo
    from backend.db.session import session_scope
    from backend.domain import rollout as ro

    _, factory = _factory()
    with session_scope(factory) as session:
        rows = [{"model": t.model_name, "scope": t.scope, "spec_mode": t.spec_mode, "stage": t.stage,
                 "step": ro.step_number(t.stage), "since": t.stage_since.isoformat(), "gate": t.gate_phase,
                 "last_gate": t.gate_result, "latency": t.latency_result, "manual": t.manual, "reason": t.reason}
                for t in rollout_repo.tracks(session, model_name=model)]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        typer.echo(f"{r['model']:<32} {r['scope']:<14} step {r['step']} {r['stage']:<24} gate {r['gate']:<12} "
                   f"latency {r['latency'] or '-':<12} {'(manual) ' if r['manual'] else ''}{r['reason']}")
    if not rows:
        typer.echo("no tracks yet (the worker's specwatch.rollout.evaluate creates them)", err=True)


@rollout_app.command("evaluate")
def evaluate(model: Annotated[str | None, typer.Option("--model")] = None) -> None:
    """Derive the stages once now (the schedule is the worker's specwatch.rollout.evaluate)."""
    from backend.db.session import session_scope
    from backend.services import rollout

    s, factory = _factory()
    with session_scope(factory) as session:
        typer.echo(json.dumps(rollout.evaluate(session, settings=s, now=datetime.now(UTC), model=model), default=str))


@rollout_app.command("snapshot")
def snapshot(model: Annotated[str, typer.Option("--model")],
             window: Annotated[str, typer.Option("--window", help="trailing window of baseline data")] = "24h",
             traffic_class: Annotated[str | None, typer.Option("--class")] = None,
             reason: Annotated[str, typer.Option("--reason")] = "frozen baseline",
             actor: Annotated[str, typer.Option("--actor")] = "cli") -> None:
    """Freeze the model's baseline latency over the window, for later deltas without a baseline pool."""
    from backend.db.session import session_scope
    from backend.services import rollout
    from backend.services.errors import InvalidParameter, NotFound
    from backend.services.windows import Range, parse_duration

    s, factory = _factory()
    now = datetime.now(UTC)
    try:
        with session_scope(factory) as session:
            snaps = rollout.capture_snapshot(session, model=model, rng=Range(now - timedelta(seconds=parse_duration(window)), now),
                                             by=actor, reason=reason, now=now, settings=s, traffic_class=traffic_class)
            typer.echo("\n".join(f"snapshot {x.id}: {x.model_name}/{x.traffic_class} tpot_mean={x.tpot_mean}" for x in snaps))
    except (InvalidParameter, NotFound) as exc:
        _fail(str(exc))


@rollout_app.command("transition")
def transition(model: Annotated[str, typer.Option("--model")], action: Annotated[str, typer.Option("--action")],
               reason: Annotated[str, typer.Option("--reason")], actor: Annotated[str, typer.Option("--actor")],
               scope: Annotated[str, typer.Option("--scope")] = "mixed") -> None:
    """An operator decision: sign_off | disable | domain_drafter | hold | resume (audited)."""
    from backend.db.session import session_scope
    from backend.services import rollout
    from backend.services.errors import InvalidParameter, NotFound

    s, factory = _factory()
    try:
        with session_scope(factory) as session:
            ev = rollout.transition(session, model=model, scope=scope, action=action, reason=reason, actor=actor,
                                    now=datetime.now(UTC), settings=s)
            typer.echo(f"{model}/{scope}: {ev.from_stage} -> {ev.to_stage} by {actor}")
    except (InvalidParameter, NotFound) as exc:
        _fail(str(exc))


def register(app: typer.Typer) -> None:
    app.add_typer(report_app, name="report")
    app.add_typer(rollout_app, name="rollout")
    app.command("plan")(plan)
