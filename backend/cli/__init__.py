"""The `specwatch` command. Each sub-module adds its commands through register(app).

Errors: every bad value and every failure to reach the database or the broker is one line on stderr and
exit status 2 (backend/cli/errors.py); `specwatch --debug COMMAND ...` shows the traceback instead."""

from __future__ import annotations

import importlib
import sys

import typer

app = typer.Typer(help="specwatch: is speculative decoding paying off on your vLLM fleet? "
                       "(--debug before a command: tracebacks instead of one-line errors)", no_args_is_help=True)

COMMAND_MODULES = ("serve", "collect", "seed", "sim", "calc", "demo", "alerts", "rollout", "compare")


def _register() -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"backend.cli.{name}")
        module.register(app)


def command():
    """The click command tree, float options guarded (NaN, infinities, out of range: one line)."""
    from backend.cli.errors import guard_floats

    if not app.registered_commands:
        _register()
    cmd = typer.main.get_command(app)
    guard_floats(cmd)
    return cmd


def run(argv: list[str]) -> int:
    """Run the CLI on argv; the exit status. Errors are one line unless argv starts with --debug."""
    from backend.cli.errors import EXIT_BAD_INPUT, ClickException, UsageError, describe

    debug = bool(argv) and argv[0] == "--debug"
    argv = argv[1:] if debug else argv
    cmd = command()
    try:
        rv = cmd.main(args=argv, prog_name="specwatch", standalone_mode=False)
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            exc.show()
            return exc.exit_code
        where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx is not None else ""
        typer.echo(f"error: {exc.format_message()}{where}", err=True)
        return EXIT_BAD_INPUT
    except ClickException as exc:
        typer.echo(f"error: {exc.format_message()}", err=True)
        return exc.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        return 1
    except Exception as exc:  # one clear line instead of a traceback; --debug shows it
        if debug:
            raise
        typer.echo(f"error: {describe(exc)} (`specwatch --debug ...` for the traceback)", err=True)
        return EXIT_BAD_INPUT
    return rv if isinstance(rv, int) else 0


def main() -> None:
    sys.exit(run(sys.argv[1:]))
