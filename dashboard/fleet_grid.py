"""The fleet overview's grid columns (AG Grid column definitions): what each column shows, its header tooltip,
and its formatter written in JavaScript (d3-format), so the browser formats, sorts and filters the numbers."""

from __future__ import annotations

from backend.domain import money
from dashboard import formatting as fm

NULL = "params.value == null"
# the window's rate, and the alert's short-window rate beside it when the row has an alpha alert
ALERT_ALPHA = ("(params.value == null ? '—' : d3.format('.3f')(params.value)) + (params.data.alert_alpha == null "
               "? '' : ' · ' + params.data.alert_window + ' ' + d3.format('.3f')(params.data.alert_alpha))")
NUM = {"filter": "agNumberColumnFilter", "type": "rightAligned",
       "tooltipValueGetter": {"function": f"{NULL} ? 'no data' : undefined"}}


def _text_first(col: dict) -> dict:
    """A column whose row may carry `<field>_text` (a figure the row's engine does not expose, or an
    estimate): that text instead of the number, its basis as the cell's tooltip."""
    field, fmt = col["field"], col["valueFormatter"]["function"]
    return {**col, "valueFormatter": {"function": f"params.data.{field}_text != null ? params.data.{field}_text : "
                                          f"({fmt})"},
            "tooltipValueGetter": {"function": f"params.data.{field}_tip || ({NULL} ? 'no data' : undefined)"}}


def _num(field: str, header: str, spec: str, tip: str, suffix: str = "", scale: float = 1, **kw) -> dict:
    value = f"params.value * {scale}" if scale != 1 else "params.value"
    fmt = f"{NULL} ? '—' : d3.format('{spec}')({value}) + '{suffix}'"
    return {"field": field, "headerName": header, "headerTooltip": tip, "valueFormatter": {"function": fmt},
            **NUM, **kw}


def _money_col(field: str, header: str, tip: str) -> dict:
    """Money: sorted by its value, shown as domain.money.money_text wrote it (with the currency)."""
    return {**_num(field, header, ",.2f", tip, width=120),
            "valueFormatter": {"function": f"{NULL} ? '—' : params.data.{field}_text"}}


STATE_RULES = {"sw-state-cell": "true", **fm.tone_rules(fm.STATES, lambda key, _t: f"params.data.state == '{key}'")}
VERDICT_RULES = fm.tone_rules(fm.VERDICTS, lambda _k, text: f"params.value && params.value.endsWith('{text}')")
VERDICT_TIP = (f"P99 spec vs baseline from histogram bucket edges: {fm.VERDICTS['worse'][1]} / "
               f"{fm.VERDICTS['better'][1]} (different buckets, beyond noise), {fm.VERDICTS['unresolved'][1]} (both in "
               "one bucket: below the resolution); hover a cell for its reason")
# an interpolated delta that rounds to zero reads "0.0 ms", never "−0.0 ms"
ZERO_MS = {"valueFormatter": {"function": f"{NULL} ? '—' : Math.abs(params.value * 1000) < 0.05 ? '0.0 ms' : "
                                          "d3.format('+.1f')(params.value * 1000) + ' ms'"}}
