"""The weekly report of a seeded week against hand-computed numbers; Markdown golden file, CSV, PDF
(read back with pypdf) and the Slack digest through the outbox."""

from __future__ import annotations

import csv
import io
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pypdf import PdfReader

from backend.config import Settings
from backend.db import alert_repo
from backend.db.models_alerts import AlertStateRow, AlertTransition
from backend.db.models_rollout import RolloutEvent, RolloutTrack
from backend.notify.delivery import SecretBox, render
from backend.services import outbox, report, report_csv, report_digest, report_export, report_pdf
from tests.factories import make_pool

GOLDEN = Path(__file__).parent / "golden" / "weekly-2026-W48.md"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # Monday of W49: W48 is complete


def ts(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC)


def bucket(db, pool, start, drafts, accepted, k=3):
    from tests.factories import make_bucket

    try:  # the fact table is partitioned by day: past days need their partition first
        from backend.db.rollups import ensure_partitions
    except ImportError:
        pass
    else:
        ensure_partitions(db, {start.date()})
    make_bucket(db, pool, start, drafts=drafts, draft_tokens=drafts * k, accepted_tokens=accepted,
                accepted_per_pos=None)


def alert(db, rule, cls, spans):
    row = AlertStateRow(fingerprint=f"fp-{rule}-{cls}", rule=rule, kind="alpha_low", severity="ticket",
                        labels={"model": "acme-70b", "traffic_class": cls, "spec_mode": "eagle3"},
                        group_key="acme-70b", phase="resolved", notified_firing=True, firing_since=spans[0][0])
    alert_repo.add(db, row)
    for start, end in spans:
        alert_repo.add(db, AlertTransition(alert_id=row.id, at=start, from_phase="pending", to_phase="firing",
                                           status="breached", reason="alpha low"))
        alert_repo.add(db, AlertTransition(alert_id=row.id, at=end, from_phase="firing", to_phase="resolved",
                                           status="ok", reason="recovered"))


def track(db, scope, events):
    t = RolloutTrack(model_name="acme-70b", scope=scope, spec_mode="eagle3", stage=events[-1][2],
                     stage_since=events[-1][0], manual=False, gate_phase="running", reason="", created_at=events[0][0])
    alert_repo.add(db, t)
    for at, frm, to, kind, actor, action, why in events:
        alert_repo.add(db, RolloutEvent(track_id=t.id, at=at, kind=kind, action=action, from_stage=frm, to_stage=to,
                                        actor=actor, reason=why, values={"alpha": 0.5}))


def capacity_bucket(db, pool, start, tokens, running, **kw):
    from backend.db.rollups import ensure_partitions
    from tests.factories import make_bucket

    ensure_partitions(db, {start.date()})
    make_bucket(db, pool, start, generation_tokens=tokens, running_mean=running, accepted_per_pos=None, **kw)


