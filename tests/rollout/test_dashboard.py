"""The rollout, report and plan pages as plain functions, their API client calling the real app (on the
rollback-per-test session) through the ASGI transport."""

from __future__ import annotations

import re
from datetime import date

import pytest

from backend.db.models_rollout import RolloutEvent, RolloutTrack
from dashboard.api_client import REQUEST_HEADERS, ApiClient, weekly_export
from dashboard.app import create_app

APP = create_app("http://127.0.0.1:9")  # pages register on import, which needs the app first
from dashboard.pages import plan as plan_page
from dashboard.pages import report as report_page
from dashboard.pages import rollout as rollout_page
from tests.rollout.test_report import seeded  # noqa: F401  (fixture)
from tests.support.components import text as _text


@pytest.fixture
def api(client) -> ApiClient:
    return ApiClient("http://testserver", transport=client._transport)


def test_report_page_and_exports(api, seeded):  # noqa: F811
    body = report_page.render(api, "2026-W48", "light")
    text = _text(body)
    assert "acme-70b — rolled out" in text and "beta-8b" in text and "stopped: acceptance below the gate" in text
    assert "disable speculation or train a domain drafter" in text and "eagle3 → eagle3.1" in text
    # the week's drafter / K / vLLM changes head the page once; each model lists its rollout stage moves
    assert text.count("What changed this week") == 1 and text.count("Rollout stage changes") == 3
    fig = report_page.alpha_chart({"model": "m", "classes": [{"scope": "chat", "alpha": 0.7, "alpha_prev": None}]}, 0.55)
    assert list(fig.data[0].y) == [None] and list(fig.data[1].y) == [0.7]
    assert weekly_export(api, "2026-W48", "pdf").startswith(b"%PDF")
    weeks = report_page.week_options(date(2026, 11, 30), n=2)
    assert weeks == ["2026-W49", "2026-W48", "2026-W47"]


def test_rollout_page_and_transition_form(api, db, now):
    t = RolloutTrack(model_name="acme", scope="code", spec_mode="eagle3", stage="gate_failed", stage_since=now,
                     manual=False, gate_phase="failed", reason="gate failed: alpha 0.310 < 0.55", created_at=now,
                     last_values={"alpha": 0.31, "drafts": 50000})
    db.add(t)
    db.flush()
    db.add(RolloutEvent(track_id=t.id, at=now, kind="derived", from_stage="measuring", to_stage="gate_failed",
                        actor="specwatch", reason="gate failed", values={"alpha": 0.31}))
    db.flush()
    status, _, models, tracks, events, scopes = rollout_page.render(api, None)
    assert status is None and models == ["acme"] and scopes[0]["value"] == "acme|code"
    assert "stopped: acceptance below the gate  ⚑" in _text(tracks) and "0.310" in _text(tracks)
    assert "measuring acceptance → stopped: acceptance below the gate" in _text(events)
    given = REQUEST_HEADERS.set(None)  # the form's token alone, without the viewer's proxy header
    refused = rollout_page.apply_transition(api, "acme|code", "disable", "off for code", "sw_not-a-token")
    REQUEST_HEADERS.reset(given)
    assert "refused (401)" in _text(refused)
    assert "give a reason" in _text(rollout_page.apply_transition(api, "acme|code", "disable", " ", "x"))


def test_plan_page(api):
    status, _, md = plan_page.render(api, "acme", 5, "chat=0.7,code=0.3", 64, "chat=0.7,code=0.4")
    assert status is None and "**0.583**" in md
    # 3 decimals for rates, as every page writes them; 2 for tau and speedups: never 4
    assert not re.search(r"\d\.\d{4}", md), re.findall(r"\d+\.\d{4,}", md)
    status, _, md = plan_page.render(api, "acme", 5, "chat=0.7,oops", 64, "")
    assert "expected name=value" in _text(status) and md == ""
