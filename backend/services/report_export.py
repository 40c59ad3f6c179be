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
from backend.services.report import duration, has_data

MEDIA = {"md": "text/markdown; charset=utf-8", "csv": "text/csv; charset=utf-8", "pdf": "application/pdf"}
# row kinds of the CSV: a class x spec mode, the production mix (ratios only), the model's totals
ROW_CLASS, ROW_MIXED, ROW_MODEL = "class", "mixed", "model total"
RATIO_CSV = ("alpha", "alpha_prev", "alpha_delta", "tau", "margin", "speedup")
MONEY_CSV = ("cost_per_mtok_spec", "cost_per_mtok_baseline", "saved_this_week_so_far", "saved_this_week_so_far_low",
             "saved_this_week_so_far_high")
CSV_FIELDS = ("week", "model", "row", "scope", "stage", "spec_mode", "drafter", *RATIO_CSV, "drafts",
              "tpot_p99_verdict", "itl_p99_verdict", "alerts_fired", "seconds_in_alert", "pending", *MONEY_CSV,
              "hours_of_data", "stops_paying_band")
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
           ("| scope | method | tokens/s per replica | baseline | cost per 1M tokens | baseline "
            f"| {cap.SAVED_WEEK_SO_FAR} | 95 % interval | stops paying from |"), "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for x in cp["lines"]:
        stop = x["stops_paying_band"] or "never"
        if x["stops_paying_band"] and not x["stops_paying_significant"]:
            stop += " (not significant)"
        out.append(f"| {x['scope']} | {x['spec_mode']} | {_f(x['per_replica'], 1)} | {_f(x['per_replica_baseline'], 1)} "
                   f"| {_money(x['cost_per_mtok_spec'], cur)} | {_money(x['cost_per_mtok_baseline'], cur)} "
                   f"| {_saved(x, cur)} | {_interval(x, cur)} | {stop} |")
    out += ["", *(f"- {x['scope']} {x['spec_mode']}: {x['note']}" for x in cp["lines"])]
    return out