# The capacity week, by hand (gamma-8b, chat; 2 replicas per pool, 4 GPUs per replica at 2.00 a GPU-hour, so a
# replica-hour costs 8.00). Each hour below holds 30 one-minute buckets, so each side spends 2 replicas x 1,800 s
# = 3,600 replica-seconds per hour; the bootstrap's time bins are the week's hours.
#   band 1-8 (6 running), Mon 23rd 10:00 and 11:00: spec 18,000 then 12,000 tokens a bucket, baseline 9,000 then
#     6,000. Spec: 900,000 tokens / 7,200 replica-s = 125 tok/s per replica -> 8 / (125 x 3600) x 1e6 = 17.78
#     per 1 M tokens; baseline 450,000 / 7,200 = 62.5 -> 35.56. Saving 0.9 M x (35.56 - 17.78) = 16.00.
#   band >128 (200 running), Tue 24th 14:00 and 15:00: spec 6,000 a bucket (50 tok/s per replica -> 44.44),
#     baseline 7,500 (62.5 -> 35.56): speculation loses here, 0.36 M x (35.56 - 44.44) = -3.20; it stops paying
#     from >128, significantly (both hours alike: every resample gives ratio 50 / 62.5 = 0.8).
#   Week: 16.00 - 3.20 = 12.80 saved; the spec pool's 1.26 M tokens cost 2 x 2 h x 8 = 32.00, i.e. 25.40 per
#     1 M against the baseline's 35.56 in the same bands. Per week = the week (a whole week: x 604,800 / 604,800).
#   Interval: only band 1-8 varies. Its two hourly bins resample to (bin 1, bin 1), (1, 2) or (2, 2), so the
#     replica-seconds per token run from 3,600/540,000 to 3,600/360,000 (spec) and 3,600/270,000 to
#     3,600/180,000 (baseline); each extreme pair has probability 1/16 > 2.5 %, so the 95 % interval's ends are
#     0.9 M x 8/3600 x (1/75 - 1/100) = 6.67 and 0.9 M x 8/3600 x (1/50 - 1/150) = 26.67, shifted by the
#     constant -3.20 of band >128: 3.47 to 23.47. The fleet total is gamma-8b's (the other models report no
#     generation tokens).
CAPACITY_HOURS = [(ts(23, 10), 6.0, 18_000, 9_000), (ts(23, 11), 6.0, 12_000, 6_000),
                  (ts(24, 14), 200.0, 6_000, 7_500), (ts(24, 15), 200.0, 6_000, 7_500)]


@pytest.fixture
def seeded(db):
    t_old = ts(1, 0)
    chat = make_pool(db, model_name="acme-70b", traffic_class="chat", first_seen=t_old)
    code = make_pool(db, model_name="acme-70b", traffic_class="code", first_seen=t_old)
    make_pool(db, model_name="acme-70b", traffic_class="chat", spec_mode="off")
    # W48 (Nov 23-30): chat 420/600 = 0.7 (two buckets), code 90/300 = 0.3 -> mixed 510/900
    bucket(db, chat, ts(24, 10), 100, 210)
    bucket(db, chat, ts(24, 10, 1), 100, 210)
    bucket(db, code, ts(25, 9), 100, 90)
    # W47: chat 180/300 = 0.6, code 120/300 = 0.4 -> mixed 0.5
    bucket(db, chat, ts(18, 10), 100, 180)
    bucket(db, code, ts(18, 10), 100, 120)
    # a second model with two drafters on chat: eagle3 (incumbent) 0.6, eagle3.1 0.7
    old = make_pool(db, model_name="beta-8b", traffic_class="chat", spec_mode="eagle3", first_seen=t_old)
    new = make_pool(db, model_name="beta-8b", traffic_class="chat", spec_mode="eagle3.1", first_seen=ts(20, 0))
    bucket(db, old, ts(26, 8), 100, 180)
    bucket(db, new, ts(26, 8), 100, 210)
    # a third model with a baseline and output-token counters: the capacity week (see CAPACITY_HOURS)
    g_spec = make_pool(db, model_name="gamma-8b", traffic_class="chat", spec_mode="eagle3", first_seen=t_old)
    g_base = make_pool(db, model_name="gamma-8b", traffic_class="chat", spec_mode="off", first_seen=t_old)
    for hour, running, spec_tokens, base_tokens in CAPACITY_HOURS:
        for minute in range(30):
            at = hour + timedelta(minutes=minute)
            capacity_bucket(db, g_spec, at, spec_tokens, running, drafts=100, draft_tokens=300, accepted_tokens=180)
            capacity_bucket(db, g_base, at, base_tokens, running)
    # alerts: one fired and resolved in W48 (2h30m), one fired in W47 and resolved 1h into W48
    alert(db, "alpha-low", "code", [(ts(24, 10), ts(24, 12, 30))])
    alert(db, "margin-negative", "chat", [(ts(22, 23), ts(23, 1))])
    track(db, "mixed", [(ts(20, 6), "spec_on", "measuring", "derived", "specwatch", None, "gate running"),
                        (ts(25, 6), "measuring", "gate_passed", "derived", "specwatch", None, "gate passed"),
                        (ts(26, 15), "gate_passed", "rolled_out", "manual", "alice", "sign_off", "P99 checked")])
    track(db, "code", [(ts(20, 6), "spec_on", "measuring", "derived", "specwatch", None, "gate running"),
                       (ts(25, 6), "measuring", "gate_failed", "derived", "specwatch", None, "alpha 0.300 < 0.55")])
    return db


