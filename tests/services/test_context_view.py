"""The wording of α by context length (one for the model page, the report page and the exports) and the
report's Markdown and CSV of it, on a hand-made model section."""

from __future__ import annotations

import csv
import io

from backend.domain import context_view as cv
from backend.services import report_csv, report_wording

BAND = {"prompt_tokens_from": 1024, "prompt_tokens_to": 2047, "requests": 2, "drafts": 6, "draft_tokens": 18,
        "accepted_tokens": 15, "draft_token_weighted_alpha": 15 / 18,
        "draft_token_weighted_alpha_interval": [0.5066727, 1.0], "request_weighted_alpha": 15 / 18,
        "request_weighted_alpha_interval": [0.5066727, 1.0]}
TOP = {"prompt_tokens_from": 131072, "prompt_tokens_to": None, "requests": 1, "drafts": 3, "draft_tokens": 9,
       "accepted_tokens": 3, "draft_token_weighted_alpha": 1 / 3, "draft_token_weighted_alpha_interval": [None, None],
       "request_weighted_alpha": 1 / 3, "request_weighted_alpha_interval": [None, None]}


def _model(sections):
    return {"model": "m1", "by_context_length": sections}


def test_bands_and_alpha_read_alike_everywhere():
    assert cv.band_text(BAND) == "1,024–2,047" and cv.band_text(TOP) == "131,072+"
    assert cv.band_text({"prompt_tokens_from": 0, "prompt_tokens_to": 1}) == "0–1"
    assert cv.band_row("chat", "eagle3", BAND) == ["chat", "eagle3", "1,024–2,047", "2", "6", "0.833 (0.507–1.000)",
                                                   "0.833 (0.507–1.000)"]
    assert cv.alpha_text(1 / 3, [None, None]) == "0.333 (one request: no interval)"
    assert cv.alpha_text(None, [None, None]) == "n/a" and cv.alpha_text(None, None, none="—") == "—"


def test_markdown_has_the_table_and_a_sentence_for_a_class_without_prompt_tokens():
    lines = report_wording.context_lines(_model([{"scope": "chat", "spec_mode": "eagle3", "bands": [BAND, TOP]},
                                                 {"scope": "code", "spec_mode": "eagle3", "bands": []}]))
    assert lines[1] == "α by context length:"
    assert "| chat | eagle3 | 131,072+ | 1 | 3 | 0.333 (one request: no interval) | 0.333 (one request: no " \
           "interval) |" in lines
    assert f"- code eagle3: {cv.NO_PROMPT_TOKENS}" in lines
    only_empty = report_wording.context_lines(_model([{"scope": "code", "spec_mode": "eagle3", "bands": []}]))
    assert only_empty == ["", "α by context length:", "", f"- code eagle3: {cv.NO_PROMPT_TOKENS}"]
    assert report_wording.context_lines(_model([])) == []  # no per-request records: no section


def test_csv_rows_carry_the_api_fields_intervals_split():
    rows = report_csv.context_rows({"week": "2026-W48", "model": "m1"}, _model(
        [{"scope": "chat", "spec_mode": "eagle3", "bands": [BAND, TOP]}]))
    assert [r["row"] for r in rows] == ["context band", "context band"]
    first, top = rows
    assert (first["prompt_tokens_from"], first["prompt_tokens_to"], first["drafts"]) == (1024, 2047, 6)
    assert (first["draft_token_weighted_alpha_low"], first["draft_token_weighted_alpha_high"]) == (0.5066727, 1.0)
    assert top["prompt_tokens_to"] == "" and top["request_weighted_alpha_low"] == ""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=report_csv.CSV_FIELDS, extrasaction="raise")
    w.writeheader()
    w.writerows(rows)  # every key is a CSV column
    assert set(report_csv.CONTEXT_CSV) <= set(report_csv.CSV_FIELDS)
