"""Figures and page callbacks as plain functions with a fake API client: nulls stay nulls, labels say what
they measure, and a dead backend gives a plain banner."""

from __future__ import annotations

from dash import no_update

from backend.domain import wording
from backend.schemas.summary import ResolutionAdviceRead
from dashboard import capacity_view, figures, fleet_grid, model_kpis, state
from dashboard import components as c
from dashboard import formatting as fm
from dashboard.app import refresh_settings, window_sync
from dashboard.pages import acceptance, calculator, model, overview, report
from tests.dashboard import fakes
from tests.dashboard.fakes import FakeClient
from tests.support.components import text as _text


def test_null_is_a_dash_with_a_no_data_tooltip_never_zero():
    assert fm.fmt_rate(None) == "—" and fm.fmt_rate(0.0) == "0.000"
    span = c.value(fm.fmt_rate(None))
    assert span.children == "—" and span.title == "no data"
    assert fm.fmt_ms(0.0123, signed=True) == "+12.3 ms" and fm.fmt_speedup(1.6) == "1.60×"


def test_state_badges_carry_icon_and_text_not_colour_alone():
    for key, (icon, text, _) in fm.STATES.items():
        badge = c.state_badge(key, 0.55)
        assert icon in _text(badge) and text in _text(badge)


def test_overview_rows_keep_nulls_and_link_to_the_model_page():
    rows = overview.rows(fakes.fleet([fakes.fleet_row(), fakes.fleet_row(traffic_class="rag", state="stale",
                                                                         acceptance_rate=None)]),
                         state.View(window="24h"))
    assert rows[0]["acceptance_rate"] == 0.7 and rows[0]["p99_tpot_delta"] is None
    assert rows[0]["state_text"] == "✔ healthy" and rows[0]["itl_verdict"] == "✖ slower than baseline"
    assert "/model?window=24h&model=m&cls=chat" in rows[0]["model_link"]
    assert rows[1]["acceptance_rate"] is None and rows[1]["freshness_text"].startswith("no data since")
    assert rows[0]["spark"] == [None]


def test_overview_render_counts_states():
    _status, retry_off, kpis, rows, style, cards, pager, _ = overview.render(FakeClient(fleet_rows=[
        fakes.fleet_row(), fakes.fleet_row(traffic_class="code", state="negative-margin")]), state.View())
    assert retry_off is True and len(rows) == 2 and "height" in style and pager == {"display": "none"}
    assert "speedup below 1× 1" in _text(kpis) and "healthy 1" in _text(kpis)
    # the phone layout: one card per row, most urgent first, the class on each, the state as icon + text in its tone
    assert len(cards) == 2 and "sw-tone-vermillion-edge" in cards[0].className
    assert "code" in _text(cards[0]) and "✖" in _text(cards[0]) and "speedup below 1×" in _text(cards[0])
    assert "sw-tone-green-edge" in cards[1].className


def test_overview_renders_cards_only_for_a_narrow_screen_and_at_most_card_rows():
    """The cards cost the browser ~10 ms per component: none on a wide screen (the grid shows), and on a
    phone the CARD_ROWS most urgent rows, then a line saying how many the grid or the filter shows."""
    client = FakeClient(fleet_rows=[fakes.fleet_row(model_name=f"m-{i:03d}", state=("healthy", "stale")[i % 2 == 1
                                                                                             and i > 40])
                                    for i in range(60)])
    wide = overview.render(client, state.View(), narrow=False)
    assert len(wide[3]) == 60 and wide[5] == []
    cards = overview.render(client, state.View(), narrow=True)[5]
    assert len(cards) == overview.CARD_ROWS + 1
    stale = [c for c in cards[:-1] if "sw-tone-green-edge" not in c.className]
    assert len(stale) == 10 and cards[:10] == stale  # the 10 stale rows (41, 43, ..., 59) come first
    assert _text(cards[-1]).startswith(f"{overview.CARD_ROWS} of 60 rows shown, most urgent first")