@pytest.fixture
def settings() -> Settings:
    return Settings(_env_file=None, gpu_hour_price={"gamma-8b": 2.0}, gpus_per_replica={"*": 4},
                    pool_replicas={"gamma-8b": {"*": 2}})


def test_week_boundaries_follow_the_report_timezone():
    utc = report.week_range("2026-W48", "UTC")
    assert (utc.start, utc.end) == (ts(23, 0), ts(30, 0))
    berlin = report.week_range("2026-W48", "Europe/Berlin")
    assert berlin.start == ts(22, 23) and berlin.seconds == 7 * 86400
    assert report.previous_week("2026-W01") == "2025-W52"
    assert report.week_of(ts(30, 0, 30), "America/New_York") == "2026-W48"  # still Sunday there


def test_weekly_numbers_match_hand_computation(seeded, settings):
    r = report.weekly(seeded, week="2026-W48", now=NOW, settings=settings)
    assert [m["model"] for m in r["models"]] == ["acme-70b", "beta-8b", "gamma-8b"] and r["complete"]
    acme = r["models"][0]
    rows = {c["scope"]: c for c in acme["classes"]}
    assert rows["chat"]["alpha"] == pytest.approx(0.7) and rows["chat"]["alpha_prev"] == pytest.approx(0.6)
    assert rows["chat"]["alpha_delta"] == pytest.approx(0.1)
    assert rows["chat"]["tau"] == pytest.approx(1 + 420 / 200)
    assert rows["chat"]["margin"] == pytest.approx(0.7 - 0.2 / 3)  # eps default (no running data), K = 3
    assert rows["code"]["alpha"] == pytest.approx(0.3) and rows["code"]["alpha_prev"] == pytest.approx(0.4)
    assert rows["mixed"]["alpha"] == pytest.approx(510 / 900) and rows["mixed"]["alpha_prev"] == pytest.approx(0.5)
    assert rows["mixed"]["drafts"] == 300
    assert acme["alerts"]["fired"] == 1 and acme["alerts"]["seconds_in_alert"] == 2.5 * 3600 + 3600
    assert acme["stage"] == "rolled_out" and acme["step"] == 5
    assert {s["scope"]: (s["stage_at_start"], s["stage"]) for s in acme["scopes"]} == {
        "mixed": ("measuring", "rolled_out"), "code": ("measuring", "gate_failed")}
    assert [(c["scope"], c["to"]) for c in acme["changes"]] == [
        ("mixed", "gate_passed"), ("code", "gate_failed"), ("mixed", "rolled_out")]
    assert [(d["actor"], d["action"]) for d in acme["decisions"]] == [("alice", "sign_off")]
    assert [(p["scope"], p["stage"]) for p in acme["pending"]] == [("code", "gate_failed")]
    beta = r["models"][1]
    assert beta["stage"] == "untracked" and len(beta["drafters"]) == 2  # chat and mixed
    d = beta["drafters"][0]
    assert (d["scope"], d["reference"], d["challenger"]) == ("chat", "eagle3", "eagle3.1")
    assert d["alpha"] == [pytest.approx(0.6), pytest.approx(0.7)]
    assert d["tau"] == [pytest.approx(1 + 180 / 100), pytest.approx(1 + 210 / 100)]


