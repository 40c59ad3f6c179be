"""The weekly report as Markdown (stable: fixed formats, no generation time), CSV (rows of three kinds, see
csv_rows and docs/report-csv.md) and PDF (reportlab: a summary page, then one page per model with an alpha chart
this week vs last week and the tables). Money is written in the report's currency (SPECWATCH_CURRENCY) and
named as everywhere else: "saved this week so far (N h of data)" (domain.capacity)."""

from __future__ import annotations

import csv
import io
from typing import Any
from xml.sax.saxutils import escape

from backend.domain import capacity as cap
from backend.domain import context_view as cv
from backend.domain.wording import action_text, stage_text, verdict_text
from backend.services import report_changes
from backend.services.report import duration, has_data, stamp, summary_table

MEDIA = {"md": "text/markdown; charset=utf-8", "csv": "text/csv; charset=utf-8", "pdf": "application/pdf"}
# row kinds of the CSV: a class x spec mode, the production mix (ratios only), the model's totals
ROW_CLASS, ROW_MIXED, ROW_MODEL = "class", "mixed", "model total"
ROW_CONTEXT = "context band"  # a class x spec mode x context-length band: the API's by_context_length
RATIO_CSV = ("alpha", "alpha_prev", "alpha_delta", "tau", "margin", "speedup")
MONEY_CSV = ("cost_per_mtok_spec", "cost_per_mtok_baseline", "saved_this_week_so_far", "saved_this_week_so_far_low",
             "saved_this_week_so_far_high")
# the "context band" rows' own columns: the API's by_context_length field names, intervals as _low/_high
CONTEXT_CSV = ("prompt_tokens_from", "prompt_tokens_to", "requests", "draft_tokens", "accepted_tokens",
               "draft_token_weighted_alpha", "draft_token_weighted_alpha_low", "draft_token_weighted_alpha_high",
               "request_weighted_alpha", "request_weighted_alpha_low", "request_weighted_alpha_high")
CSV_FIELDS = ("week", "model", "row", "scope", "engine", "figures_note", "stage", "spec_mode", "drafter", *RATIO_CSV,
              "drafts",
              "tpot_p99_verdict", "itl_p99_verdict", "alerts_fired", "seconds_in_alert", "pending", *MONEY_CSV,
              "hours_of_data", "stops_paying_band", "source", "records_coverage", *CONTEXT_CSV,
              *report_changes.CHANGE_CSV)
# additive columns: on a model's "class" rows they sum to its "model total" row (nothing else is repeated)
CSV_ADDITIVE = ("drafts", "saved_this_week_so_far")


def csv_header(field: str, currency: str) -> str:
    """A money column names its currency: 'saved_this_week_so_far (USD)'."""
    return f"{field} ({currency})" if field in MONEY_CSV else field


def _f(v: Any, d: int = 3) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{d}f}"
    return str(v)


def _delta(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.3f}"


def _at(iso: str | None, tz: str) -> str:
    """'2026-11-25 06:00' in the report's time zone (the header names it): no seconds, no microseconds."""
    if not iso:
        return "n/a"
    from datetime import datetime
    from zoneinfo import ZoneInfo

    return datetime.fromisoformat(iso).astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M")


def _method(c: dict[str, Any]) -> tuple[str, str]:
    """(method, drafter): the spec method always; the drafter's name only where the pools report one."""
    return c.get("spec_mode") or "n/a", c.get("drafter") or "n/a"


def _cur(r: dict[str, Any]) -> str:
    return r.get("currency") or cap.DEFAULT_CURRENCY


def _money(v: float | None, currency: str) -> str:
    return cap.money_text(v, currency)


def _interval(m: dict[str, Any], currency: str) -> str:
    return cap.interval_text(m.get("saved_this_week_so_far_low"), m.get("saved_this_week_so_far_high"), currency)


def _saved(m: dict[str, Any], currency: str) -> str:
    return cap.saved_week_cell(m.get("saved_this_week_so_far"), m.get("hours_of_data"), currency)


SAVING_HEAD = ("Saved this week so far: over the week until now (the whole week once it is over), the replica-hours the baseline would have needed for "
               "the same output tokens in the same concurrency band, minus those used, times the configured GPU-hour "
               "price (negative: a loss), with the hours of data it rests on; 95 % bootstrap interval over time bins.")


