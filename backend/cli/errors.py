"""One clear line and exit status 2 for every bad value and every unreachable service, in every command.

* Float options refuse NaN, infinities and values outside their range, naming the option as the user
  typed it and the valid range: ``--alpha must be a number in [0, 1], got nan``.
* A usage error (unknown option, missing value) is one line, with where to look.
* An exception escaping a command becomes one line naming what failed (the database, Redis, a setting);
  ``specwatch --debug ...`` shows the traceback instead.
"""

from __future__ import annotations

import math
import re

import typer

EXIT_BAD_INPUT = 2
# typer >= 0.2x carries its own copy of click: take the classes it raises from it, whichever it is
UsageError: type[Exception] = typer.BadParameter.__mro__[1]
ClickException: type[Exception] = UsageError.__mro__[1]


class OneLineError(UsageError):
    """A bad value: shown as is, on one line."""

    def format_message(self) -> str:
        return self.message


# options whose lower bound is open (the value itself is refused): the bound
OPEN_BELOW = {"--overhead": -1.0, "--speedup": 0.0, "--measured-speedup": 0.0, "--time-scale": 0.0}


def _range_words(lo: float | None, hi: float | None, lo_open: bool = False) -> str:
    if lo_open and hi is None:
        return f"a number > {lo:g}"
    if lo is not None and hi is not None:
        return f"a number in [{lo:g}, {hi:g}]"
    if lo is not None:
        return f"a number >= {lo:g}"
    if hi is not None:
        return f"a number <= {hi:g}"
    return "a finite number"


def check_number(name: str, value: float | None, lo: float | None = None, hi: float | None = None,
                 lo_open: bool = False) -> float | None:
    """The value, or a one-line refusal naming the option and its range (NaN and infinities included)."""
    if value is None:
        return None
    if (not math.isfinite(value) or (lo is not None and (value < lo or (lo_open and value == lo)))
            or (hi is not None and value > hi)):
        raise OneLineError(f"{name} must be {_range_words(lo, hi, lo_open)}, got {value}")
    return value


def guard_floats(command) -> None:
    """Every float option of `command` and its sub-commands refuses NaN, infinities and values outside its
    min/max with one line (typer's own range check says nothing of NaN)."""
    for p in command.params:
        bare = getattr(p, "bare_type", None)
        kind = bare() if callable(bare) else getattr(getattr(p, "type", None), "name", None)
        if (kind is float or kind == "float") and not getattr(p, "_finite_guard", False):
            p._finite_guard = True
            p.process_value = _guarded(p, p.process_value)
    for sub in getattr(command, "commands", {}).values():
        guard_floats(sub)


def _guarded(param, process):
    name = param.opts[0] if param.opts else param.name
    lo, hi = getattr(param, "min", None), getattr(param, "max", None)
    lo_open = name in OPEN_BELOW
    lo = OPEN_BELOW.get(name, lo)

    def process_value(ctx, value):
        if isinstance(value, str):  # refuse before the type's own range check words it differently
            try:
                check_number(name, float(value), lo, hi, lo_open)
            except ValueError as exc:
                if isinstance(exc, OneLineError):
                    raise
        out = process(ctx, value)
        return check_number(name, out, lo, hi, lo_open) if isinstance(out, float) else out
    return process_value


def _redact(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@/]*@", r"//\1:***@", url)


def describe(exc: BaseException) -> str:
    """One line saying what failed, for an exception that escaped a command."""
    from pydantic import ValidationError

    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    mod = type(exc).__module__
    if isinstance(exc, ValidationError):
        errs = exc.errors()
        first = errs[0] if errs else {}
        field = ".".join(str(x) for x in first.get("loc", ())) or "settings"
        env = f"SPECWATCH_{field.upper()}" if first.get("loc") else "a SPECWATCH_ setting"
        return f"invalid setting {env}: {first.get('msg', text)}"
    if mod.startswith(("sqlalchemy", "psycopg")):
        from backend.config import get_settings

        url = _redact(get_settings().database_url)
        orig = getattr(exc, "orig", None)
        detail = (str(orig).strip().splitlines() or [text])[0] if orig is not None else text
        if type(exc).__name__ == "OperationalError":
            return f"cannot reach the database at {url}: {detail}"
        if "does not exist" in detail and ("relation" in detail or "table" in detail):
            return f"the database at {url} has no specwatch tables: run `specwatch migrate` ({detail})"
        return f"database error at {url}: {detail}"
    if mod.startswith(("redis", "kombu")):
        return f"cannot reach the broker (SPECWATCH_REDIS_URL): {text}"
    if isinstance(exc, OSError):
        return f"{exc.strerror or text}" + (f": {exc.filename}" if getattr(exc, "filename", None) else "")
    return f"{type(exc).__name__}: {text}"