def test_capacity_week_matches_hand_computation(seeded, settings):
    """The numbers of the comment above CAPACITY_HOURS."""
    r = report.weekly(seeded, week="2026-W48", now=NOW, settings=settings)
    gamma = next(m for m in r["models"] if m["model"] == "gamma-8b")
    (line,) = gamma["capacity"]["lines"]
    assert (line["scope"], line["spec_mode"]) == ("chat", "eagle3")
    assert line["per_replica"] == pytest.approx(1_260_000 / 14_400) and line["per_replica_baseline"] == pytest.approx(62.5)
    assert line["cost_per_mtok_spec"] == pytest.approx(32.0 / 1.26)
    assert line["cost_per_mtok_baseline"] == pytest.approx(8e6 / (62.5 * 3600))
    assert line["saved_this_week_so_far"] == pytest.approx(12.8) and "per_week_at_window_rate" not in line
    assert line["saved_this_week_so_far_low"] == pytest.approx(0.9e6 * 8 / 3600 * (1 / 75 - 1 / 100) - 3.2)
    assert line["saved_this_week_so_far_high"] == pytest.approx(0.9e6 * 8 / 3600 * (1 / 50 - 1 / 150) - 3.2)
    # 4 hours of 30 one-minute buckets: 7,200 s of data
    assert line["hours_of_data"] == pytest.approx(2.0) and line["label"] == "saved this week so far (2 h of data)"
    assert line["stops_paying_band"] == ">128" and line["stops_paying_significant"] is True
    total = gamma["capacity"]["total"]
    assert total["saved_this_week_so_far"] == pytest.approx(12.8) and total["hours_of_data"] == pytest.approx(2.0)
    assert r["currency"] == gamma["capacity"]["currency"] == total["currency"] == "USD"
    fleet = r["capacity_total"]
    assert fleet["saved_this_week_so_far"] == pytest.approx(12.8)
    assert fleet["saved_this_week_so_far_low"] == pytest.approx(line["saved_this_week_so_far_low"])
    assert fleet["label"] == "saved this week so far (2 h of data)" and fleet["currency"] == "USD"
    assert all(m["capacity"]["total"]["saved_this_week_so_far"] is None for m in r["models"] if m["model"] != "gamma-8b")
    assert all(m["capacity"]["total"]["hours_of_data"] is None for m in r["models"] if m["model"] != "gamma-8b")


def test_exports_markdown_golden_csv_and_pdf(seeded, settings):
    r = report.weekly(seeded, week="2026-W48", now=NOW, settings=settings)
    md = report_export.markdown(r)
    if os.environ.get("SPECWATCH_UPDATE_GOLDEN"):  # regenerate on purpose, then review the diff
        GOLDEN.write_text(md)
    assert md == GOLDEN.read_text()
    assert "resolved still firing" not in md and not re.search(r"\d\d:\d\d:\d\d", md)  # minutes, no raw ISO
    rows = list(csv.DictReader(io.StringIO(report_csv.csv_text(r))))
    acme = {x["scope"] or x["row"]: x for x in rows if x["model"] == "acme-70b"}
    assert float(acme["mixed"]["alpha"]) == pytest.approx(510 / 900) and acme["code"]["pending"] == "yes"
    assert acme["code"]["stage"] == "gate_failed" and acme["model total"]["alerts_fired"] == "1"
    assert acme["mixed"]["alerts_fired"] == acme["code"]["alerts_fired"] == ""  # the model's count, once
    pdf = PdfReader(io.BytesIO(report_pdf.pdf_bytes(r)))
    assert len(pdf.pages) == 1 + len(r["models"])  # summary page, then one page per model
    text = "\n".join(p.extract_text() for p in pdf.pages)
    assert "acme-70b" in text and "beta-8b" in text and "2026-W48" in text
    assert "acme-70b" in pdf.pages[1].extract_text() and "beta-8b" in pdf.pages[2].extract_text()
    model_page = pdf.pages[1].extract_text()
    assert "speedup" in model_page and "method" in model_page and "2.58" in model_page  # chat's speedup
    assert "eagle3-llama-70b" in model_page  # the drafter the pools report
    # the managers' total, hand-computed above
    assert "| fleet | 12.80 USD (2 h of data) | 3.47 USD to 23.47 USD |" in md
    # operating band: 1-8 and >128 hold 2 h of buckets each; a tie goes to the lower band. The margin's band is
    # that of the mean running requests (103: 33-128), shown next to margin and speedup
    assert ("| chat | eagle3 | 1-8 | 87.5 | 62.5 | 25.40 USD | 35.56 USD | 12.80 USD (2 h of data) | 3.47 USD to 23.47 USD "
            "| >128 |") in md
    assert "| 0.433 | 1.87 | 33-128 |" in md
    gamma_csv = {x["scope"] or x["row"]: x for x in rows if x["model"] == "gamma-8b"}
    assert float(gamma_csv["chat"]["saved_this_week_so_far (USD)"]) == pytest.approx(12.8)
    assert gamma_csv["chat"]["stops_paying_band"] == ">128"
    assert "12.80 USD (2 h of data)" in pdf.pages[0].extract_text() and "25.40 USD" in pdf.pages[3].extract_text()


