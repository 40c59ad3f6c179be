"""Decisions show their evidence: the rollout API and page stamp every value with its window and
evaluation time, name stages in words, explain every check that could not judge; the weekly report (web,
Markdown, PDF, digest) opens with one summary table and names no raw stage identifier; the PDF draws no
bar for an n/a value and its table headers fit their columns."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime, timedelta

import pytest
from pypdf import PdfReader

from backend.config import Settings
from backend.domain import rollout as ro
from backend.domain import wording
from backend.services import report, report_export, report_pdf, report_wording, rollout
from dashboard.api_client import ApiClient
from dashboard.app import create_app

APP = create_app("http://127.0.0.1:9")  # pages register on import, which needs the app first
from dashboard.pages import report as report_page
from dashboard.pages import rollout as rollout_page
from tests.rollout.test_dashboard import _text
from tests.rollout.test_report import NOW, seeded, settings  # noqa: F401  (fixtures)

RAW_STAGE = re.compile(r"\b(" + "|".join(s for s in ro.STAGES if "_" in s) + r")\b")


@pytest.fixture
def api(client) -> ApiClient:
    return ApiClient("http://testserver", transport=client._transport)


def _evaluated(db, now: datetime) -> dict:
    """One real evaluation (the worker's) of the seeded fleet at `now`: the six hours before hold no data,
    so the drafter's gate cannot measure (error) and no baseline reported (latency error)."""
    s = Settings(_env_file=None)
    return rollout.evaluate(db, settings=s, now=now)


def test_rollout_api_stamps_window_and_evaluation_time(client, seeded, now):  # noqa: F811
    _evaluated(seeded, now)
    body = client.get("/api/v1/rollout", params={"model": "acme-70b"}).json()
    assert body["window_seconds"] == 6 * 3600 and body["eval_interval_seconds"] == 900
    code = next(t for t in body["tracks"] if t["scope"] == "code")
    end = datetime.fromisoformat(code["window_end"])
    assert end == now and datetime.fromisoformat(code["window_start"]) == now - timedelta(hours=6)
    assert datetime.fromisoformat(code["last_eval_at"]) == now
    assert code["stage"] == "spec_on" and code["stage_text"] == "drafter on, gate not started"
    # both checks could not judge: each says why and what to do
    assert code["gate_result"] == "error" and code["gate_reason"] == "no spec-decode data in the window"
    assert "collector" in code["gate_explanation"] and "resumes when data arrives" in code["gate_explanation"]
    assert code["latency_result"] == "error" and "specwatch rollout snapshot --model acme-70b" in code["latency_explanation"]


def test_rollout_page_shows_stamps_words_and_explanations(api, seeded, now):  # noqa: F811
    _evaluated(seeded, now)
    status, _, _, tracks, events, scopes = rollout_page.render(api, "acme-70b")
    text = _text(tracks)
    assert status is None
    # "over 6 h to 12:00 UTC, evaluated 12:00 UTC", with the date when it is not today; the period above
    clock = now.strftime("%H:%M UTC") if now.date() == datetime.now(UTC).date() else now.strftime("%b %d %H:%M UTC")
    stamp = f"over 6 h to {clock}, evaluated {clock}"
    assert stamp in text
    assert "each evaluation measures the last 6 h, every 15 min" in text
    assert "drafter on, gate not started" in text and "cannot measure" in text
    assert "check that the collector scrapes it" in text and "specwatch rollout snapshot" in text
    for part in (text, _text(events), " ".join(s["label"] for s in scopes)):
        assert not RAW_STAGE.search(part), RAW_STAGE.search(part)
    assert "rolled out" in _text(events) and "stopped: acceptance below the gate" in _text(events)
    # an operator's action reads in words too, in the track's reason
    rollout.transition(seeded, model="acme-70b", scope="code", action="disable", reason="code off for now",
                       actor="alice", now=now, settings=Settings(_env_file=None))
    _, _, _, tracks, events, _ = rollout_page.render(api, "acme-70b")
    assert "turned speculation off by alice: code off for now" in _text(tracks)
    assert "speculation turned off" in _text(tracks) and "by an operator" in _text(events)
    assert "disable by" not in _text(tracks) and not RAW_STAGE.search(_text(tracks) + _text(events))


def test_every_result_that_cannot_judge_is_explained():
    """Each gate and latency reason the domain writes for error / inconclusive has an explanation that
    says what to do; pass and fail need none (their reason says it)."""
    pol = ro.GatePolicy(min_drafts=1000)
    cases = [ro.Facts(baseline=True, spec=True, error="timeout"), ro.Facts(baseline=True, spec=True),
             ro.Facts(baseline=True, spec=True, spec_data=True, drafts=10),
             ro.Facts(baseline=True, spec=True, spec_data=True, drafts=5000, alpha=None),
             ro.Facts(baseline=False, spec=True, spec_data=True, drafts=5000, alpha=0.7),
             ro.Facts(baseline=True, spec=True, spec_data=True, drafts=5000, alpha=0.7, latency_verdict="unresolved",
                      latency_reason="both P99s in (10, 25] ms")]
    seen = set()
    for f in cases:
        for check, res in (("gate", ro.measure_gate(f, pol)), ("latency", ro.measure_latency(f))):
            if res.result in ("error", "inconclusive"):
                why = wording.explain(check, res.result, res.reason)
                assert why and len(why) > len(res.reason or ""), (check, res)
                seen.add((check, res.result))
            else:
                assert wording.explain(check, res.result, res.reason) is None
    assert seen == {("gate", "error"), ("gate", "inconclusive"), ("latency", "error"), ("latency", "inconclusive")}
    assert "timeout" in wording.explain("gate", "error", "query failed: timeout")
    assert "one histogram bucket" in wording.explain("latency", "inconclusive", "P99 TPOT unresolved: x")
    held = ro.measure_latency(cases[-1])
    assert held.reason == "P99 TPOT too close to tell: both P99s in (10, 25] ms"
    assert "one histogram bucket" in wording.explain("latency", held.result, held.reason)
    assert "a person does" in wording.explain("latency", held.result, held.reason)
    assert wording.check_text("latency", held.result, held.reason) == "too close to tell"
    assert wording.check_text("gate", "inconclusive", "12 drafts < volume guard 1000") == "too little data"
    assert set(wording.STAGE_WORDS) >= set(ro.STAGES) and set(wording.RESULT_WORDS) == set(ro.RESULTS)


def test_stamp_and_span_text():
    end = datetime(2026, 12, 4, 20, 15, tzinfo=UTC)
    assert wording.stamp(end - timedelta(hours=6), end, end, now=end + timedelta(minutes=10)) == \
        "over 6 h to 20:15 UTC, evaluated 20:15 UTC"
    assert wording.stamp(end - timedelta(hours=6), end, end, now=end + timedelta(days=1), every_seconds=900) == \
        "over 6 h to Dec 04 20:15 UTC, evaluated Dec 04 20:15 UTC (every 15 min)"
    assert wording.span_text(5400) == "1 h 30 min" and wording.span_text(7 * 86400) == "7 d"


def test_report_surfaces_share_the_summary_table_and_use_words(api, seeded, settings):  # noqa: F811
    r = report.weekly(seeded, week="2026-W48", now=NOW, settings=settings)
    rows = r["summary"]["rows"]
    assert r["summary"] == report_wording.summary_table(r) and rows[0][:3] == ["acme-70b", "vLLM", "rolled out"]
    md = report_export.markdown(r)
    for row in rows:  # the Markdown opens with exactly these rows
        assert "| " + " | ".join(row) + " |" in md
    pdf = PdfReader(io.BytesIO(report_pdf.pdf_bytes(r)))
    first = " ".join(pdf.pages[0].extract_text().split())
    for row in rows:
        assert " ".join(row) in first, row
    body, _ = report_page.render(api, "2026-W48", "light")
    web = _text(body)
    assert " ".join(report_wording.summary_table(r)["head"]) in web  # the web page's summary table
    for row in rows:
        assert " ".join(row) in web, row
    assert "Values over the whole week" in web and r["stamp"] in md and "Values over the whole week" in first
    pdf_text = "\n".join(p.extract_text() for p in pdf.pages)
    for surface in (md, pdf_text, web):
        assert not RAW_STAGE.search(surface), RAW_STAGE.search(surface)
        assert "sign_off" not in surface and "rolled out" in surface
    assert "signed off by alice" in md and "signed off by alice" in web


def test_report_in_progress_says_when_it_was_computed(seeded, settings):  # noqa: F811
    at = datetime(2026, 11, 26, 15, 30, tzinfo=UTC)
    r = report.weekly(seeded, week="2026-W48", now=at, settings=settings)
    assert r["stamp"] == ("Values over 3 d 15 h 30 min so far, 2026-11-23 00:00 to 2026-11-26 15:30 (UTC), computed "
                          "2026-11-26 15:30; the week is in progress, so they still change; stages as at that time.")


def test_pdf_draws_no_bar_for_na_and_says_why(seeded, settings):  # noqa: F811
    assert report_pdf.chart_data([0.5, None], [None, 0.7]) == [[0.5, None], [None, 0.7]]
    r = report.weekly(seeded, week="2026-W48", now=NOW, settings=settings)
    pdf = PdfReader(io.BytesIO(report_pdf.pdf_bytes(r)))
    first = pdf.pages[0].extract_text()
    # beta-8b and gamma-8b measured nothing last week: n/a in the table, no "0.00" bar label, the note
    assert "0.00" not in first and report_pdf.NA_NOTE.split(":")[0] in " ".join(first.split())
    drawings = [f for f in report_pdf.pdf_story(r, 500) if type(f).__name__ == "Drawing"]
    bars = drawings[0].contents[0]
    assert bars.data == [[0.5, None, None], [pytest.approx(510 / 900), 0.7, 0.6]]


def test_pdf_table_headers_fit_their_columns(seeded, settings):  # noqa: F811
    """Every word of every table cell fits its column (cells wrap at spaces, so a word wider than its
    column would run into the next one)."""
    from reportlab.pdfbase.pdfmetrics import stringWidth
    from reportlab.platypus import Table

    r = report.weekly(seeded, week="2026-W48", now=NOW, settings=settings)
    tables = [f for f in report_pdf.pdf_story(r, 515) if isinstance(f, Table)]
    assert len(tables) >= 6
    for t in tables:
        for i, row in enumerate(t._cellvalues):
            font = report_pdf.PDF_FONT + ("-Bold" if i == 0 else "")
            for width, cell in zip(t._colWidths, row):
                text = " ".join(frag.text for frag in cell.frags)
                for word in text.split():
                    w = stringWidth(word, font, report_pdf.PDF_SIZE)
                    assert w <= width - 2 * report_pdf.PDF_PAD, (word, w, width)
    cap = next(t for t in tables if "tokens/s per replica" in " ".join(
        " ".join(f.text for f in c.frags) for c in t._cellvalues[0]))
    assert len(cap._colWidths) == len(cap._cellvalues[0])
