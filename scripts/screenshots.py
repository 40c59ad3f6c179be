"""Regenerate docs/screenshots/*.png (`make screenshots`), every page at 1440x900 (<page>.png) and on a
phone at 390x844 (<page>-phone.png), plus the overview in the dark theme, in headless Chromium.

    python scripts/screenshots.py [--from-demo] [--hours 3] [--out docs/screenshots] [--keep-db]

By default (`make screenshots`) from the demo as a user sees it during its incident: `specwatch demo` runs on
free ports with a data folder and database of its own, the script waits until the incident's `alpha-low`
alert fires (the API's /alerts), then takes the pages. `--seeded` instead seeds a throwaway database with
simulated history through the collector code, evaluates the alert rules on it (alerts.example.yaml) and
starts the real API and dashboard (both with token authentication, logged in as an operator).

The database server is the one in SPECWATCH_DATABASE_URL (a new database is created on it and dropped
afterwards; the configured database itself is never written), else the test server on 127.0.0.1 (or the
embedded PostgreSQL when nothing answers there).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.cli.serve import migrate
from tests.dashboard import seeding
from tests.dashboard.alerting_stack import fire_alerts, login, make_token, start_dashboard_auth
from tests.dashboard.browser import browser_context, start_api, wait_idle
from tests.support import db as dbsupport
from tests.support.procs import free_port

SHOTS = (  # file name, path and query, dark theme?
    ("overview", "/?window=1h", False),
    ("acceptance", "/acceptance?window=3h&model=llama-3.1-8b", False),
    ("model", "/model?window=3h&model=llama-3.1-70b&cls=chat", False),
    ("calculator", "/calculator", False),
    ("alerts", "/alerts?window=1h", False),
    ("rollout", "/rollout", False),
    ("report", "/report", False),
    ("plan", "/plan?model=llama-3.1-70b", False),
    ("overview-dark", "/?window=1h", True),
)
# `--scenario mixed-engines`: the overview and a model page of the mixed-engine fleet (vLLM, llama.cpp and SGLang
# pools; the model page on the SGLang pool, whose figures are estimates), as <page>-mixed-engines.png
SCENARIO_SHOTS = {"mixed-engines": (
    ("overview", "/?window=1h", False),
    ("model", "/model?window=1h&model=meta-llama/Llama-3.1-8B-Instruct&cls=chat&mode=eagle", False),
)}
SIZES = (("", 1440, 900), ("-phone", 390, 844))  # file name suffix, viewport


def admin_url() -> str:
    configured = os.environ.get("SPECWATCH_DATABASE_URL")
    return dbsupport.with_db(configured, "postgres") if configured else dbsupport.admin_url()


def take(dash_url: str, out: Path, chromium: str, token: str | None = None, shots=SHOTS, tag: str = "") -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, width, height in SIZES:
        written += _take_size(dash_url, out, chromium, token, suffix, width, height, shots, tag)
    return written


def _take_size(dash_url: str, out: Path, chromium: str, token: str | None, suffix: str, width: int,
               height: int, shots=SHOTS, tag: str = "") -> list[Path]:
    written = []
    with browser_context(chromium, width=width, height=height) as ctx:
        page = ctx.new_page()
        if token:
            login(page, dash_url, token)
        for name, path, dark in shots:
            page.goto(dash_url + path)
            wait_idle(page)
            if dark != page.is_checked("#theme-switch"):
                page.click("#theme-switch")
                wait_idle(page)
            page.mouse.wheel(0, 4000)  # graphs below the fold render when scrolled to
            page.wait_for_timeout(1200)
            page.mouse.wheel(0, -4000)
            page.wait_for_timeout(300)
            target = out / f"{name}{tag}{suffix}.png"
            page.screenshot(path=str(target), full_page=True)
            written.append(target)
            print(f"wrote {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
    return written


DEMO_LINE = re.compile(r"^\s+(dashboard|api|token)\s+(\S+)")


def _get_json(url: str, token: str) -> object:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def _engines_shown(api: str, token: str) -> bool:
    """Every engine of the scenario has a fleet row with data (its acceptance counted or estimated)."""
    try:
        rows = _get_json(f"{api}/api/v1/fleet?window=1h", token)["rows"]
    except OSError:
        return False
    seen = {e for r in rows for e in r.get("engines", [])
            if r.get("acceptance_rate") is not None or r.get("acceptance_rate_estimate") is not None}
    return seen >= {"vllm", "llamacpp", "sglang"}


def from_demo(a: argparse.Namespace) -> int:
    """Start `specwatch demo` in a process group of its own, wait for its incident's alert to fire, take
    the pages, stop the group (only the group this function started)."""
    admin = admin_url()
    name = f"specwatch_demo_shots_{uuid.uuid4().hex[:8]}"
    db_url = dbsupport.create_database(admin, name)
    data_dir = Path(tempfile.mkdtemp(prefix="specwatch-demo-shots-"))
    ports = [str(free_port()) for _ in range(4)]
    cmd = [sys.executable, "-m", "backend.cli", "demo", "--no-browser", "--history-hours", f"{a.hours:g}",
           "--api-port", ports[0], "--dashboard-port", ports[1], "--sim-port", ports[2],
           "--receiver-port", ports[3], *(["--scenario", a.scenario] if a.scenario else [])]
    env = {**os.environ, "SPECWATCH_DATABASE_URL": db_url,
           "SPECWATCH_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    log = data_dir / "demo.out"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        found: dict[str, str] = {}
        deadline = time.monotonic() + a.demo_timeout
        while len(found) < 3:
            if proc.poll() is not None or time.monotonic() > deadline:
                print(log.read_text()[-3000:], file=sys.stderr)
                print("the demo did not print its URLs", file=sys.stderr)
                return 1
            for line in log.read_text().splitlines():
                m = DEMO_LINE.match(line)
                if m:
                    found[m.group(1)] = m.group(2)
            time.sleep(1)
        api = found["api"].removesuffix("/api/v1/health")
        if a.scenario:  # a scenario's fleet as it is once every engine's pools have rows (no incident waited for)
            print(f"demo up: {found['dashboard']}; waiting for the {a.scenario} fleet's rows")
            while not _engines_shown(api, found["token"]):
                if proc.poll() is not None or time.monotonic() > deadline:
                    print(log.read_text()[-3000:], file=sys.stderr)
                    print("the scenario's pools never showed", file=sys.stderr)
                    return 1
                time.sleep(5)
            take(found["dashboard"].rstrip("/"), a.out, a.chromium, shots=SCENARIO_SHOTS[a.scenario],
                 tag=f"-{a.scenario}")
            return 0
        print(f"demo up: {found['dashboard']}; waiting for the incident's alert to fire")
        while True:
            alerts = _get_json(f"{api}/api/v1/alerts", found["token"])
            firing = [x for x in alerts if x.get("phase") == "firing" and x.get("rule") == "alpha-low"]
            if firing:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                print(log.read_text()[-3000:], file=sys.stderr)
                print("alpha-low never fired in the demo", file=sys.stderr)
                return 1
            time.sleep(5)
        take(found["dashboard"].rstrip("/"), a.out, a.chromium)
        return 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # the demo stops its children on Ctrl-C
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        if a.keep_db:
            print(f"kept database {db_url} and {data_dir}")
        else:
            dbsupport.drop_database(admin, name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeded", action="store_true", help="seeded history and evaluated rules, no demo")
    ap.add_argument("--hours", type=float, default=3.0, help="hours of simulated history")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--keep-db", action="store_true")
    ap.add_argument("--scenario", choices=sorted(SCENARIO_SHOTS), default=None,
                    help="the demo on this scenario: its overview and model page as <page>-<scenario>.png")
    ap.add_argument("--demo-timeout", type=float, default=1800.0,
                    help="seconds to wait for the demo to come up and its incident to fire")
    a = ap.parse_args()
    if not Path(a.chromium).exists():
        print(f"no Chromium at {a.chromium} (Debian package `chromium`); cannot take screenshots", file=sys.stderr)
        return 1
    if not a.seeded:
        return from_demo(a)
    admin = admin_url()
    name = f"specwatch_shots_{uuid.uuid4().hex[:8]}"
    url = dbsupport.create_database(admin, name)
    try:
        migrate(url)
        t0 = time.monotonic()
        seeding.seed_sim(url, hours=a.hours, tick=5.0)
        print(f"seeded {a.hours:g} h of simulated history in {time.monotonic() - t0:.0f} s")
        print(f"alert evaluation: {fire_alerts(url)}")
        token = make_token(url, "operator", "sre-oncall")
        with tempfile.TemporaryDirectory(prefix="specwatch-shots-") as logs:
            api, api_url = start_api(url, Path(logs))
            try:
                dash, dash_url = start_dashboard_auth(api_url, Path(logs))
                try:
                    take(dash_url, a.out, a.chromium, token)
                finally:
                    dash.stop()
            finally:
                api.stop()
    finally:
        if a.keep_db:
            print(f"kept database {url}")
        else:
            dbsupport.drop_database(admin, name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
