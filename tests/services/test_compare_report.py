"""The weekly report opens with "What changed this week": a K change (collection's or annotated) with its
before/after verdicts, hand-computed (the same bins as tests/support/compare_seed.py, before and after)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from pypdf import PdfReader

from backend.config import Settings
from backend.db import config_repo
from backend.services import report, report_csv, report_export, report_pdf
from tests.factories import make_bucket, make_pool

ACC = ((1500, 1560, 1440, 1500), (1800, 1860, 1740, 1800))  # alpha 0.5 before, 0.6 after: +20 % (15-25 %)
TPOT = ((2.0, 2.2, 1.8, 2.0), (1.6, 1.76, 1.44, 1.6))  # speedup 1.5 -> 1.875: +25 % (12-40 %)


def test_what_changed_opens_the_report(db, now):
    s = Settings(_env_file=None, report_timezone="UTC")
    t0 = now - timedelta(hours=1)
    spec = make_pool(db, model_name="llama-70b", spec_mode="eagle3", num_spec_tokens=3, first_seen=t0, last_seen=t0)
    base = make_pool(db, model_name="llama-70b", spec_mode="off", first_seen=t0, last_seen=t0)
    for half in (0, 1):
        for i in range(4):
            start = t0 + timedelta(minutes=4 * half + i)
            a = ACC[half][i]
            make_bucket(db, spec, start, running_mean=4.0, drafts=1000.0, draft_tokens=3000.0, accepted_tokens=float(a),
                        accepted_per_pos=[a * 0.5, a * 0.3, a * 0.2], tpot_sum=TPOT[half][i], tpot_count=100.0,
                        generation_tokens=2500.0)
            make_bucket(db, base, start, running_mean=4.0, tpot_sum=3.0, tpot_count=100.0, generation_tokens=1000.0)
    at = t0 + timedelta(minutes=4)
    config_repo.record(db, pool_id=spec.id, at=at, field="num_spec_tokens", old="4", new="3", source="collection",
                       now=now)
    r = report.weekly(db, week="2026-W49", now=now, settings=s)
    (item,) = r["what_changed"]
    assert (item["model"], item["spec_mode"], item["classes"], item["what"]) == ("llama-70b", "eagle3", ["chat"], "K 4 -> 3")
    v = item["verdicts"]
    assert v["alpha"]["verdict"] == v["measured_speedup"]["verdict"] == "better"
    assert v["alpha"]["change_low"] == pytest.approx(0.15103205641598513, rel=1e-9)
    assert v["measured_speedup"]["change_high"] == pytest.approx(0.3997618635963519, rel=1e-9)
    assert v["p99_tpot"]["verdict"] == "inconclusive"  # no TPOT histograms stored here
    md = report_export.markdown(r)
    head = md.split("| model | stage |")[0]  # before the summary table: the report opens with it
    assert "## What changed this week" in head
    assert ("- 2026-11-30 11:04 llama-70b eagle3 (chat): K 4 -> 3: alpha +20 % (15–25 %) (better); "
            "speedup +25 % (12–40 %) (better); P99 TPOT inconclusive; P99 ITL inconclusive") in head
    assert "  K 3 vs K 4 on llama-70b: speedup +25 % (12–40 %) on chat;" in head
    # the model's own list of rollout stage moves has its own heading: "What changed this week" once
    assert md.count("What changed this week") == 1 and "\nRollout stage changes:\n- nothing\n" in md
    pdf = "\n".join(p.extract_text() for p in PdfReader(io.BytesIO(report_pdf.pdf_bytes(r))).pages)
    assert pdf.count("What changed this week") == 1 and "Rollout stage changes:" in pdf
    rows = list(csv.DictReader(io.StringIO(report_csv.csv_text(r))))
    change = rows[0]  # the report opens with what changed, in the CSV too
    assert (change["row"], change["model"], change["spec_mode"], change["scope"], change["what"],
            change["change_source"]) == ("change", "llama-70b", "eagle3", "chat", "K 4 -> 3", "collection")
    assert change["at"] == item["at"] and change["sentence"] == item["sentence"]
    for key in ("alpha", "measured_speedup"):  # the same numbers as the JSON (and the page)
        got = [change[f"{key}_change{x}"] for x in ("", "_low", "_high")]
        want = [v[key][f"change{x}"] for x in ("", "_low", "_high")]
        assert [float(g) if g else None for g in got] == want, key
        assert change[f"{key}_change_verdict"] == v[key]["verdict"]
    assert "cost_per_mtok" not in v and change["cost_per_mtok_change"] == change["cost_per_mtok_change_verdict"] == ""
    assert float(change["alpha_change_low"]) == pytest.approx(0.15103205641598513, rel=1e-9)
    assert change["p99_tpot_change_verdict"] == change["p99_itl_change_verdict"] == "inconclusive"
    assert [x["row"] for x in rows[1:]] == ["class", "mixed", "model total"]
