"""Regenerate docs/screenshots/*.png (`make screenshots`), every page at 1440x900 (<page>.png) and on a
phone at 390x844 (<page>-phone.png), plus the overview in the dark theme: a throwaway database seeded with simulated
history through the collector code, the alert rules evaluated on it (alerts.example.yaml), the real API and
dashboard (both with token authentication, logged in as an operator) as child processes, headless Chromium.

    python scripts/screenshots.py [--hours 3] [--out docs/screenshots] [--keep-db]

The database server is the one in SPECWATCH_DATABASE_URL (a new database is created on it and dropped
afterwards; the configured database itself is never written), else the test server on 127.0.0.1 (or the
embedded PostgreSQL when nothing answers there).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from backend.cli.serve import migrate
from tests.dashboard import seeding
from tests.dashboard.alerting_stack import fire_alerts, login, make_token, start_dashboard_auth
from tests.dashboard.browser import browser_context, start_api, wait_idle
from tests.support import db as dbsupport

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
SIZES = (("", 1440, 900), ("-phone", 390, 844))  # file name suffix, viewport


def admin_url() -> str:
    configured = os.environ.get("SPECWATCH_DATABASE_URL")
    return dbsupport.with_db(configured, "postgres") if configured else dbsupport.admin_url()


def take(dash_url: str, out: Path, chromium: str, token: str | None = None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix, width, height in SIZES:
        written += _take_size(dash_url, out, chromium, token, suffix, width, height)
    return written


def _take_size(dash_url: str, out: Path, chromium: str, token: str | None, suffix: str, width: int,
               height: int) -> list[Path]:
    written = []
    with browser_context(chromium, width=width, height=height) as ctx:
        page = ctx.new_page()
        if token:
            login(page, dash_url, token)
        for name, path, dark in SHOTS:
            page.goto(dash_url + path)
            wait_idle(page)
            if dark != page.is_checked("#theme-switch"):
                page.click("#theme-switch")
                wait_idle(page)
            page.mouse.wheel(0, 4000)  # graphs below the fold render when scrolled to
            page.wait_for_timeout(1200)
            page.mouse.wheel(0, -4000)
            page.wait_for_timeout(300)
            target = out / f"{name}{suffix}.png"
            page.screenshot(path=str(target), full_page=True)
            written.append(target)
            print(f"wrote {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")
    return written


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=3.0, help="hours of simulated history")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--keep-db", action="store_true")
    a = ap.parse_args()
    if not Path(a.chromium).exists():
        print(f"no Chromium at {a.chromium} (Debian package `chromium`); cannot take screenshots", file=sys.stderr)
        return 1
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
