"""The A/B page and the weekly report's opening section draw the API's numbers and verdicts as they are."""

from __future__ import annotations

import json

from dashboard.api_client import compare_params
from dashboard.pages import compare, report

RESULT = {
    "model": "llama-70b", "mode": "side-by-side", "sentence": "EAGLE-3.1 vs EAGLE-3 on llama-70b: speedup +25 % (12–40 %) "
    "on chat; saving per week n/a (no GPU price or replica count)", "method": "load-matched",
    "a": {"label": "EAGLE-3", "start": "2026-11-30T11:00:00+00:00", "end": "2026-11-30T12:00:00+00:00"},
    "b": {"label": "EAGLE-3.1", "start": "2026-11-30T11:00:00+00:00", "end": "2026-11-30T12:00:00+00:00"},
    "scopes": [{"scope": "chat", "bands": ["1-8"], "notes": ["band 9-32 left out: fewer than 4 time bins on a side"],
                "metrics": [{"metric": "alpha", "a": 0.5, "b": 0.6, "change": 0.2, "change_low": 0.151,
                             "change_high": 0.251, "verdict": "better", "reason": "+20.0 % (+15.1 to +25.1 %)"}],
                "p99": {"tpot": {"verdict": "inconclusive", "reason": "no histogram on a side", "a": None, "b": None},
                        "itl": {"verdict": "worse", "reason": "B slower", "a": 0.05, "b": 0.075}}}],
}


def _text(component) -> str:
    return json.dumps(component.to_plotly_json(), default=lambda o: o.to_plotly_json(), ensure_ascii=False)


def test_compare_page_shows_sentence_intervals_and_verdicts():
    text = _text(compare.body(RESULT))
    assert RESULT["sentence"] in text
    assert "+20 % (15–25 %)" in text and "0.500" in text and "0.600" in text
    assert "bands compared: 1-8" in text and "band 9-32 left out" in text
    assert "75.0 ms" in text  # P99 ITL of B


def test_compare_params_keep_only_given_fields():
    assert compare_params("m", " eagle3 ", "", None, "7d") == {"model": "m", "a": "eagle3", "range": "7d"}


def test_report_opens_with_what_changed():
    r = {"what_changed": [{"at": "2026-11-30T11:04:00+00:00", "model": "llama-70b", "spec_mode": "eagle3",
                           "classes": ["chat"], "what": "K 4 -> 3", "sentence": "K 3 vs K 4 on llama-70b: ...",
                           "verdicts": {"alpha": {"verdict": "better", "text": "+20 % (15–25 %)"},
                                        "measured_speedup": {"verdict": "better", "text": "+25 % (12–40 %)"},
                                        "p99_tpot": {"verdict": "inconclusive"}}}]}
    text = _text(report.what_changed(r))
    assert "What changed this week" in text and "K 4 -> 3" in text and "llama-70b eagle3 (chat)" in text
    assert "K 3 vs K 4 on llama-70b" in text
    assert "no drafter, K or vLLM version change this week" in _text(report.what_changed({"what_changed": []}))