def test_digest_goes_through_the_outbox_once_per_week(seeded, settings):
    box = SecretBox(settings.secret_key)
    ch = outbox.create_channel(seeded, name="mgmt", kind="slack", url="https://hooks.example/x", token=None,
                               options={}, matchers={}, box=box, now=NOW)
    outbox.create_channel(seeded, name="am", kind="alertmanager", url="https://am.example", token=None,
                          options={}, matchers={}, box=box, now=NOW)
    monday_early = datetime(2026, 11, 30, 8, 59, tzinfo=UTC)
    assert report_digest.send_digest(seeded, settings=settings, now=monday_early) == {"due": False}
    first = report_digest.send_digest(seeded, settings=settings, now=NOW)
    assert first == {"due": True, "week": "2026-W48", "enqueued": 1}
    assert report_digest.send_digest(seeded, settings=settings, now=NOW + timedelta(hours=1))["enqueued"] == 0
    msgs = [m for m in alert_repo.outbox(seeded) if m.kind == "digest"]
    assert len(msgs) == 1 and msgs[0].channel_id == ch.id
    body = render("slack", msgs[0].payload, idempotency_key=msgs[0].idempotency_key, options={})
    text = str(body)
    assert "weekly rollout report 2026-W48" in text and "acme-70b" in text
    assert "pending: code: stopped: acceptance below the gate; to do: disable speculation" in text
    assert "gate_failed" not in text and "rolled_out" not in text  # stages in words
    # gamma-8b's hand-computed week
    assert "saved this week so far (2 h of data): 12.80 USD (95 %: 3.47 USD to 23.47 USD)" in text
    tz = settings.model_copy(update={"report_timezone": "America/Los_Angeles", "digest_weekday": 1})
    assert report_digest.digest_due(NOW, tz) is None  # 04:00 Monday in Los Angeles: not yet 09:00


def test_csv_rows_never_repeat_a_parent_total(seeded, settings):
    """Per model: a class row per class x spec mode, a mixed row (ratios, no counts), a model total row; the
    additive columns of the class rows sum to the model total row, and a model's counts appear once."""
    r = report.weekly(seeded, week="2026-W48", now=NOW, settings=settings)
    rows = list(csv.DictReader(io.StringIO(report_csv.csv_text(r))))
    saved = "saved_this_week_so_far (USD)"
    by_model: dict[str, list[dict]] = {}
    for x in rows:
        by_model.setdefault(x["model"], []).append(x)
    assert {m: [x["row"] for x in xs] for m, xs in by_model.items()} == {
        "acme-70b": ["class", "class", "mixed", "model total"],
        "beta-8b": ["class", "class", "mixed", "model total"],  # chat runs two spec modes: a row each
        "gamma-8b": ["class", "mixed", "model total"]}
    # hand-computed totals: acme 200 + 100 drafts, beta 100 + 100, gamma 4 h x 30 buckets x 100
    want = {"acme-70b": (300, None, "1", "12600.0"), "beta-8b": (200, None, "0", "0.0"),
            "gamma-8b": (12_000, 12.8, "0", "0.0")}
    for model, xs in by_model.items():
        classes = [x for x in xs if x["row"] == "class"]
        (total,) = [x for x in xs if x["row"] == "model total"]
        drafts, money, fired, seconds = want[model]
        assert float(total["drafts"]) == sum(float(x["drafts"]) for x in classes) == drafts
        if money is None:
            assert total[saved] == "" and all(x[saved] == "" for x in classes)
        else:
            assert float(total[saved]) == pytest.approx(sum(float(x[saved]) for x in classes if x[saved]))
            assert float(total[saved]) == pytest.approx(money)
        assert (total["alerts_fired"], total["seconds_in_alert"]) == (fired, seconds)
        for x in xs:  # the model's counts and money sit on its total row only
            if x["row"] != "model total":
                assert x["alerts_fired"] == x["seconds_in_alert"] == "", (model, x["row"])
            if x["row"] == "mixed":
                assert x["drafts"] == "" and x[saved] == "" and x["alpha"] != ""
    assert [(x["spec_mode"], x["drafts"]) for x in by_model["beta-8b"] if x["row"] == "class"] == [
        ("eagle3", "100.0"), ("eagle3.1", "100.0")]
    assert rows[0].keys() >= {"row", saved, "cost_per_mtok_spec (USD)", "hours_of_data"}
    assert "model_stage" not in rows[0]


