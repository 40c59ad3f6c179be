"""Every command turns a bad value or an unreachable database into one clear line and exit status 2; NaN and
infinities are refused with the range, in the words the user typed; `--debug` shows the traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from backend.cli import run

EXE = str(Path(sys.executable).with_name("specwatch"))
UNREACHABLE = "postgresql+psycopg://someone:hunter2@127.0.0.1:1/specwatch"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], check=False, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args,message", [
    (["calc", "speedup", "--k", "3", "--alpha", "nan", "--overhead", "0.1"], "--alpha must be a number in [0, 1], got nan"),
    (["calc", "speedup", "--k", "3", "--alpha", "inf", "--overhead", "0.1"], "--alpha must be a number in [0, 1], got inf"),
    (["calc", "speedup", "--k", "3", "--alpha", "1.5", "--overhead", "0.1"], "--alpha must be a number in [0, 1], got 1.5"),
    (["calc", "speedup", "--k", "3", "--alpha", "0.5", "--overhead", "nan"], "--overhead must be a number > -1, got nan"),
    (["calc", "breakeven", "--k", "3", "--overhead", "-inf"], "--overhead must be a number > -1, got -inf"),
    (["calc", "required-alpha", "--k", "3", "--speedup", "nan", "--overhead", "0"], "--speedup must be a number > 0, got nan"),
    (["calc", "convert", "--k", "3", "--per-token", "nan"], "--per-token must be a number in [0, 1], got nan"),
    (["calc", "overhead", "--k", "3", "--tau", "nan", "--measured-speedup", "1"], "--tau must be a number >= 1, got nan"),
    (["calc", "mix", "--k", "3", "--class", "chat=0.7:1", "--overhead", "inf"], "--overhead must be a number > -1, got inf"),
    (["simulate", "--alpha", "0.5,nan"], "--alpha must be a comma-separated list of numbers in [0, 1], got nan"),
    (["simulate", "--overhead", "inf"], "--overhead must be a comma-separated list of numbers > -1, got inf"),
    (["seed", "--hours", "nan"], "--hours must be a number >= 0.1, got nan"),
    (["demo", "--history-hours", "inf"], "--history-hours must be a number in [0, 168], got inf"),
    (["sim", "--scenario", "steady", "--time-scale", "nan"], "--time-scale must be a number > 0, got nan"),
    (["plan", "--model", "m", "--k", "3", "--traffic", "chat=1", "--alpha", "chat=nan", "--concurrency", "8",
      "--offline"], "--alpha chat: must be a number in [0, 1], got nan"),
    (["plan", "--model", "m", "--k", "3", "--traffic", "chat=inf", "--concurrency", "8", "--offline"],
     "--traffic chat: must be a number >= 0, got inf"),
    (["calc", "speedup", "--k", "3", "--alpha", "0.5", "--bogus"], "No such option: --bogus"),
])
def test_bad_values_are_one_line_and_exit_2(capsys, args, message):
    assert run(args) == 2
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], out.err
    assert "Traceback" not in out.err + out.out


@pytest.mark.parametrize("args", [
    ["report", "weekly", "--week", "2026-W47"], ["rollout", "status"], ["rollout", "evaluate"],
    ["alerts", "evaluate", "--once"], ["tokens", "create", "--role", "viewer"], ["migrate"],
    ["collect", "--once"], ["seed", "--hours", "0.1"],
])
def test_an_unreachable_database_is_one_line(args):
    res = _cli(*args, env={"SPECWATCH_DATABASE_URL": UNREACHABLE})
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: cannot reach the database at postgresql+psycopg://someone:***@127.0.0.1:1/")
    assert "hunter2" not in res.stderr and "Traceback" not in res.stderr


def test_debug_shows_the_traceback():
    res = _cli("--debug", "rollout", "status", env={"SPECWATCH_DATABASE_URL": UNREACHABLE})
    assert res.returncode != 0 and "Traceback" in res.stderr and "OperationalError" in res.stderr


def test_a_bad_setting_is_one_line():
    res = _cli("rollout", "status", env={"SPECWATCH_BUCKET_SECONDS": "7"})
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0, res.stderr
    assert res.stderr.startswith("error: invalid setting SPECWATCH_BUCKET_SECONDS:"), res.stderr


def test_a_rescaled_traffic_mix_is_stated(capsys):
    assert run(["plan", "--model", "m", "--k", "3", "--traffic", "chat=0.7,code=0.5", "--concurrency", "8",
                "--offline"]) == 0
    out = capsys.readouterr()
    assert "note: --traffic shares add up to 1.2, not 1; rescaled to chat=0.583,code=0.417" in out.err
    assert "Request shares as given (chat=0.700, code=0.500) add up to 1.200, not 1" in out.out
    assert run(["plan", "--model", "m", "--k", "3", "--traffic", "chat=0.7,code=0.3", "--concurrency", "8",
                "--offline"]) == 0
    out = capsys.readouterr()
    assert "rescaled" not in out.err + out.out


def test_an_empty_weekly_report_says_there_is_no_data(fresh_db_url):
    res = _cli("report", "weekly", "--week", "2026-W47", env={"SPECWATCH_DATABASE_URL": fresh_db_url})
    assert res.returncode == 0, res.stderr
    assert "No data for 2026-W47: no model reported speculative-decoding metrics that week" in res.stdout
    assert "| model |" not in res.stdout
    assert res.stderr.strip() == "note: no data for 2026-W47: no model reported speculative-decoding metrics that week"


@pytest.mark.parametrize("args", [["collect", "--once"], ["backfill", "--since", "1h"]])
def test_an_unreachable_prometheus_is_one_line_and_exit_2(fresh_db_url, args):
    """As the CLI section promises for every unreachable service: one line, exit status 2."""
    res = _cli(*args, env={"SPECWATCH_DATABASE_URL": fresh_db_url, "SPECWATCH_SOURCE": "prometheus",
                           "SPECWATCH_PROMETHEUS_URL": "http://127.0.0.1:1"})
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Prometheus at http://127.0.0.1:1 unreachable"), res.stderr
    assert "SPECWATCH_PROMETHEUS_URL" in lines[0] and "Traceback" not in res.stderr


def test_a_plan_for_an_unknown_model_is_refused_with_the_known_ones(fresh_db_url):
    res = _cli("plan", "--model", "llama", "--k", "3", "--traffic", "chat=1", "--concurrency", "8",
               env={"SPECWATCH_DATABASE_URL": fresh_db_url})
    assert res.returncode == 2 and res.stdout == "", (res.returncode, res.stdout, res.stderr)
    assert res.stderr.strip() == ("error: unknown model 'llama' (known: none yet); to plan a model specwatch does "
                                  "not watch yet, add --offline (and --alpha per class)")