def capacity_summary(r: dict[str, Any]) -> list[str]:
    """The managers' lines: one per model and the fleet total."""
    cur = _cur(r)
    out = [f"| model | {cap.SAVED_WEEK_SO_FAR} | 95 % interval |", "|---|---:|---:|"]
    for m in r["models"]:
        t = m.get("capacity", {}).get("total", {})
        out.append(f"| {m['model']} | {_saved(t, cur)} | {_interval(t, cur)} |")
    t = r.get("capacity_total", {})
    out.append(f"| fleet | {_saved(t, cur)} | {_interval(t, cur)} |")
    return out


def capacity_lines(m: dict[str, Any]) -> list[str]:
    cp = m.get("capacity") or {}
    if not cp.get("lines"):
        return []
    cur = cp.get("currency") or cap.DEFAULT_CURRENCY
    price = "not set" if cp.get("gpu_hour_price") is None else _money(cp["gpu_hour_price"], cur)
    out = ["", f"Capacity and money (GPU-hour price {price}, {cp.get('gpus_per_replica')} GPU(s) per replica):", "",
           ("| scope | method | operating band | tokens/s per replica | baseline | cost per 1M tokens | baseline "
            f"| {cap.SAVED_WEEK_SO_FAR} | 95 % interval | stops paying from |"),
           "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for x in cp["lines"]:
        stop = x["stops_paying_band"] or "never"
        if x["stops_paying_band"] and not x["stops_paying_significant"]:
            stop += " (not significant)"
        out.append(f"| {x['scope']} | {x['spec_mode']} | {x.get('operating_band') or '-'} | {_f(x['per_replica'], 1)} | {_f(x['per_replica_baseline'], 1)} "
                   f"| {_money(x['cost_per_mtok_spec'], cur)} | {_money(x['cost_per_mtok_baseline'], cur)} "
                   f"| {_saved(x, cur)} | {_interval(x, cur)} | {stop} |")
    out += ["", *(f"- {x['scope']} {x['spec_mode']}: {x['note']}" for x in cp["lines"])]
    return out


def context_lines(m: dict[str, Any]) -> list[str]:
    """The model's "α by context length" table (per records class x spec mode and band, as the API's
    by_context_length and the model page show it); nothing when the model has no per-request records, a
    sentence for a class whose records carry no prompt_tokens."""
    sections = m.get("by_context_length") or []
    if not sections:
        return []
    out = ["", f"{cv.SECTION}:", "", cv.NOTE, "", "| " + " | ".join(cv.HEAD) + " |",
           "|---|---|---|---:|---:|---:|---:|"]
    empty = []
    for x in sections:
        out += ["| " + " | ".join(cv.band_row(x["scope"], x["spec_mode"], b)) + " |" for b in x["bands"]]
        if not x["bands"]:
            empty.append(f"- {x['scope']} {x['spec_mode']}: {cv.NO_PROMPT_TOKENS}")
    if len(empty) == len(sections):  # no band at all: the sentence instead of an empty table
        return ["", f"{cv.SECTION}:", "", *empty]
    return out + ([""] + empty if empty else [])


def _md_table(t: dict[str, Any]) -> list[str]:
    """A head + rows table as Markdown (text columns left, the rest right-aligned)."""
    left = {"model", "engine", "stage", "scope", "method", "drafter"}
    return ["| " + " | ".join(t["head"]) + " |", "|" + "|".join("---" if h in left else "---:" for h in t["head"]) + "|",
            *("| " + " | ".join(row) + " |" for row in t["rows"])]


def _change(e: dict[str, Any]) -> str:
    return f"{stage_text(e['from']) if e['from'] else '-'} -> {stage_text(e['to'])}"


def markdown(r: dict[str, Any]) -> str:
    tz = r["timezone"]
    out = [f"# specwatch weekly rollout report: {r['week']}", "",
           f"{_at(r['start'], tz)} to {_at(r['end'], tz)} ({tz}); compared with {r['previous_week']}. "
           f"Gate: {r.get('gate') or 'alpha >= ' + format(r['threshold'], '.2f')} on the production mix." + ("" if r["complete"] else
                                                                              " Week in progress."), ""]
    if not has_data(r):
        return "\n".join([*out, (f"No data for {r['week']}: no model reported speculative-decoding metrics that "
                                  "week (is the collector running, and is this the week you meant?)"), ""])
    out += [stamp(r), "", *report_changes.markdown_lines(r.get("what_changed", []), lambda iso: _at(iso, tz)), ""]
    out += _md_table(summary_table(r))
    out += ["", SAVING_HEAD, "", *capacity_summary(r)]
    for m in r["models"]:
        out += ["", f"## {m['model']}", "", f"Stage: **{stage_text(m['stage'])}**" + (f" (step {m['step']} of 5)" if m["step"] is not None else ""), ""]
        if m["scopes"]:
            out.append("Per scope: " + ", ".join(
                f"{s['scope']} {stage_text(s['stage'])}"
                + (f" (was: {stage_text(s['stage_at_start'])})" if s["stage_at_start"] not in (None, s["stage"]) else "")
                for s in m["scopes"]))
            out.append("")
        out += [("| scope | engine | method | drafter | alpha | last week | change | tau | margin | speedup | band "
                 "| P99 TPOT | P99 ITL |"), "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|---|"]
        for c in m["classes"]:
            method, drafter = _method(c)
            out.append(f"| {c['scope']} | {c.get('engine') or 'vLLM'} | {method} | {drafter} | "
                       f"{c.get('alpha_text') or _f(c['alpha'])} | {_f(c['alpha_prev'])} | "
                       f"{_delta(c['alpha_delta'])} | {c.get('tau_text') or _f(c['tau'])} | "
                       f"{c.get('margin_text') or _f(c['margin'])} | {_f(c['speedup'], 2)} | "
                       f"{c.get('concurrency_band') or '-'} | "
                       f"{c.get('tpot_text') or verdict_text(c['tpot_p99_verdict'])} | "
                       f"{c.get('itl_text') or verdict_text(c['itl_p99_verdict'])} |")
        notes = sorted({n for c in m["classes"] for n in (c.get("excluded"),) if n}
                       | {f"estimated: {c['estimate_basis']}" for c in m["classes"]
                          if c.get("alpha_estimate") is not None and c.get("estimate_basis")})
        out += ["", *(f"- {n}" for n in notes)] if notes else []
        out += capacity_lines(m)
        out += context_lines(m)
        why = [f"- {c['scope']} P99 {name} {verdict_text(c[f'{key}_p99_verdict'])}: {c[f'{key}_p99_reason']}"
               for c in m["classes"] for key, name in (("tpot", "TPOT"), ("itl", "ITL")) if c.get(f"{key}_p99_reason")]
        out += ["", "P99 verdicts (spec vs baseline):", *why] if why else []
        out += ["", "Rollout stage changes:"]
        out += [f"- {_at(e['at'], tz)} {e['scope']}: {_change(e)} ({e['kind']}, {e['actor']}): {e['reason']}"
                for e in m["changes"]] or ["- nothing"]
        out += ["", (f"Alerts: {m['alerts']['fired']} fired, {duration(m['alerts']['seconds_in_alert'])} in alert "
                     "(overlapping alerts counted once).")]
        out += [f"- {a['rule']} ({a['severity']}, {a['traffic_class'] or 'model'}): fired {_at(a['fired_at'], tz)}, "
                + (f"resolved {_at(a['resolved_at'], tz)}" if a["resolved_at"] else "still firing")
                + f", {duration(a['seconds_in_week'])} this week" for a in m["alerts"]["items"]]
        out += ["", "Decisions taken:"]
        out += [f"- {_at(d['at'], tz)} {d['scope']}: {action_text(d['action'])} by {d['actor']}: {d['reason']}"
                for d in m["decisions"]] or ["- none"]
        out += ["", "Decisions pending:"]
        out += [f"- {p['scope']}: {stage_text(p['stage'])} since {_at(p['since'], tz)}; to do: {p['action']}"
                for p in m["pending"]] or ["- none"]
        if m["drafters"]:
            out += ["", "Drafter comparison (challenger vs reference):", "",
                    "| scope | reference | challenger | alpha | tau | P99 TPOT |", "|---|---|---|---|---|---|"]
            out += [f"| {d['scope']} | {d['reference']} | {d['challenger']} | {_f(d['alpha'][0])} -> {_f(d['alpha'][1])} | "
                    f"{_f(d['tau'][0])} -> {_f(d['tau'][1])} | {verdict_text(d['tpot_p99_verdict'])} |" for d in m["drafters"]]
    return "\n".join(out) + "\n"


def _cells(line: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: "" if line.get(k) is None else line[k] for k in keys}


def csv_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The CSV's rows (field names without the currency): per model, its "class" rows (one per class x spec
    mode: the class's ratios and volume, and the capacity line of that spec pool), its "mixed" row (the
    production mix's ratios, verdicts and stage; no counts, which would repeat the classes'), and its
    "model total" row (the model's stage, the drafts of its class rows summed, alerts and time in alert, the
    model's saving this week so far and its hours of data). A parent's totals are never repeated on a child:
    on a model's class rows, drafts and saved_this_week_so_far sum to its model total row, except where classes
    are read from per-request records (`source`): those describe the engine's counts, so the mixed row and the
    model total carry the engine's drafts and `records_coverage` says how much of them the records hold."""
    out = []
    keep = (*RATIO_CSV, "tpot_p99_verdict", "itl_p99_verdict", "engine", "figures_note")
    for m in r["models"]:
        stages = {s["scope"]: s["stage"] for s in m["scopes"]}
        pending = {p["scope"] for p in m["pending"]}
        cp = m.get("capacity") or {}
        lines = {(x["scope"], x["spec_mode"]): x for x in cp.get("lines", [])}
        base = {"week": r["week"], "model": m["model"]}
        classes = m.get("class_modes") or [c for c in m["classes"] if c["scope"] != "mixed"]
        keys = [(c["scope"], c["spec_mode"]) for c in classes]
        mixed = next((c for c in m["classes"] if c["scope"] == "mixed"), None)
        # classes read from per-request records describe the engine's totals, they do not add up to them: the
        # mixed row then carries the engine's drafts and its pool's capacity line, and the model total is
        # those (backend.domain.pool_rows)
        from_records = mixed is not None and any(c.get("source") == "records" for c in classes)
        mixed_line = {}
        if from_records:
            unshown = [k for k in lines if k not in keys and k[1] == mixed["spec_mode"]]
            if len(unshown) == 1:  # the engine pool without a class label: the mix's own line
                mixed_line = lines.pop(unshown[0])
        keys += sorted(k for k in lines if k not in keys)  # a spec mode the class rows do not show
        for c in [*classes, *([mixed] if mixed else [])]:
            c.setdefault("figures_note", figures_note(c))
        by_key = {(c["scope"], c["spec_mode"]): c for c in classes}
        drafts = []
        for scope, mode in keys:
            c = by_key.get((scope, mode), {})
            drafts.append(c.get("drafts"))
            out.append({**base, "row": ROW_CLASS, "scope": scope, "stage": stages.get(scope, ""), "spec_mode": mode,
                        "drafter": c.get("drafter") or "", **_cells(c, keep), "drafts": _cells(c, ("drafts",))["drafts"],
                        "pending": "yes" if c and scope in pending else "",
                        **_cells(c, ("source", "records_coverage")),
                        **_cells(lines.get((scope, mode), {}), (*MONEY_CSV, "hours_of_data", "stops_paying_band"))})
        if mixed is not None:
            out.append({**base, "row": ROW_MIXED, "scope": "mixed", "stage": stages.get("mixed", ""),
                        "spec_mode": mixed["spec_mode"], "drafter": mixed.get("drafter") or "", **_cells(mixed, keep),
                        "pending": "yes" if "mixed" in pending else "",
                        **_cells(mixed, ("source", "records_coverage", *(("drafts",) if from_records else ()))),
                        **(_cells(mixed_line, (*MONEY_CSV, "hours_of_data", "stops_paying_band"))
                           if mixed_line else {})})
        have = [d for d in drafts if d is not None]
        if from_records:
            have = [mixed["drafts"]] if mixed.get("drafts") is not None else []
        total = cp.get("total", {})
        out.append({**base, "row": ROW_MODEL, "scope": "", "stage": m["stage"], "drafts": sum(have) if have else "",
                    "alerts_fired": m["alerts"]["fired"], "seconds_in_alert": m["alerts"]["seconds_in_alert"],
                    **_cells(total, ("saved_this_week_so_far", "saved_this_week_so_far_low",
                                     "saved_this_week_so_far_high", "hours_of_data"))})
        out += context_rows(base, m)
    return out


def context_rows(base: dict[str, Any], m: dict[str, Any]) -> list[dict[str, Any]]:
    """The model's "context band" rows, after its model total: one per class x spec mode x context-length
    band, the API's by_context_length values under its own field names (an interval as _low and _high).
    Their requests and drafts count the requests that sent prompt_tokens: filter on `row` before summing."""
    out = []
    for x in m.get("by_context_length") or []:
        for b in x["bands"]:
            lo, hi = b["draft_token_weighted_alpha_interval"] or (None, None)
            wlo, whi = b["request_weighted_alpha_interval"] or (None, None)
            vals = {**{k: b.get(k) for k in ("prompt_tokens_from", "prompt_tokens_to", "requests", "drafts",
                                             "draft_tokens", "accepted_tokens", "draft_token_weighted_alpha",
                                             "request_weighted_alpha")},
                    "draft_token_weighted_alpha_low": lo, "draft_token_weighted_alpha_high": hi,
                    "request_weighted_alpha_low": wlo, "request_weighted_alpha_high": whi}
            out.append({**base, "row": ROW_CONTEXT, "scope": x["scope"], "spec_mode": x["spec_mode"],
                        **{k: "" if v is None else v for k, v in vals.items()}})
    return out


def figures_note(c: dict[str, Any]) -> str | None:
    """The CSV's words for a row's figures that are not exact counts (the report's wording: "not exposed by
    SGLang", "0.712 (estimated)", the excluded engines of a mix); None: every figure is exact."""
    parts = [f"{name} {c[key]}" for key, name in (("alpha_text", "alpha"), ("tau_text", "tau"),
                                                   ("margin_text", "margin"), ("tpot_text", "P99 TPOT"),
                                                   ("itl_text", "P99 ITL"))
             if c.get(key) and ("not exposed" in c[key] or "estimated" in c[key])]
    if c.get("excluded"):
        parts.append(c["excluded"])
    return "; ".join(parts) or None


def csv_text(r: dict[str, Any]) -> str:
    cur = _cur(r)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([csv_header(f, cur) for f in CSV_FIELDS])
    changes = [{"week": r["week"], **x} for x in report_changes.csv_rows(r.get("what_changed", []))]
    for row in changes + csv_rows(r):  # the report opens with what changed
        w.writerow(["" if row.get(f) is None else row.get(f, "") for f in CSV_FIELDS])
    return buf.getvalue()


def chart_data(prev: list[float | None], this: list[float | None]) -> list[list[float | None]]:
    """The bar heights the PDF chart draws: a value the table shows as n/a stays None (no bar), never 0."""
    return [list(prev), list(this)]


NA_NOTE = "No bar where the table says n/a: no acceptance was measured there in that week."


def _chart(names: list[str], prev: list[float | None], this: list[float | None], threshold: float | list,
           width: float, height: float = 230):
    """Bars of alpha last week vs this week per name, with the gate (one threshold, or one per name: a mark
    across each name's bars) and the legend above the plot: as wide as the text frame. A missing value draws
    no bar (its label reads n/a, like the table)."""
    from reportlab.graphics.charts.barcharts import VerticalBarChart
    from reportlab.graphics.charts.legends import Legend
    from reportlab.graphics.shapes import Drawing, Line, String
    from reportlab.lib import colors

    d = Drawing(width, height)
    bc = VerticalBarChart()
    bc.x, bc.y, bc.width, bc.height = 40, 30, width - 50, height - 60
    bc.data = chart_data(prev, this)
    bc.categoryAxis.categoryNames = names
    bc.categoryAxis.labels.fontSize = 8
    bc.valueAxis.valueMin, bc.valueAxis.valueMax, bc.valueAxis.valueStep = 0, 1, 0.2
    bc.bars[0].fillColor, bc.bars[1].fillColor = colors.lightgrey, colors.steelblue
    bc.barLabelFormat, bc.barLabels.fontSize, bc.barLabels.nudge = "%.2f", 7, 6
    d.add(bc)
    step = bc.width / max(1, len(names))
    for series, values in enumerate(bc.data):
        for i, v in enumerate(values):
            if v is None:  # where the bar would stand: n/a, as in the table
                d.add(String(bc.x + step * (i + 0.3 + 0.4 * series), bc.y + 3, "n/a", fontSize=7,
                             textAnchor="middle", fillColor=colors.dimgrey))
    limits = threshold if isinstance(threshold, list) else [threshold] * len(names)
    for i, t in enumerate(limits):
        if t is not None:
            y = bc.y + bc.height * t
            d.add(Line(bc.x + step * i, y, bc.x + step * (i + 1), y, strokeColor=colors.red, strokeDashArray=[3, 2]))
    distinct = {t for t in limits if t is not None}
    lg = Legend()
    lg.x, lg.y, lg.alignment, lg.columnMaximum, lg.fontSize = bc.x, height - 8, "right", 1, 8
    lg.colorNamePairs = [(colors.lightgrey, "last week"), (colors.steelblue, "this week"),
                         (colors.red, f"gate {next(iter(distinct)):.2f}" if len(distinct) == 1 else "gate (per class)")]
    d.add(lg)
    return d


PDF_FONT, PDF_SIZE, PDF_PAD = "Helvetica", 7.5, 3  # table cells: font, size and the cell's left/right padding


def _md_rows(lines: list[str]) -> list[list[str]]:
    """The rows of a Markdown table (header first, the |---| line left out)."""
    return [[x.strip() for x in line.strip().strip("|").split("|")] for line in lines
            if line.startswith("|") and not line.startswith("|---")]


def pdf_story(r: dict[str, Any], width: float) -> list:
    """The PDF's flowables for a text frame `width` points wide. Every table cell is a Paragraph, so a
    header or value longer than its column wraps inside it instead of running into the next one."""
    from reportlab.lib import colors
    from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, Spacer, Table, TableStyle

    styles = getSampleStyleSheet()
    cell = ParagraphStyle("cell", fontName=PDF_FONT, fontSize=PDF_SIZE, leading=PDF_SIZE + 1.5)
    head = ParagraphStyle("head", parent=cell, fontName=PDF_FONT + "-Bold")
    tz = r["timezone"]
    grid = TableStyle([("GRID", (0, 0), (-1, -1), 0.4, colors.grey), ("VALIGN", (0, 0), (-1, -1), "TOP"),
                       ("LEFTPADDING", (0, 0), (-1, -1), PDF_PAD), ("RIGHTPADDING", (0, 0), (-1, -1), PDF_PAD),
                       ("BACKGROUND", (0, 0), (-1, 0), colors.whitesmoke)])

    def table(rows: list[list[str]], weights: list[float]) -> Table:
        total = sum(weights)
        cells = [[Paragraph(escape(str(x)), head if i == 0 else cell) for x in row] for i, row in enumerate(rows)]
        return Table(cells, style=grid, colWidths=[width * w / total for w in weights], repeatRows=1)

    def para(text: str, style: str = "Normal") -> Paragraph:
        return Paragraph(escape(text), styles[style])

    summary = summary_table(r)
    mixed_of = [next((c for c in m["classes"] if c["scope"] == "mixed"), {}) for m in r["models"]]
    story: list = [para(f"specwatch weekly rollout report: {r['week']}", "Title"),
                   para(f"{_at(r['start'], tz)} to {_at(r['end'], tz)} ({tz}); compared with {r['previous_week']}; "
                        f"gate {r.get('gate') or 'alpha >= ' + format(r['threshold'], '.2f')}"), para(stamp(r)), Spacer(1, 12)]
    changed = report_changes.markdown_lines(r.get("what_changed", []), lambda iso: _at(iso, tz))
    story += [para(changed[0].lstrip("# "), "Heading3"), *(para(x.strip("- ").strip().replace("\u2212", "-")) for x in changed[2:]), Spacer(1, 12),
                   table([summary["head"], *summary["rows"]], [2.6, 2.6, 1.1, 1.1, 1.1, 1.1, 1.1, 1.2, 1]),
                   Spacer(1, 12), para(SAVING_HEAD), Spacer(1, 4),
                   table(_md_rows(capacity_summary(r)), [3, 3.5, 3.5]), Spacer(1, 18)]
    if r["models"]:
        story += [para("Mixed-traffic alpha per model, last week vs this week", "Heading3"),
                  _chart([m["model"] for m in r["models"]], [x.get("alpha_prev") for x in mixed_of],
                         [x.get("alpha") for x in mixed_of], [x.get("threshold") for x in mixed_of], width,
                         height=300)]
        if any(x.get(k) is None for x in mixed_of for k in ("alpha", "alpha_prev")):
            story.append(para(NA_NOTE))
    for m in r["models"]:
        story += [PageBreak(), para(m["model"], "Heading1"),
                  para(f"Stage: {stage_text(m['stage'])}" + (f" (step {m['step']} of 5)" if m["step"] is not None else "")),
                  Spacer(1, 6),
                  _chart([c["scope"] for c in m["classes"]], [c["alpha_prev"] for c in m["classes"]],
                         [c["alpha"] for c in m["classes"]], [c.get("threshold") for c in m["classes"]], width)]
        if any(c.get(k) is None for c in m["classes"] for k in ("alpha", "alpha_prev")):
            story.append(para(NA_NOTE))
        rows = [["scope", "method", "drafter", "alpha", "last week", "tau", "margin", "speedup", "P99 TPOT",
                 "P99 ITL"]]
        rows += [[c["scope"], *_method(c), _f(c["alpha"]), _f(c["alpha_prev"]), _f(c["tau"]), _f(c["margin"]),
                  _f(c["speedup"], 2), verdict_text(c["tpot_p99_verdict"]), verdict_text(c["itl_p99_verdict"])]
                 for c in m["classes"]]
        story += [Spacer(1, 8), table(rows, [1.2, 1.1, 1.7, 0.9, 0.9, 0.8, 0.9, 0.9, 1.5, 1.5])]
        cap_md = capacity_lines(m)
        if cap_md:
            cap_rows = _md_rows(cap_md[3:])
            story += [Spacer(1, 8), para(cap_md[1]), Spacer(1, 4),
                      table(cap_rows, [1.0, 1.0, 1.1, 1.0, 1.1, 1.0, 1.0, 1.6, 1.3][:len(cap_rows[0])])]
            story += [para(x[2:]) for x in cap_md if x.startswith("- ")]
        story += context_story(m, table, para)
        lines = [f"alerts: {m['alerts']['fired']} fired, {duration(m['alerts']['seconds_in_alert'])} in alert"]
        lines += ["Rollout stage changes:"]
        lines += [f"- {_at(e['at'], tz)} {e['scope']}: {_change(e)} ({e['actor']})" for e in m["changes"]] or ["- nothing"]
        lines += [f"pending: {p['scope']}: {stage_text(p['stage'])}; to do: {p['action']}" for p in m["pending"]]
        lines += [f"drafter {d['challenger']} vs {d['reference']} on {d['scope']}: alpha {_f(d['alpha'][0])} -> "
                  f"{_f(d['alpha'][1])}, P99 TPOT {verdict_text(d['tpot_p99_verdict'])}" for d in m["drafters"]]
        story += [Spacer(1, 8)] + [para(x) for x in lines[:40]]
    return story


def _pdf_text(text: str) -> str:
    """The PDF's standard fonts have no Greek letters: α is written "alpha" there."""
    return text.replace("α", "alpha")


def context_story(m: dict[str, Any], table, para) -> list:
    """The model's "α by context length" table in the PDF (the Markdown's rows, α spelt out)."""
    from reportlab.platypus import Spacer

    lines = context_lines(m)
    if not lines:
        return []
    rows = [[_pdf_text(x) for x in row] for row in _md_rows(lines)]
    out: list = [Spacer(1, 8), para(_pdf_text(lines[1])), Spacer(1, 4)]
    if rows:
        out += [para(_pdf_text(cv.NOTE)), Spacer(1, 4), table(rows, [1.0, 1.0, 1.3, 0.9, 0.9, 1.6, 1.6])]
    return out + [para(_pdf_text(x[2:])) for x in lines if x.startswith("- ")]


def pdf_bytes(r: dict[str, Any]) -> bytes:
    """A4: the summary page (the summary table, the savings and the mixed alpha of every model), then one
    page per model (its chart across the page, the per-scope table with method, drafter and speedup,
    capacity, the changes)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.platypus import SimpleDocTemplate

    buf = io.BytesIO()
    doc = SimpleDocTemplate(buf, pagesize=A4, title=f"specwatch weekly report {r['week']}", invariant=1,
                            leftMargin=40, rightMargin=40, topMargin=40, bottomMargin=40)
    doc.build(pdf_story(r, doc.width))
    return buf.getvalue()


def export(r: dict[str, Any], fmt: str) -> bytes:
    if fmt == "md":
        return markdown(r).encode()
    if fmt == "csv":
        return csv_text(r).encode()
    if fmt == "pdf":
        return pdf_bytes(r)
    raise ValueError(f"format must be md, csv or pdf, got {fmt!r}")