# What an SRE reads first sits left and fits 1440 px without scrolling the grid: state, model, class,
# alpha, margin and both latency verdicts (then the trend and the detail columns).
COLUMNS = [
    {"field": "state_text", "headerName": "state", "cellClassRules": STATE_RULES, "pinned": "left", "width": 310,
     "filter": "agTextColumnFilter", "tooltipField": "state_title",
     "headerTooltip": "firing / pending (an alert of the pool: its rule, value vs threshold) / speedup below 1× (measured) / "
                      "below threshold (this class's alpha_low threshold) / stale / low volume / no data / healthy"},
    {"field": "model_link", "headerName": "model", "cellRenderer": "markdown", "pinned": "left", "width": 150,
     "filter": "agTextColumnFilter", "tooltipField": "model_name"},
    {"field": "class_link", "headerName": "class", "cellRenderer": "markdown", "width": 100,
     "filter": "agTextColumnFilter", "headerTooltip": "traffic class; 'mixed' pools the counters of all classes"},
    {"field": "engine_text", "headerName": "engine", "width": 110, "filter": "agTextColumnFilter",
     "tooltipField": "engine_tip",
     "headerTooltip": "the inference engine of the row's pools: vLLM and llama.cpp give exact counters, SGLang "
                      "only estimates from gauges (marked 'estimated', never summed with exact figures)"},
    _text_first({**_num("acceptance_rate", "accept. rate r", ".3f", "draft acceptance rate A/D over the window "
                        "(depends on K); with an alpha alert, its short window's rate now after it (· 5m 0.393); "
                        "'estimated': SGLang's gauges, not counters", width=150),
                 "valueFormatter": {"function": ALERT_ALPHA}}),
    _text_first(_num("margin", "margin", "+.3f", "seed alpha − ε_step/K (negative: by step cost, speculation is slower than plain decoding)",
         width=185)),
    {"field": "itl_verdict", "headerName": "P99 ITL verdict", "width": 205, "cellClassRules": VERDICT_RULES,
     "tooltipField": "itl_reason", "headerTooltip": "P99 inter-token latency (per engine step): " + VERDICT_TIP},
    {"field": "tpot_verdict", "headerName": "P99 TPOT verdict", "width": 205, "cellClassRules": VERDICT_RULES,
     "tooltipField": "tpot_reason", "headerTooltip": "P99 time per output token: " + VERDICT_TIP},
    {"field": "spark", "headerName": "acceptance, 24 h", "cellRenderer": "Sparkline", "width": 140,
     "sortable": False, "cellDataType": False, "filter": False,
     "headerTooltip": "acceptance rate over the last 24 h up to now: 30-min steps, the last hour in 5-min steps "
                      "(drawn wider, after the faint mark), from the first step with data; dashed: this class's "
                      "threshold"},
    _num("estimated_speedup", "est. speedup", ".2f", "τ/(1+ε_step); ε_step: mean ITL spec/baseline − 1 in the same band, else the band default", "×", width=100),
    _num("break_even_alpha", "break-even α", ".3f", "ε_step/K: seed alpha below which speculation loses", width=105),
    _text_first(_num("mean_acceptance_length", "τ", ".2f", "mean acceptance length 1 + A/N (tokens per verify step)",
                     width=90)),
    _money_col("saved_in_window", money.SAVED_IN_WINDOW, "what speculation saved over the window: replica-hours "
               "the baseline would need for the same output tokens in the same concurrency band, minus those used, "
               "times the GPU-hour price, in the configured currency (negative: a loss; blank: no baseline, price or "
               "replica count; model page: interval and bands)"),
    _money_col("per_week_at_window_rate", money.PER_WEEK_AT_WINDOW_RATE, "what speculation saved in the window, "
               "extrapolated to 7 days at the window's rate (a 1 h and a 24 h window give different figures)"),
    {"field": "spec_mode", "headerName": "mode", "width": 90},
    {"field": "num_spec_tokens", "headerName": "K", "width": 60, "headerTooltip": "num_speculative_tokens",
     "valueFormatter": {"function": f"{NULL} ? '—' : params.value"}, **NUM},
    _num("p99_itl_delta", "P99 ITL Δ (per step)", "+.1f", "P99 inter-token latency spec − baseline, per engine "
         "step (chunk): it normally rises under spec decoding", " ms", 1000, width=130, **ZERO_MS),
    _num("p99_tpot_delta", "P99 TPOT Δ (per token)", "+.1f", "P99 time per output token spec − baseline, per "
         "token: it should fall", " ms", 1000, width=130, **ZERO_MS),
    {"field": "concurrency_band", "headerName": "band", "width": 90,
     "headerTooltip": "concurrency band: mean running requests"},
    _text_first(_num("drafts", "drafts", ",.0f", "verify steps with drafts in the window (volume)", width=100)),
    {"field": "freshness_text", "headerName": "last data", "width": 170},
]
