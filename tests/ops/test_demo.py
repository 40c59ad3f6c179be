"""`specwatch demo` end to end: every service answers, and SIGINT leaves no process behind."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.support.deadline import deadline as scaled
from tests.support.procs import free_port

pytestmark = pytest.mark.e2e

URL_LINE = re.compile(r"^\s+(dashboard|api|simulator)\s+(http\S+)")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _logs(data_dir: Path) -> str:
    out = []
    for log in sorted((data_dir / "logs").glob("*.log")):
        out.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
    return "\n".join(out)


def test_demo_up_and_clean_shutdown(fresh_db_url, redis_url, tmp_path):
    data_dir = tmp_path / ".specwatch"
    api, dash, sim = free_port(), free_port(), free_port()
    env = {**os.environ, "SPECWATCH_DATABASE_URL": fresh_db_url, "SPECWATCH_REDIS_URL": redis_url,
           "SPECWATCH_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    exe = Path(sys.executable).with_name("specwatch")
    proc = subprocess.Popen([str(exe), "demo", "--no-browser", "--api-port", str(api), "--dashboard-port", str(dash),
                             "--sim-port", str(sim), "--startup-timeout", "150"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path,
                            start_new_session=True)
    lines: queue.Queue[str | None] = queue.Queue()
    output: list[str] = []

    def pump():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    pids: list[int] = []
    try:
        urls: dict[str, str] = {}
        deadline = time.monotonic() + scaled(600)
        while len(urls) < 3:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"waited {scaled(600):g}s for the demo to print its 3 URLs; saw {sorted(urls)}:\n{''.join(output)}\n{_logs(data_dir)}")
            if line is None:
                pytest.fail(f"demo exited ({proc.wait()}) before it was up:\n{''.join(output)}\n{_logs(data_dir)}")
            output.append(line)
            m = URL_LINE.match(line)
            if m:
                urls[m.group(1)] = m.group(2)

        pids = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert len(pids) >= 5, f"expected sim, worker, beat, api, dashboard; got {pids}"
        assert urls["api"] == f"http://127.0.0.1:{api}/api/v1/health"
        assert httpx.get(urls["api"], timeout=scaled(60)).status_code == 200
        assert httpx.get(urls["dashboard"], timeout=scaled(120)).status_code == 200
        assert httpx.get(urls["simulator"], timeout=scaled(60)).status_code == 200
        # everything seen so far, including processes forked since (celery pool, uvicorn)
        pids = sorted({*pids, *(p.pid for p in psutil.Process(proc.pid).children(recursive=True))})

        proc.send_signal(signal.SIGINT)
        assert proc.wait(scaled(180)) == 0, "".join(output)
        deadline = time.monotonic() + scaled(60)  # the children exit on their own; this only catches a hang
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [p for p in pids if _alive(p)]
        assert not left, f"orphans after SIGINT: {[psutil.Process(p).cmdline() for p in left if _alive(p)]}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        for pid in pids:  # never leave strays behind, even when the assertions failed
            if _alive(pid):
                try:
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
