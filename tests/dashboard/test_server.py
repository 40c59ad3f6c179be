"""The dashboard's HTTP server: `python -m dashboard` serves with gunicorn (one process, gthread), stops
cleanly on SIGTERM, and refuses a bad thread count with a clear message."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

from dashboard import server
from tests.support.deadline import deadline
from tests.support.procs import Proc, free_port, wait_for_http
from tests.support.stack import env_for

ROOT = Path(__file__).resolve().parents[2]


def test_options_one_process_threads_no_control_socket():
    opts = server.options("127.0.0.1", 8050, 8)
    assert opts["bind"] == "127.0.0.1:8050"
    assert (opts["workers"], opts["worker_class"], opts["threads"]) == (1, "gthread", 8)
    assert opts["control_socket_disable"] is True and opts["accesslog"] is None


def test_serves_with_gunicorn_and_stops_on_sigterm(tmp_path):
    port = free_port()
    home = tmp_path / "home"
    home.mkdir()
    env = env_for({"dashboard_threads": 4}) | {"HOME": str(home)}
    proc = Proc("dashboard", [sys.executable, "-m", "dashboard", "--port", str(port), "--api", "http://127.0.0.1:9"],
                tmp_path / "dashboard.log", env=env, cwd=ROOT).start()
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", proc=proc)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_dash-layout", timeout=deadline(60)) as resp:
            assert resp.headers["Server"] == "gunicorn"
            assert b'"id":"url"' in resp.read()
    finally:
        code = proc.stop(timeout=deadline(120))  # a clean stop; the deadline only catches a hang
    log = proc.log_path.read_text()
    assert code == 0, log
    assert "Using worker: gthread" in log and "Shutting down: Master" in log
    assert not (home / ".gunicorn").exists()  # no control socket written under $HOME


def test_bad_thread_count_is_a_clear_error():
    for args, env, message in ((["--threads", "0"], {}, "--threads must be >= 1 (got 0)"),
                               ([], {"dashboard_threads": "many"}, "SPECWATCH_DASHBOARD_THREADS must be a whole number")):
        res = subprocess.run([sys.executable, "-m", "dashboard", *args], check=False, env=env_for(env), cwd=ROOT,
                             capture_output=True, text=True, timeout=deadline(300))
        assert res.returncode == 2 and message in res.stderr, res.stderr