def markdown(r: dict[str, Any]) -> str:
    tz = r["timezone"]
    out = [f"# specwatch weekly rollout report: {r['week']}", "",
           f"{_at(r['start'], tz)} to {_at(r['end'], tz)} ({tz}); compared with {r['previous_week']}. "
           f"Gate: alpha >= {r['threshold']:.2f} on the production mix." + ("" if r["complete"] else
                                                                              " Week in progress."), ""]
    if not has_data(r):
        return "\n".join([*out, (f"No data for {r['week']}: no model reported speculative-decoding metrics that "
                                  "week (is the collector running, and is this the week you meant?)"), ""])
    out += ["| model | stage | alpha mixed | last week | change | alerts fired | time in alert | pending |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for m in r["models"]:
        mixed = next((c for c in m["classes"] if c["scope"] == "mixed"), {})
        out.append(f"| {m['model']} | {m['stage']} | {_f(mixed.get('alpha'))} | {_f(mixed.get('alpha_prev'))} | "
                   f"{_delta(mixed.get('alpha_delta'))} | {m['alerts']['fired']} | {duration(m['alerts']['seconds_in_alert'])} "
                   f"| {len(m['pending'])} |")
    out += ["", SAVING_HEAD, "", *capacity_summary(r)]
    for m in r["models"]:
        out += ["", f"## {m['model']}", "", f"Stage: **{m['stage']}**" + (f" (step {m['step']} of 5)" if m["step"] is not None else ""), ""]
        if m["scopes"]:
            out.append("Per scope: " + ", ".join(
                f"{s['scope']} {s['stage']}" + (f" (was {s['stage_at_start']})" if s["stage_at_start"] not in (None, s["stage"]) else "")
                for s in m["scopes"]))
            out.append("")
        out += ["| scope | method | drafter | alpha | last week | change | tau | margin | speedup | P99 TPOT | P99 ITL |",
                "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
        for c in m["classes"]:
            method, drafter = _method(c)
            out.append(f"| {c['scope']} | {method} | {drafter} | {_f(c['alpha'])} | {_f(c['alpha_prev'])} | "
                       f"{_delta(c['alpha_delta'])} | {_f(c['tau'])} | {_f(c['margin'])} | {_f(c['speedup'], 2)} | "
                       f"{c['tpot_p99_verdict'] or 'n/a'} | {c['itl_p99_verdict'] or 'n/a'} |")
        out += capacity_lines(m)
        why = [f"- {c['scope']} P99 {name} {c[f'{key}_p99_verdict']}: {c[f'{key}_p99_reason']}"
               for c in m["classes"] for key, name in (("tpot", "TPOT"), ("itl", "ITL")) if c.get(f"{key}_p99_reason")]
        out += ["", "P99 verdicts (spec vs baseline):", *why] if why else []
        out += ["", "What changed this week:"]
        out += [f"- {_at(e['at'], tz)} {e['scope']}: {e['from'] or '-'} -> {e['to']} ({e['kind']}, {e['actor']}): {e['reason']}"
                for e in m["changes"]] or ["- nothing"]
        out += ["", (f"Alerts: {m['alerts']['fired']} fired, {duration(m['alerts']['seconds_in_alert'])} in alert "
                     "(overlapping alerts counted once).")]
        out += [f"- {a['rule']} ({a['severity']}, {a['traffic_class'] or 'model'}): fired {_at(a['fired_at'], tz)}, "
                + (f"resolved {_at(a['resolved_at'], tz)}" if a["resolved_at"] else "still firing")
                + f", {duration(a['seconds_in_week'])} this week" for a in m["alerts"]["items"]]
        out += ["", "Decisions taken:"]
        out += [f"- {_at(d['at'], tz)} {d['scope']}: {d['action']} by {d['actor']}: {d['reason']}" for d in m["decisions"]] or ["- none"]
        out += ["", "Decisions pending:"]
        out += [f"- {p['scope']} ({p['stage']} since {_at(p['since'], tz)}): {p['action']}" for p in m["pending"]] or ["- none"]
        if m["drafters"]:
            out += ["", "Drafter comparison (challenger vs reference):", "",
                    "| scope | reference | challenger | alpha | tau | P99 TPOT |", "|---|---|---|---|---|---|"]
            out += [f"| {d['scope']} | {d['reference']} | {d['challenger']} | {_f(d['alpha'][0])} -> {_f(d['alpha'][1])} | "
                    f"{_f(d['tau'][0])} -> {_f(d['tau'][1])} | {d['tpot_p99_verdict'] or 'n/a'} |" for d in m["drafters"]]
    return "\n".join(out) + "\n"


def _cells(line: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: "" if line.get(k) is None else line[k] for k in keys}


def csv_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The CSV's rows (field names without the currency): per model, its "class" rows (one per class x spec
    mode: the class's ratios and volume, and the capacity line of that spec pool), its "mixed" row (the
    production mix's ratios, verdicts and stage; no counts, which would repeat the classes'), and its
    "model total" row (the model's stage, the drafts of its class rows summed, alerts and time in alert, the
    model's saving this week so far and its hours of data). A parent's totals are never repeated on a child:
    on a model's class rows, drafts and saved_this_week_so_far sum to its model total row."""
    out = []
    keep = (*RATIO_CSV, "tpot_p99_verdict", "itl_p99_verdict")
    for m in r["models"]:
        stages = {s["scope"]: s["stage"] for s in m["scopes"]}
        pending = {p["scope"] for p in m["pending"]}
        cp = m.get("capacity") or {}
        lines = {(x["scope"], x["spec_mode"]): x for x in cp.get("lines", [])}
        base = {"week": r["week"], "model": m["model"]}
        classes = m.get("class_modes") or [c for c in m["classes"] if c["scope"] != "mixed"]
        keys = [(c["scope"], c["spec_mode"]) for c in classes]
        keys += sorted(k for k in lines if k not in keys)  # a spec mode the class rows do not show
        by_key = {(c["scope"], c["spec_mode"]): c for c in classes}
        drafts = []
        for scope, mode in keys:
            c = by_key.get((scope, mode), {})
            drafts.append(c.get("drafts"))
            out.append({**base, "row": ROW_CLASS, "scope": scope, "stage": stages.get(scope, ""), "spec_mode": mode,
                        "drafter": c.get("drafter") or "", **_cells(c, keep), "drafts": _cells(c, ("drafts",))["drafts"],
                        "pending": "yes" if c and scope in pending else "",
                        **_cells(lines.get((scope, mode), {}), (*MONEY_CSV, "hours_of_data", "stops_paying_band"))})
        mixed = next((c for c in m["classes"] if c["scope"] == "mixed"), None)
        if mixed is not None:
            out.append({**base, "row": ROW_MIXED, "scope": "mixed", "stage": stages.get("mixed", ""),
                        "spec_mode": mixed["spec_mode"], "drafter": mixed.get("drafter") or "", **_cells(mixed, keep),
                        "pending": "yes" if "mixed" in pending else ""})
        have = [d for d in drafts if d is not None]
        total = cp.get("total", {})
        out.append({**base, "row": ROW_MODEL, "scope": "", "stage": m["stage"], "drafts": sum(have) if have else "",
                    "alerts_fired": m["alerts"]["fired"], "seconds_in_alert": m["alerts"]["seconds_in_alert"],
                    **_cells(total, ("saved_this_week_so_far", "saved_this_week_so_far_low",
                                     "saved_this_week_so_far_high", "hours_of_data"))})
    return out


def csv_text(r: dict[str, Any]) -> str:
    cur = _cur(r)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([csv_header(f, cur) for f in CSV_FIELDS])
    for row in csv_rows(r):
        w.writerow(["" if row.get(f) is None else row.get(f, "") for f in CSV_FIELDS])
    return buf.getvalue()


def _chart(names: list[str], prev: list[float | None], this: list[float | None], threshold: float,
           width: float, height: float = 230):
    """Bars of alpha last week vs this week per name (missing values drawn as 0, the tables say n/a), with
    the gate line and the legend above the plot: as wide as the text frame."""
    from reportlab.graphics.charts.barcharts import VerticalBarChart
    from reportlab.graphics.charts.legends import Legend
    from reportlab.graphics.shapes import Drawing, Line
    from reportlab.lib import colors

    d = Drawing(width, height)
    bc = VerticalBarChart()
    bc.x, bc.y, bc.width, bc.height = 40, 30, width - 50, height - 60
    bc.data = [[v or 0 for v in prev], [v or 0 for v in this]]
    bc.categoryAxis.categoryNames = names
    bc.categoryAxis.labels.fontSize = 8
    bc.valueAxis.valueMin, bc.valueAxis.valueMax, bc.valueAxis.valueStep = 0, 1, 0.2
    bc.bars[0].fillColor, bc.bars[1].fillColor = colors.lightgrey, colors.steelblue
    bc.barLabelFormat, bc.barLabels.fontSize, bc.barLabels.nudge = "%.2f", 7, 6
    d.add(bc)
    y = bc.y + bc.height * threshold
    d.add(Line(bc.x, y, bc.x + bc.width, y, strokeColor=colors.red, strokeDashArray=[3, 2]))
    lg = Legend()
    lg.x, lg.y, lg.alignment, lg.columnMaximum, lg.fontSize = bc.x, height - 8, "right", 1, 8
    lg.colorNamePairs = [(colors.lightgrey, "last week"), (colors.steelblue, "this week"),
                         (colors.red, f"gate {threshold:.2f}")]
    d.add(lg)
    return d


def _data_line(cell: str) -> str:
    """'12.80 USD (2 h of data)' on two lines in a narrow PDF column: the amount, then its hours of data."""
    return cell.replace(" (", "\n(", 1) if cell.endswith(" of data)") else cell


def pdf_bytes(r: dict[str, Any]) -> bytes:
    """A4: the summary page (fleet table and the mixed alpha of every model), then one page per model
    (its chart across the page, the per-scope table with method, drafter and speedup, the changes)."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    styles = getSampleStyleSheet()
    tz = r["timezone"]
    grid = TableStyle([("GRID", (0, 0), (-1, -1), 0.4, colors.grey), ("FONTSIZE", (0, 0), (-1, -1), 8),
                       ("BACKGROUND", (0, 0), (-1, 0), colors.whitesmoke), ("ALIGN", (2, 1), (-1, -1), "RIGHT")])
    buf = io.BytesIO()
    doc = SimpleDocTemplate(buf, pagesize=A4, title=f"specwatch weekly report {r['week']}", invariant=1,
                            leftMargin=40, rightMargin=40, topMargin=40, bottomMargin=40)
    width = doc.width

    def table(rows: list[list[str]], weights: list[float]) -> Table:
        total = sum(weights)
        return Table(rows, style=grid, colWidths=[width * w / total for w in weights], repeatRows=1)

    story: list = [Paragraph(f"specwatch weekly rollout report: {r['week']}", styles["Title"]),
                   Paragraph(escape(f"{_at(r['start'], tz)} to {_at(r['end'], tz)} ({tz}); compared with "
                                    f"{r['previous_week']}; gate alpha >= {r['threshold']:.2f}"), styles["Normal"]),
                   Spacer(1, 12)]
    rows = [["model", "stage", "alpha mixed", "last week", "speedup", "alerts", "time in alert", "pending"]]
    mixed_of = [next((c for c in m["classes"] if c["scope"] == "mixed"), {}) for m in r["models"]]
    for m, mixed in zip(r["models"], mixed_of):
        rows.append([m["model"], m["stage"], _f(mixed.get("alpha")), _f(mixed.get("alpha_prev")),
                     _f(mixed.get("speedup"), 2), str(m["alerts"]["fired"]), duration(m["alerts"]["seconds_in_alert"]),
                     str(len(m["pending"]))])
    story += [table(rows, [3, 2.2, 1.3, 1.3, 1.2, 1, 1.4, 1]), Spacer(1, 12),
              Paragraph(escape(SAVING_HEAD), styles["Normal"]), Spacer(1, 4),
              table([[x.strip() for x in line.strip("|").split("|")] for i, line in enumerate(capacity_summary(r))
                     if i != 1], [3, 3.5, 3.5]), Spacer(1, 18)]
    if r["models"]:
        story += [Paragraph("Mixed-traffic alpha per model, last week vs this week", styles["Heading3"]),
                  _chart([m["model"] for m in r["models"]], [x.get("alpha_prev") for x in mixed_of],
                         [x.get("alpha") for x in mixed_of], r["threshold"], width, height=300)]
    for m in r["models"]:
        story += [PageBreak(), Paragraph(escape(m["model"]), styles["Heading1"]),
                  Paragraph(f"Stage: {m['stage']}", styles["Normal"]), Spacer(1, 6),
                  _chart([c["scope"] for c in m["classes"]], [c["alpha_prev"] for c in m["classes"]],
                         [c["alpha"] for c in m["classes"]], r["threshold"], width), Spacer(1, 8)]
        rows = [["scope", "method", "drafter", "alpha", "last week", "tau", "margin", "speedup", "P99 TPOT",
                 "P99 ITL"]]
        rows += [[c["scope"], *_method(c), _f(c["alpha"]), _f(c["alpha_prev"]), _f(c["tau"]), _f(c["margin"]),
                  _f(c["speedup"], 2), c["tpot_p99_verdict"] or "n/a", c["itl_p99_verdict"] or "n/a"]
                 for c in m["classes"]]
        story.append(table(rows, [1.3, 1.1, 1.6, 1, 1, 0.9, 1, 1, 1.5, 1.5]))
        cap_md = capacity_lines(m)
        if cap_md:
            story += [Spacer(1, 8), Paragraph(escape(cap_md[1]), styles["Normal"]), Spacer(1, 4),
                      table([[_data_line(x.strip()) for x in line.strip("|").split("|")] for line in cap_md[3:]
                             if line.startswith("|") and not line.startswith("|---")],
                            [0.9, 0.9, 1, 1, 1.1, 1.1, 2.2, 2.3, 1.2])]
            story += [Paragraph(escape(x[2:]), styles["Normal"]) for x in cap_md if x.startswith("- ")]
        lines = [f"alerts: {m['alerts']['fired']} fired, {duration(m['alerts']['seconds_in_alert'])} in alert"]
        lines += [f"{_at(e['at'], tz)} {e['scope']}: {e['from'] or '-'} -> {e['to']} ({e['actor']})"
                  for e in m["changes"]]
        lines += [f"pending: {p['scope']} ({p['stage']}): {p['action']}" for p in m["pending"]]
        lines += [f"drafter {d['challenger']} vs {d['reference']} on {d['scope']}: alpha {_f(d['alpha'][0])} -> "
                  f"{_f(d['alpha'][1])}, P99 TPOT {d['tpot_p99_verdict'] or 'n/a'}" for d in m["drafters"]]
        story += [Spacer(1, 8)] + [Paragraph(escape(x), styles["Normal"]) for x in lines[:40]]
    doc.build(story)
    return buf.getvalue()


def export(r: dict[str, Any], fmt: str) -> bytes:
    if fmt == "md":
        return markdown(r).encode()
    if fmt == "csv":
        return csv_text(r).encode()
    if fmt == "pdf":
        return pdf_bytes(r)
    raise ValueError(f"format must be md, csv or pdf, got {fmt!r}")
