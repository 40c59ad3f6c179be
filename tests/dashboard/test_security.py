"""Security headers on the dashboard (a CSP that lets only Dash's own inline scripts run), a session cookie
that is Secure off loopback, and Markdown grid cells that a model name cannot turn into a link of its own."""

from __future__ import annotations

import re

import flask
import pytest
from markdown_it import MarkdownIt

from dashboard import auth, state
from dashboard.app import create_app as create_dashboard
from dashboard.pages import overview
from dashboard.settings import DashboardSettings, from_env, secure_cookie
from tests.dashboard import fakes


def test_dashboard_pages_carry_a_csp_that_allows_only_dashs_own_inline_scripts():
    app = create_dashboard("http://127.0.0.1:9", DashboardSettings())
    page = app.server.test_client().get("/")
    assert page.status_code == 200
    assert page.headers["X-Frame-Options"] == "DENY" and page.headers["X-Content-Type-Options"] == "nosniff"
    csp = page.headers["Content-Security-Policy"]
    script_src = re.search(r"script-src ([^;]+)", csp).group(1).split()
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src
    assert script_src[0] == "'self'" and len(script_src) >= 2  # the renderer's start-up and clientside callbacks
    assert "frame-ancestors 'none'" in csp
    assert app.server.test_client().get("/_dash-layout").headers["X-Frame-Options"] == "DENY"


def test_a_model_name_cannot_become_a_link_in_the_overview_grid():
    evil = "evil](https://attacker.example) [x"
    rows = overview.rows(fakes.fleet([fakes.fleet_row(model_name=evil, traffic_class="a_b*[c]")]),
                         state.View(window="24h"))
    md = MarkdownIt("commonmark")
    for cell in (rows[0]["model_link"], rows[0]["class_link"]):
        links = re.findall(r'href="([^"]*)"', md.render(cell))
        assert len(links) == 1 and links[0].startswith(("/model?", "/acceptance?")), md.render(cell)
    assert ">evil](https://attacker.example) [x</a>" in md.render(rows[0]["model_link"])


@pytest.mark.parametrize("env,host,secure", [
    ({}, "127.0.0.1", False), ({}, "localhost", False), ({}, "::1", False), ({}, "0.0.0.0", True),
    ({}, "10.0.0.5", True), ({"SPECWATCH_DASHBOARD_SECURE_COOKIE": "false"}, "0.0.0.0", False),
    ({"SPECWATCH_DASHBOARD_SECURE_COOKIE": "true"}, "127.0.0.1", True),
])
def test_the_session_cookie_is_secure_unless_on_loopback(env, host, secure):
    assert secure_cookie(from_env(env), host) is secure


def test_the_flask_session_cookie_follows_the_setting():
    try:
        for flag in (True, False):
            app = create_dashboard("http://127.0.0.1:9", DashboardSettings(auth="token", secure_cookie=flag))
            assert app.server.config["SESSION_COOKIE_SECURE"] is flag
    finally:  # the auth settings are the process's: leave no login requirement to the next test file
        auth.install(flask.Flask("reset"), DashboardSettings())