def test_the_demo_digest_covers_the_week_so_far(seeded, settings):
    """The demo's history is hours old, so last week is empty: its digest (SPECWATCH_DIGEST_WEEK=current)
    reports the current week so far, once."""
    from backend.cli.demo import DEMO_PACE

    assert DEMO_PACE["SPECWATCH_DIGEST_WEEK"] == "current"
    demo = Settings(_env_file=None, **{k.removeprefix("SPECWATCH_").lower(): v for k, v in DEMO_PACE.items()
                                       if k in ("SPECWATCH_DIGEST_WEEK", "SPECWATCH_DIGEST_CHECK_INTERVAL_SECONDS")})
    friday = datetime(2026, 11, 27, 20, 30, tzinfo=UTC)  # W48 holds the seeded data; W47 has less
    assert report_digest.digest_due(friday, settings) == "2026-W47"  # production: the complete week before
    assert report_digest.digest_due(friday, demo) == "2026-W48"
    box = SecretBox(settings.secret_key)
    outbox.create_channel(seeded, name="demo", kind="slack", url="https://hooks.example/x", token=None,
                          options={}, matchers={}, box=box, now=friday)
    assert report_digest.send_digest(seeded, settings=demo, now=friday) == {"due": True, "week": "2026-W48", "enqueued": 1}
    assert report_digest.send_digest(seeded, settings=demo, now=friday + timedelta(minutes=1))["enqueued"] == 0
    msg = next(m for m in alert_repo.outbox(seeded) if m.kind == "digest")
    assert msg.payload["title"] == "specwatch weekly rollout report 2026-W48 (week so far)"
    text = str(render("slack", msg.payload, idempotency_key=msg.idempotency_key, options={}))
    assert "alpha mixed 0.567" in text and "2026-11-27 20:30 UTC" in text  # as of when it was computed


def test_the_gate_is_each_class_threshold_of_the_alert_rules(seeded, settings, tmp_path):
    """The report states the gate the rollout applies: each scope's alpha_low threshold of the rules in force
    (code 0.45 in the example rules), on every surface, and draws each scope's own mark."""
    r = report.weekly(seeded, week="2026-W48", now=NOW, settings=settings)
    acme = next(m for m in r["models"] if m["model"] == "acme-70b")
    assert {c["scope"]: c["threshold"] for c in acme["classes"]} == {"chat": 0.55, "code": 0.45, "mixed": 0.55}
    gate = "alpha >= the class's alpha_low threshold (code 0.45; every other scope 0.55)"
    assert r["gate"] == gate
    assert f"Gate: {gate} on the production mix." in report_export.markdown(r)
    pdf = " ".join(" ".join(p.extract_text() for p in PdfReader(io.BytesIO(report_pdf.pdf_bytes(r))).pages).split())
    assert f"gate {gate}" in pdf
    one = settings.model_copy(update={"alert_rules_file": tmp_path / "none.yaml"})  # no rules: the default
    assert report.weekly(seeded, week="2026-W48", now=NOW, settings=one)["gate"] == "alpha >= 0.55"