def test_overview_shows_both_window_savings_named_and_in_their_currency():
    _status, _retry, _kpis, rows, _style, _cards, _pager, _text = overview.render(FakeClient(fleet_rows=[
        fakes.fleet_row(saved_in_window=12.8, per_week_at_window_rate=2150.4, currency="EUR"),
        fakes.fleet_row(traffic_class="code", currency="EUR")]), state.View())
    by_class = {r["traffic_class"]: r for r in rows}
    assert by_class["chat"]["per_week_at_window_rate"] == 2150.4  # the /fleet row's figures (GET /capacity/fleet)
    assert by_class["chat"]["saved_in_window"] == 12.8
    assert by_class["chat"]["saved_in_window_text"] == "12.80 EUR"
    assert by_class["chat"]["per_week_at_window_rate_text"] == "2,150.40 EUR"
    assert by_class["code"]["per_week_at_window_rate"] is None  # none on the row: blank, never 0
    heads = {col.get("field"): col["headerName"] for col in fleet_grid.COLUMNS}
    assert heads["saved_in_window"] == "saved in this window"
    assert heads["per_week_at_window_rate"] == "per week at this window's rate"


def test_model_page_shows_capacity_and_where_speculation_stops_paying():
    body = capacity_view.render_capacity(FakeClient(), state.View(model="m", cls="chat"))
    text = _text(body)
    # saved in this window, its interval, per week at this window's rate: named, in the API's currency
    assert "saved in this window 12.80 EUR (95 %: 3.47 EUR to 23.47 EUR)" in text
    assert "per week at this window's rate 2,150.40 EUR" in text and "17.78 EUR" in text
    assert "125.0" in text and "62.5" in text and "17.78" in text  # the band's throughput and cost
    assert ">128" in text and "stops paying from" in text


def test_overview_of_a_large_fleet_shows_pages_most_urgent_first():
    n = overview.PAGE_ROWS * 2 + 200
    states = ("healthy", "stale", "negative-margin")
    fleet_rows = [fakes.fleet_row(model_name=f"m-{i:05d}", state=states[i % 3]) for i in range(n)]
    client = FakeClient(fleet_rows=fleet_rows)
    _s, _r, kpis, rows, _style, cards, pager, text = overview.render(client, state.View())
    assert len(rows) == overview.PAGE_ROWS and len(cards) == overview.CARD_ROWS + 1 and pager == {"display": "flex"}
    assert text == f"rows 1–{overview.PAGE_ROWS} of {n:,} · most urgent first"
    assert f"rows {n}" in _text(kpis) and f"speedup below 1× {n // 3}" in _text(kpis)  # the whole fleet
    assert {r["state"] for r in rows} == {"negative-margin"}  # the most urgent fill the first page
    page = {"offset": overview.PAGE_ROWS * 2, "q": None}
    *_, last_rows, _style, _cards, _pager, last_text = overview.render(client, state.View(), page)[:8]
    assert len(last_rows) == 200 and {r["state"] for r in last_rows} == {"healthy"}
    assert last_text.startswith(f"rows {overview.PAGE_ROWS * 2 + 1:,}–{n:,} of {n:,}")
    found = overview.render(client, state.View(), {"offset": 0, "q": "m-0004"})
    assert {r["model_name"] for r in found[3]} == {f"m-0004{i}" for i in range(10)}
    assert "10 matching" in found[7] and [c for c in client.calls if c[0] == "fleet"][-1][-1] == ("sort", "state")


def test_a_dead_backend_gives_the_banner_and_keeps_the_last_numbers():
    out = c.guarded(lambda: overview.render(FakeClient(down=True), state.View()), n_outputs=8)
    assert "backend unreachable — retrying" in _text(out[0])
    assert out[1] is False  # the retry timer runs
    assert out[2:] == (no_update,) * 6


