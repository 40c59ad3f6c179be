"""`specwatch demo` end to end, as a new user meets it: the history is in place when the URLs are printed,
the dashboard acts as an operator without a login, the incident fires and resolves and its Slack messages
show on the receiver's page (reached from the Alerts page), and SIGINT leaves no process behind.

Time is a parameter: 10 s buckets, a 5 s collection and evaluation pace and a 40 s incident make the
incident's whole story take about two minutes here; every wait is for the event, with one deadline."""

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

from tests.dashboard.browser import browser_context
from tests.support.deadline import deadline as scaled
from tests.support.procs import free_port
from tests.support.skips import chromium_path

pytestmark = pytest.mark.e2e

URL_LINE = re.compile(r"^\s+(dashboard|api|slack|simulator|database|token|pids)\s+(\S+)")
FAST = {"SPECWATCH_BUCKET_SECONDS": "10", "SPECWATCH_COLLECT_INTERVAL_SECONDS": "5",
        "SPECWATCH_SCRAPE_INTERVAL_SECONDS": "2", "SPECWATCH_SETTLE_SECONDS": "5",
        "SPECWATCH_ALERT_EVAL_INTERVAL_SECONDS": "5", "SPECWATCH_ALERT_DELIVER_INTERVAL_SECONDS": "2"}
INCIDENT_DEADLINE_MS = int(scaled(300) * 1000)  # against hangs only; the incident's story takes about two minutes


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


def _read_urls(proc: subprocess.Popen, lines: queue.Queue, output: list[str], data_dir: Path) -> dict[str, str]:
    urls: dict[str, str] = {}
    deadline = time.monotonic() + scaled(300)
    while "pids" not in urls:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            pytest.fail(f"demo did not print its URLs in time:\n{''.join(output)}\n{_logs(data_dir)}")
        if line is None:
            pytest.fail(f"demo exited ({proc.wait()}) before it was up:\n{''.join(output)}\n{_logs(data_dir)}")
        output.append(line)
        m = URL_LINE.match(line)
        if m:
            urls[m.group(1)] = m.group(2)
    return urls


@pytest.mark.timeout(900)  # start-up, seeding and the incident on a busy machine; each wait has its own deadline
def test_demo_tells_the_whole_story_and_stops_clean(fresh_db_url, redis_url, tmp_path):
    chromium = chromium_path()
    data_dir = tmp_path / ".specwatch"
    api, dash, sim, receiver = free_port(), free_port(), free_port(), free_port()
    env = {**os.environ, "SPECWATCH_DATABASE_URL": fresh_db_url, "SPECWATCH_REDIS_URL": redis_url,
           "SPECWATCH_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1", **FAST}
    exe = Path(sys.executable).with_name("specwatch")
    proc = subprocess.Popen([str(exe), "demo", "--no-browser", "--api-port", str(api), "--dashboard-port", str(dash),
                             "--sim-port", str(sim), "--receiver-port", str(receiver), "--startup-timeout", "150",
                             "--history-hours", "0.25", "--incident-after", "5", "--incident-seconds", "40"],
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
        urls = _read_urls(proc, lines, output, data_dir)
        text = "".join(output)
        assert re.search(r"history:\s+\d+ buckets seeded", text), text
        assert text.index("buckets seeded") < text.index("specwatch demo is running")  # history first
        assert urls["database"] == fresh_db_url and urls["token"].startswith("sw_")
        assert "specwatch tokens create --role" in text
        assert urls["api"] == f"http://127.0.0.1:{api}/api/v1/health"
        assert urls["slack"] == f"http://127.0.0.1:{receiver}/"
        pids = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert len(pids) >= 6, f"expected receiver, sim, worker, beat, api, dashboard; got {pids}"
        assert httpx.get(urls["simulator"], timeout=scaled(10)).status_code == 200
        who = httpx.get(f"http://127.0.0.1:{api}/api/v1/whoami",
                        headers={"Authorization": f"Bearer {urls['token']}"}, timeout=scaled(10)).json()
        assert who["role"] == "operator"
        # the seeded history is there before anything else happens
        assert httpx.get(f"http://127.0.0.1:{api}/api/v1/pools", timeout=scaled(30)).status_code == 401  # a token
        pools = httpx.get(f"http://127.0.0.1:{api}/api/v1/pools", timeout=scaled(30),
                          headers={"Authorization": f"Bearer {urls['token']}"}).json()["pools"]
        assert {p["traffic_class"] for p in pools} >= {"chat", "code"}

        with browser_context(chromium) as ctx:
            page = ctx.new_page()
            page.goto(urls["dashboard"])
            page.wait_for_selector(".ag-center-cols-container .ag-row", timeout=int(scaled(60) * 1000))
            assert "alerts need a token" not in page.inner_text("body")
            # the incident: the overview's banner shows it firing, no login needed
            banner = page.wait_for_selector(".sw-al-banner", timeout=INCIDENT_DEADLINE_MS)
            assert "alpha-low" in banner.inner_text() and "chat" in banner.inner_text()
            assert "log in" not in page.inner_text("#nav-user-name") and "operator" in page.inner_text("#nav-user-name")

            page.goto(urls["dashboard"] + "alerts")
            link = page.wait_for_selector("#al-receiver", timeout=int(scaled(60) * 1000))
            assert link.get_attribute("href") == urls["slack"]
            page.goto(urls["slack"])
            page.wait_for_selector("article.msg-firing", timeout=INCIDENT_DEADLINE_MS)
            page.wait_for_function("() => document.querySelector('article.msg-resolved')", timeout=INCIDENT_DEADLINE_MS,
                                   polling=1000)
            page.reload()
            firing = page.inner_text("article.msg-firing >> nth=-1")
            assert "FIRING" in firing and "alpha-low" in firing and "class chat" in firing
            assert page.query_selector("article.msg-firing .bk-fields .bk-field strong")  # Block Kit fields
            assert page.get_attribute("article.msg-firing a >> nth=0", "href").startswith(urls["dashboard"])
        # every alert message the receiver got came from the incident: nothing fired because of the seeding
        # (the weekly digest may go out to the channel too: it is no alert)
        msgs = httpx.get(urls["slack"] + "messages.json", timeout=scaled(10)).json()
        texts = {m["text"] for m in msgs if "DIGEST" not in m["text"]}
        assert texts and all("alpha-low" in t for t in texts), texts
        assert not any("stale" in t for t in texts), texts

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
