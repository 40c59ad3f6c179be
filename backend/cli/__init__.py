"""The `specwatch` command. Each sub-module adds its commands through register(app)."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(help="specwatch: is speculative decoding paying off on your vLLM fleet?", no_args_is_help=True)

COMMAND_MODULES = ("serve", "collect", "seed", "sim", "calc", "demo", "alerts", "rollout")


def _register() -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"backend.cli.{name}")
        module.register(app)


def main() -> None:
    _register()
    app()