def test_acceptance_page_draws_every_class_threshold_and_break_even():
    client = FakeClient()
    _status, _, models, chosen, table, chart, _tau, modes, mode = acceptance.render(client, state.View(), "light")
    assert chosen == "m" and models == ["m", "z-old"] and modes == ["eagle3"] and mode == "eagle3"
    names = [t.name for t in chart.data]
    # the mix first (underneath, translucent), then the class on top; a break-even line per class and the mix
    assert names[:2] == ["mixed (pooled) K=3", "chat K=3"] and chart.data[0].opacity < 1
    assert list(chart.data[1].y) == [0.7, None, 0.72]  # a gap stays a gap
    lines = {t.name: t for t in chart.data[2:]}
    assert set(lines) == {"break-even chat 0.100", "break-even mixed 0.100"}
    assert all(t.line.dash == "dot" for t in lines.values())
    assert all(t.line.dash != "dot" for t in chart.data[:2])  # a class at α = 0 never looks like break-even
    assert lines["break-even chat 0.100"].line.color == chart.data[1].line.color
    texts = [a.text for a in chart.layout.annotations]
    assert any("threshold r = 0.55" in t for t in texts)
    assert "0.700" in _text(table)
    shown = _text(table.children[1].children[0].children[1])  # chat's state: icon + text, as on the overview
    assert "✔" in shown and "healthy" in shown


def test_acceptance_page_empty_pool_says_since_when():
    status, *_ = acceptance.render(FakeClient(quiet=True), state.View(model="m"), "light")
    assert "no data for m" in _text(status) and "since" in _text(status)


def test_model_page_labels_itl_per_step_and_tpot_per_token():
    out = model.render(FakeClient(), state.View(model="m", cls="chat"), "dark")
    kpis, itl = out[6], out[9]
    assert "P99 ITL Δ (per step)" in _text(kpis) and "P99 TPOT Δ (per token)" in _text(kpis)
    assert "per engine step" in itl.layout.annotations[0].text or "per engine step" in itl.layout.yaxis.title.text
    assert out[7].layout.template.layout.paper_bgcolor is not None


def test_model_page_names_a_speedup_disagreement_as_a_finding():
    check = {"estimated": 1.76, "measured": 1.4545, "ratio": 1.21, "ratio_low": 1.19, "ratio_high": 1.23, "bins": 8,
             "verdict": "disagree", "reason": "the estimate from step time is 21.0 % above the measured speedup, "
             "beyond their uncertainty (1.190-1.230, 8 time bins): something other than step cost is at work"}
    row = fakes.class_row(eps_step=0.25, eps_effective=0.5125, estimated_speedup=1.76, measured_speedup=1.4545,
                          speedup_margin=0.4545, concurrency_band="1-8", speedup_check=check)
    summary = fakes.summary([row])
    kpis = model_kpis.kpis(summary.classes[0], summary)
    text = _text(kpis)
    assert "Finding: speedup estimate ≠ measured." in text and "1.76× against 1.45× measured" in text
    assert "ε_step 0.25 (measured from ITL vs baseline)" in text and "Effective overhead τ/S − 1 = 0.51" in text
    assert "estimate ≠ measured (finding)" in text and "business: S − 1 = +0.45" in text
    agree = fakes.summary([fakes.class_row(speedup_check=dict(check, verdict="agree", reason="within"))])
    assert "Finding" not in _text(model_kpis.kpis(agree.classes[0], agree))
    default = fakes.summary([fakes.class_row(eps_step=0.2, eps_step_source="default-for-band")])
    assert "ε_step 0.20 (band default, 9-32)" in _text(model_kpis.kpis(default.classes[0], default))


def test_figures_per_position_and_latency():
    fig = figures.per_position(fakes.summary().classes[0])
    assert list(fig.data[0].y) == [0.86, 0.8, None]
    assert "i.i.d." in fig.data[2].name  # the model reference is labelled as such
    slices = [fakes.summary()]
    assert "no ITL per engine step" in figures.latency_over_time(slices, "chat", "itl").layout.annotations[0].text


