"""``specwatch calc ...`` and ``specwatch simulate``: the speculative-decoding calculator.

Pure glue: every number comes from ``backend.domain.calc`` (shared with the HTTP API). ``--json`` prints
the result dict; otherwise a table. Undefined values print as ``null`` (JSON) or ``undefined`` (table).
Bad input prints ``error: ...`` on stderr and exits with code 2 (no traceback).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from backend.domain import calc as dcalc

EXIT_BAD_INPUT = 2


def _console() -> Console:
    # piped or captured output: do not squeeze tables into 80 columns
    return Console() if sys.stdout.isatty() else Console(width=160)


def _fmt(v: object) -> str:
    if v is None:
        return "undefined"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _flatten(d: dict, prefix: str = "") -> list[tuple[str, object]]:
    rows: list[tuple[str, object]] = []
    for key, val in d.items():
        if key == "inputs":
            continue
        if isinstance(val, dict):
            rows += _flatten(val, f"{prefix}{key}.")
        else:
            rows.append((f"{prefix}{key}", val))
    return rows


def _emit(result: dict, as_json: bool, title: str) -> None:
    if as_json:
        typer.echo(json.dumps(result, indent=2, allow_nan=False))
        return
    table = Table(title=title)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    for key, val in _flatten(result):
        table.add_row(key, _fmt(val))
    _console().print(table)


def _result_or_exit(fn: Callable[[], dict]) -> dict:
    """fn's result; a ValueError (CalcError and the domain's) is printed and exits with EXIT_BAD_INPUT."""
    try:
        return fn()
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None


def _run(fn: Callable[[], dict], as_json: bool, title: str) -> None:
    _emit(_result_or_exit(fn), as_json, title)


def _floats(text: str, name: str, lo: float, hi: float | None = None, words: str | None = None) -> list[float]:
    words = words or (f"numbers in [{lo:g}, {hi:g}]" if hi is not None else f"numbers >= {lo:g}")
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise dcalc.CalcError(f"{name} must be a comma-separated list of {words}, got {text!r}") from None
    bad = [v for v in values if not math.isfinite(v) or v < lo or (hi is not None and v > hi)
           or (words.startswith("numbers >") and not words.startswith("numbers >=") and v == lo)]
    if bad:
        raise dcalc.CalcError(f"{name} must be a comma-separated list of {words}, got {bad[0]}")
    return values


def _ints(text: str, name: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise dcalc.CalcError(f"{name} must be a comma-separated list of integers, got {text!r}") from None


JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of a table.")


def register(app: typer.Typer) -> None:
    """Add the ``calc`` sub-command group and the ``simulate`` command to the top-level app."""
    calc_app = typer.Typer(help="Speculative-decoding calculator (alpha = accepted per draft / K).",
                           no_args_is_help=True)

    @calc_app.command("speedup")
    def speedup_cmd(k: int = typer.Option(..., "--k", help="num_speculative_tokens"),
                    alpha: float = typer.Option(..., "--alpha", min=0, max=1, help="acceptance rate (accepted per draft / K)"),
                    overhead: float = typer.Option(..., "--overhead", help="eps = t_spec_step / t_base_step - 1"),
                    as_json: bool = JSON_OPT) -> None:
        """S = (1 + K alpha) / (1 + eps)."""
        _run(lambda: dcalc.calc_speedup(k, alpha, overhead), as_json, "speedup")

    @calc_app.command("breakeven")
    def breakeven_cmd(k: int = typer.Option(..., "--k"), overhead: float = typer.Option(..., "--overhead"),
                      as_json: bool = JSON_OPT) -> None:
        """Break-even acceptance rate eps / K (and tau = 1 + eps)."""
        _run(lambda: dcalc.calc_breakeven(k, overhead), as_json, "break-even")

    @calc_app.command("required-alpha")
    def required_alpha_cmd(k: int = typer.Option(..., "--k"), speedup: float = typer.Option(..., "--speedup"),
                           overhead: float = typer.Option(..., "--overhead"), as_json: bool = JSON_OPT) -> None:
        """Acceptance rate needed for a target speedup: (S (1 + eps) - 1) / K."""
        _run(lambda: dcalc.calc_required_alpha(k, speedup, overhead), as_json, "required alpha")

    @calc_app.command("convert")
    def convert_cmd(k: int = typer.Option(..., "--k"),
                    acceptance_rate: float = typer.Option(None, "--acceptance-rate", min=0, max=1, help="vLLM rate r = A/D"),
                    per_token: float = typer.Option(None, "--per-token", min=0, max=1, help="Leviathan per-token a"),
                    as_json: bool = JSON_OPT) -> None:
        """Convert vLLM's acceptance rate r <-> per-token a (i.i.d. model)."""
        _run(lambda: dcalc.calc_convert(k, acceptance_rate, per_token), as_json, "alpha conversion")

    @calc_app.command("mix")
    def mix_cmd(k: Annotated[int, typer.Option("--k")],
                classes: Annotated[list[str], typer.Option("--class", help="NAME=ALPHA:SHARE (repeatable)")],
                share_basis: Annotated[str, typer.Option(
                    "--share-basis", help="draft-tokens | requests | output-tokens")] = "draft-tokens",
                lengths: Annotated[list[str] | None, typer.Option(
                    "--lengths", help="NAME=L relative output length (requests basis; repeatable)")] = None,
                overhead: Annotated[float | None, typer.Option(
                    "--overhead", help="eps, to also get the overall speedup")] = None,
                as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
                ) -> None:
        """Mixed acceptance rate of traffic classes (pool counters, never average ratios)."""
        def run() -> dict:
            parsed = [dcalc.parse_class_spec(c) for c in classes]
            lens = dict(dcalc.parse_length_spec(x) for x in lengths) if lengths else None
            return dcalc.calc_mix(k, parsed, share_basis, lens, overhead)
        _run(run, as_json, "mixed traffic")

    @calc_app.command("overhead")
    def overhead_cmd(k: int = typer.Option(..., "--k"),
                     tau: float = typer.Option(..., "--tau", min=1, help="measured mean acceptance length"),
                     measured_speedup: float = typer.Option(..., "--measured-speedup",
                                                            help="TPOT_base / TPOT_spec at matched load"),
                     as_json: bool = JSON_OPT) -> None:
        """Effective per-step overhead eps = tau / S - 1, break-even and margin."""
        _run(lambda: dcalc.calc_overhead(k, tau, measured_speedup), as_json, "effective overhead")

    @calc_app.command("k-advisor")
    def k_advisor_cmd(k: Annotated[int, typer.Option("--k", help="current num_speculative_tokens")],
                      classes: Annotated[list[str], typer.Option(
                          "--class", help="NAME=P1,P2,...,PK[:SHARE]: conditional acceptance per position and "
                                          "output-token share (default 1; repeatable)")],
                      overhead: Annotated[float, typer.Option("--overhead", help="eps measured at K")],
                      eps0_share: Annotated[float, typer.Option(
                          "--eps0-share", help="assumed fixed share of eps (the rest grows with K)")] = 0.0,
                      measured: Annotated[list[str] | None, typer.Option(
                          "--measured", help="K=EPS measured at another K, same model and drafter (repeatable)")] = None,
                      as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
                      ) -> None:
        """Expected tokens per step and speedup for K-1..K+2 per class and for the mix; the best K."""
        def run() -> dict:
            parsed = [dcalc.parse_curve_spec(c) for c in classes]
            points = []
            for m in measured or []:
                kk, sep, e = m.partition("=")
                try:
                    points.append((int(kk), float(e)))
                except ValueError:
                    raise dcalc.CalcError(f"--measured must look like K=EPS, got {m!r}") from None
                if not sep:
                    raise dcalc.CalcError(f"--measured must look like K=EPS, got {m!r}")
            return dcalc.calc_k_advisor(k, parsed, overhead, eps0_share=eps0_share, measured=points)
        result = _result_or_exit(run)
        if as_json:
            typer.echo(json.dumps(result, indent=2, allow_nan=False))
            return
        ov = result["overhead"]
        table = Table(title=f"K advisor (current K = {k}; eps(K) = {ov['eps0']:.4g} + K x {ov['eps_tok']:.4g}, "
                            f"{ov['source']})")
        for col in ("class", "K", "tau", "eps", "speedup", "extrapolated", "best"):
            table.add_column(col, justify="left" if col == "class" else "right")
        for adv in [*result["classes"], *([result["mix"]] if result["mix"] else [])]:
            for row in adv["rows"]:
                table.add_row(adv["name"], str(row["k"]), _fmt(row["tau"]), _fmt(row["eps"]), _fmt(row["speedup"]),
                              "yes" if row["extrapolated"] else "", "best" if row["k"] == adv["best_k"] else "")
        _console().print(table)
        for adv in [*result["classes"], *([result["mix"]] if result["mix"] else [])]:
            gain = adv["gain"]
            typer.echo(f"{adv['name']}: best K = {_fmt(adv['best_k'])}"
                       + ("" if gain is None else f" ({gain * 100:+.1f} % speedup vs K = {k})")
                       + (" [extrapolated]" if adv["best_is_extrapolated"] else ""))
        if ov["note"]:
            typer.echo(f"note: {ov['note']}")

    app.add_typer(calc_app, name="calc")

    @app.command("simulate")
    def simulate_cmd(alpha: str = typer.Option("0.4,0.55,0.7", "--alpha",
                                               help="comma-separated acceptance rates (vLLM r at each K)"),
                     k: str = typer.Option("1,3,5", "--k", help="comma-separated K values"),
                     overhead: str = typer.Option(
                         "0.1", "--overhead", help="comma-separated step overheads eps (as calc's --overhead)"),
                     eps: str | None = typer.Option(None, "--eps", hidden=True,
                                                    help="deprecated name of --overhead"),
                     seed: int = typer.Option(0, "--seed"),
                     per_token: bool = typer.Option(False, "--per-token", help="alpha values are per-token a"),
                     jitter: float = typer.Option(0.0, "--jitter", min=0, help="log-normal sigma of step time"),
                     requests: int = typer.Option(2000, "--requests", help="simulated requests per cell"),
                     tokens: int = typer.Option(256, "--tokens", help="output tokens per request"),
                     as_json: bool = JSON_OPT) -> None:
        """Monte Carlo of the decode loop: tokens/step, speedup, break-even and P50/P99 per-token latency."""
        name, values = "--overhead", overhead
        if eps is not None:  # the old name: one name for the concept across the CLI (calc's --overhead)
            typer.echo("note: --eps is deprecated; use --overhead", err=True)
            name, values = "--eps", eps

        def run() -> dict:
            return dcalc.calc_simulate(_floats(alpha, "--alpha", 0.0, 1.0), _ints(k, "--k"),
                                       _floats(values, name, -1.0, words="numbers > -1"), seed=seed,
                                       alpha_kind="per-token" if per_token else "rate", jitter=jitter,
                                       n_requests=requests, tokens_per_request=tokens)
        result = _result_or_exit(run)
        if as_json:
            typer.echo(json.dumps(result, indent=2, allow_nan=False))
            return
        table = Table(title=f"decode-loop simulation (alpha = {'per-token a' if per_token else 'vLLM rate r'}, "
                            f"seed {seed})")
        for col in ("alpha", "K", "eps", "a", "tok/step", "S model", "S sim", "alpha_be", "P50 base ms",
                    "P50 spec ms", "P99 base ms", "P99 spec ms"):
            table.add_column(col, justify="right")
        for c in result["cells"]:
            table.add_row(_fmt(c["alpha"]), str(c["k"]), _fmt(c["eps"]), f"{c['per_token_a']:.4f}",
                          f"{c['tokens_per_step_sim']:.3f}", f"{c['speedup_model']:.3f}", f"{c['speedup_sim']:.3f}",
                          _fmt(c["break_even_rate"]), *(f"{c[f] * 1e3:.2f}" for f in
                                                        ("base_p50", "spec_p50", "base_p99", "spec_p99")))
        _console().print(table)
