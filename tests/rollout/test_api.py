"""Rollout, report and schedule surfaces: reads open, writes need the operator role; exports by format."""

from __future__ import annotations

import io

from pypdf import PdfReader

from backend.config import Settings
from backend.db.models_rollout import RolloutTrack
from tests.rollout.test_report import seeded  # noqa: F401  (fixture)
from workers.schedule import beat_schedule

OPERATOR = {"X-Forwarded-User": "alice", "X-Forwarded-Role": "operator"}
VIEWER = {"X-Forwarded-User": "vic", "X-Forwarded-Role": "viewer"}


def test_transition_needs_an_operator_and_is_audited(client, anonymous, db, now):
    db.add(RolloutTrack(model_name="acme", scope="code", spec_mode="eagle3", stage="gate_failed", stage_since=now,
                        manual=False, gate_phase="failed", reason="", created_at=now, last_values={"alpha": 0.31}))
    db.flush()
    body = {"model": "acme", "scope": "code", "action": "disable", "reason": "disabled for code traffic"}
    assert anonymous.post("/api/v1/rollout/transitions", json=body).status_code == 401
    assert client.post("/api/v1/rollout/transitions", json=body, headers=VIEWER).status_code == 403
    res = client.post("/api/v1/rollout/transitions", json=body, headers=OPERATOR)
    assert res.status_code == 201, res.text
    ev = res.json()
    assert (ev["from_stage"], ev["to_stage"], ev["actor"], ev["values"]["alpha"]) == ("gate_failed", "disabled", "alice", 0.31)
    tracks = client.get("/api/v1/rollout", params={"model": "acme"}).json()
    assert tracks["tracks"][0]["stage"] == "disabled" and tracks["tracks"][0]["manual"]
    assert "cumulative" in tracks["semantics"]["failure_limit"]
    events = client.get("/api/v1/rollout/events", params={"model": "acme", "scope": "code"}).json()
    assert [e["reason"] for e in events] == ["disabled for code traffic"]
    bad = client.post("/api/v1/rollout/transitions", headers=OPERATOR,
                      json={**body, "action": "sign_off", "reason": "x"})
    assert bad.status_code == 422 and "not allowed" in bad.json()["detail"]
    missing = client.post("/api/v1/rollout/transitions", headers=OPERATOR, json={**body, "scope": "chat"})
    assert missing.status_code == 404


def test_report_json_and_exports(client, seeded):  # noqa: F811
    r = client.get("/api/v1/reports/weekly", params={"week": "2026-W48"})
    assert r.status_code == 200 and [m["model"] for m in r.json()["models"]] == ["acme-70b", "beta-8b", "gamma-8b"]
    assert r.json()["capacity_total"]["saved_this_week_so_far"] is None  # the app's settings carry no GPU-hour price
    md = client.get("/api/v1/reports/weekly/export", params={"week": "2026-W48", "format": "md"})
    assert md.headers["content-type"].startswith("text/markdown") and "## acme-70b" in md.text
    assert 'filename="specwatch-2026-W48.md"' in md.headers["content-disposition"]
    csv = client.get("/api/v1/reports/weekly/export", params={"week": "2026-W48", "format": "csv"})
    assert csv.text.splitlines()[0].startswith("week,model,row,scope")
    pdf = client.get("/api/v1/reports/weekly/export", params={"week": "2026-W48", "format": "pdf"})
    assert len(PdfReader(io.BytesIO(pdf.content)).pages) == 4
    assert client.get("/api/v1/reports/weekly", params={"week": "2026-W99"}).status_code == 422
    assert client.get("/api/v1/reports/weekly", params={"week": "2027-W02"}).status_code == 422  # future
    assert client.get("/api/v1/reports/weekly").json()["week"] == "2026-W48"  # default: last complete week


def test_beat_entries_registered_and_expire_before_next_run():
    from workers.celery_app import app

    app.loader.import_default_modules()
    s = Settings(_env_file=None, rollout_eval_interval_seconds=300, digest_check_interval_seconds=900)
    entries = beat_schedule(s)
    for name, period in (("derive-rollout-stages", 300), ("send-weekly-digest", 900)):
        assert entries[name]["task"] in app.tasks
        assert entries[name]["options"]["expires"] < period
    assert app.tasks["specwatch.rollout.evaluate"].acks_late