def test_window_control_and_url_stay_in_sync():
    # the control changed: write the URL, keep the model
    search, *_ = window_sync("window-select", "?window=1h&model=m", "7d", None, None)
    assert state.parse_search(search) == state.View(window="7d", model="m")
    # the URL changed (a link, back button): the control follows
    _, shown, style, *_ = window_sync("url", "?window=30d", "1h", None, None)
    assert shown == "30d" and style == {"display": "none"}
    search, *_ = window_sync("window-custom-apply", "?window=1h", "custom", "2026-11-30T08:00", "2026-11-30T09:00")
    assert "start=2026-11-30T08%3A00%3A00Z" in search


def test_refresh_is_configurable_and_pausable():
    assert refresh_settings("30", False, False)[:3] == (30000, False, "❚❚ pause")
    _interval, disabled, label, data = refresh_settings("30", False, True)
    assert disabled is True and label == "▶ resume" and data == {"paused": True}
    assert refresh_settings("off", False, False)[1] is True


def test_calculator_numbers_come_from_the_calc_api():
    class CalcClient:
        def __init__(self):
            self.ops = []

        def calc(self, op, body):
            from backend.schemas.calc import CalcRead

            self.ops.append(op)
            values = {"speedup": {"speedup": 4.0909, "tokens_per_step": 4.5, "margin_alpha": 0.68},
                      "breakeven": {"alpha_breakeven": 0.02},
                      "required-alpha": {"alpha_required": 0.24 if getattr(body, "speedup", 0) == 2 else 0.46},
                      "mix": {"mixed_alpha": 0.583, "share_weighted_mean_of_class_alphas": 0.61, "speedup": 3.5}}[op]
            inputs = {"classes": [{"name": "A", "alpha": 0.7, "share": 0.7}], "basis": "requests"}
            return CalcRead(operation=op, inputs=inputs, values=values)

    client = CalcClient()
    kpis, _curve, mix = calculator.render(client, 0.7, 5, 0.1, 0.7, 0.4, "light")
    assert "4.09×" in _text(kpis) and "0.240" in _text(kpis) and "0.583" in _text(kpis)
    assert set(client.ops) == {"speedup", "breakeven", "required-alpha", "mix"}
    assert "share-weighted mean (wrong)" in list(mix.data[0].x)


def _p99_row(verdict: dict, spec=(0.02485, 0.01, 0.025), base=(0.0099, 0.0, 0.01)) -> dict:
    side = lambda v: {"value": v[0], "bucket_low": v[1], "bucket_high": v[2]}
    return {"metric": "tpot", "label": "per token", "bucket_bounds": [0.01, 0.025, 0.05],
            "quantiles": [{"q": 0.99, "spec": side(spec), "baseline": side(base), "delta": spec[0] - base[0],
                           "verdict": verdict}]}


def _by_id(component, id_: str):
    """The component with `id_` inside a Dash component tree (None: not there)."""
    if isinstance(component, (list, tuple)):
        return next((f for x in component if (f := _by_id(x, id_)) is not None), None)
    if component is None or isinstance(component, (str, bool, int, float)):
        return None
    if getattr(component, "id", None) == id_:
        return component
    return _by_id(getattr(component, "children", None), id_)


def test_model_card_shows_the_verdicts_interval_reason_and_buckets():
    """The P99 card's figure is the overview's point delta (same API value, same formatting: never
    "−0.0 ms"); the verdict's interval is named apart ("interval …"), with its badge, its one-line reason
    and each side's point value next to its bucket; unresolved gets its own badge."""
    why = "P99 (10, 25] ms vs (0, 10] ms: spec slower by 0 to 25 ms; above 10 ms: spec 100 %, baseline 0 %"
    worse = {"verdict": "worse", "reason": why, "delta_low": 0.0, "delta_high": 0.025, "spec_bucket_low": 0.01,
             "spec_bucket_high": 0.025, "base_bucket_low": 0.0, "base_bucket_high": 0.01}
    same = {"verdict": "unresolved", "reason": "change below the histogram's resolution: both P99s in (10, 25] ms",
            "delta_low": -0.015, "delta_high": 0.015, "spec_bucket_low": 0.01, "spec_bucket_high": 0.025,
            "base_bucket_low": 0.01, "base_bucket_high": 0.025}
    s = fakes.summary([fakes.class_row(tpot=_p99_row(worse),
                                       itl={**_p99_row(same, base=(0.02485, 0.01, 0.025)), "metric": "itl"})])
    cards = model_kpis.kpis(s.classes[0], s)
    text = _text(cards)
    assert _text(_by_id(cards, "md-kpi-p99-tpot")) == "+14.9 ms" == fm.fmt_delta_ms(0.02485 - 0.0099)
    assert _text(_by_id(cards, "md-interval-tpot")) == "interval 0 to +25 ms"
    assert _text(_by_id(cards, "md-kpi-p99-itl")) == "0.0 ms"  # a zero delta, as the overview grid writes it
    assert _text(_by_id(cards, "md-interval-itl")) == "interval −15 to +15 ms"
    assert "✖ slower than baseline" in text and why in text
    assert "spec 24.9 ms in (10, 25] ms · baseline 9.9 ms in (0, 10] ms" in text
    assert "⇅ too close to tell" in text and "−0.0" not in text
    assert fm.fmt_delta_ms(-0.00004) == "0.0 ms" and fm.fmt_delta_ms(-0.0146) == "−14.6 ms"
    assert fm.fmt_delta_ms(None) == "—"
    assert fm.fmt_interval(None, -0.025) == "≤ −25 ms" and fm.fmt_interval(0.079975, None) == "≥ +79.975 ms"
    assert fm.fmt_interval(-0.0, 0.0) == "0 to 0 ms" and fm.fmt_bucket(80.0, None) == "(80000 ms, +Inf)"
    advice = {"family_key": "inter_token_latency", "metrics": ["ITL"], "buckets": [(0.01, 0.025)],
              "default_layout": True, "bounds": [0.01, 0.013], "flag": "--custom-histogram-buckets 'X'",
              "text": "ITL P99 ... with --custom-histogram-buckets 'X': the same bounds ..."}
    s = s.model_copy(update={"resolution_advice": [ResolutionAdviceRead(**advice)]})
    alert = model_kpis.advice(s)
    assert len(alert) == 1 and "--custom-histogram-buckets 'X'" in _text(alert) and "below the histogram" in _text(alert)


def test_unresolved_has_its_own_badge_and_overview_class():
    """The verdict's words come from the one mapping (backend.domain.wording); its meaning and reason are
    the tooltip (title) and the text of a native disclosure (tap, Enter): the API's value is unchanged."""
    badge = c.verdict_badge("unresolved", "both P99s in (10, 25] ms")
    summary, why = badge.children
    assert type(badge).__name__ == "Details" and type(summary).__name__ == "Summary"
    assert "⇅" in _text(summary) and "too close to tell" in _text(summary) and "unresolved" not in _text(badge)
    meaning = wording.VERDICT_WORDS["unresolved"][1]
    assert summary.title == f"{meaning}. both P99s in (10, 25] ms" == _text(why)
    assert fleet_grid.VERDICT_RULES["sw-tone-blue"] == "(params.value && params.value.endsWith('too close to tell'))"
    rows = overview.rows(fakes.fleet([fakes.fleet_row(p99_tpot_verdict="unresolved", p99_tpot_reason="why")]),
                         state.View(window="1h"))
    assert rows[0]["tpot_verdict"] == "⇅ too close to tell" and rows[0]["tpot_reason"] == f"{meaning}. why"
    for key, (icon, text, _) in fm.VERDICTS.items():  # one mapping: the badges' words are the exports' words
        assert text == wording.verdict_text(key) and fm.label(fm.VERDICTS, key) == f"{icon} {text}"
    assert "'" not in "".join(t for _, t, _ in fm.VERDICTS.values())  # the grid's JS rules quote them


class _Reports:
    """The weekly report API: the last complete week empty (a new install), the week in progress with data."""

    def __init__(self, week_with_data: str):
        self.week_with_data, self.asked = week_with_data, []

    def _request(self, method, path, params=None):
        week = params["week"]
        self.asked.append(week)
        cls = {"scope": "mixed", "spec_mode": "eagle3", "drafter": None, "alpha": None, "alpha_prev": None,
               "alpha_delta": None, "tau": None, "margin": None, "speedup": None, "drafts": None,
               "tpot_p99_verdict": None, "itl_p99_verdict": None}
        if week == self.week_with_data:
            cls = {**cls, "alpha": 0.61, "tau": 2.9, "margin": 0.4, "speedup": 1.84, "drafts": 900,
                   "tpot_p99_verdict": "better"}
        money = {"saved_this_week_so_far": 12.8, "saved_this_week_so_far_low": 3.47, "saved_this_week_so_far_high": 23.47,
                 "hours_of_data": 3.0, "currency": "EUR", "label": "saved this week so far (3 h of data)"}
        line = {"scope": "chat", "spec_mode": "eagle3", "per_replica": 87.5, "per_replica_baseline": 62.5,
                "cost_per_mtok_spec": 25.4, "cost_per_mtok_baseline": 35.56, **money, "stops_paying_band": ">128",
                "stops_paying_significant": True, "note": "speculation loses throughput from the >128 band on"}
        model = {"model": "m", "stage": "measuring", "classes": [cls], "changes": [], "decisions": [],
                 "pending": [], "drafters": [], "alerts": {"fired": 2, "seconds_in_alert": 12 * 60, "items": []},
                 "capacity": {"lines": [line], "total": money, "currency": "EUR"}}
        return {"week": week, "previous_week": "x", "timezone": "UTC", "start": "2026-11-23T00:00:00+00:00",
                "end": "2026-11-30T00:00:00+00:00", "threshold": 0.55, "complete": True, "models": [model],
                "currency": "EUR",
                "capacity_total": money}


def test_weekly_report_opens_on_the_latest_week_with_data_and_shows_speedup():
    from datetime import UTC, datetime

    current = report.week_options(datetime.now(UTC).date(), 1)[0]
    client = _Reports(current)
    body, week = report.render(client, None, "light")
    assert week == current and client.asked == [report.week_options(datetime.now(UTC).date(), 1)[1], current]
    text = _text(body)
    assert "1.84×" in text and "speedup" in text and "method" in text
    # the managers' lines: the figure's name, its hours of data and the currency
    assert "saved this week so far" in text and "fleet" in text and "12.80 EUR (3 h of data)" in text
    assert "3.47 EUR to 23.47 EUR" in text and "per week" not in text
    assert "25.40 EUR / 35.56 EUR" in text and ">128" in text  # the model's capacity line
    assert "0h12m" in text and "h in alert" not in text  # the exports' duration format, not "0.2 h"


def test_the_status_line_says_when_the_numbers_were_computed_and_how_old_they_are():
    """A precomputed 24 h snapshot from 20:21 read at 20:25 says so, never "updated 20:21" as if fresh."""
    from datetime import UTC, datetime

    at = datetime(2026, 12, 4, 20, 21, tzinfo=UTC)
    line = _text(c.updated(at, "24 h", now=datetime(2026, 12, 4, 20, 25, 10, tzinfo=UTC)))
    assert "computed" in line and "4 min ago" in line and "updated" not in line
    assert c.data_age(at, at.replace(second=30)) == "just now"
    assert c.data_age(at, datetime(2026, 12, 4, 22, 26, tzinfo=UTC)) == "2 h 5 min ago"
    assert c.data_age(None) == "age unknown"
