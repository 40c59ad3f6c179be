"""The weekly report as Markdown (stable: fixed formats, no generation time), CSV (one row per model x
scope) and PDF (reportlab: a summary page, then one page per model with an alpha chart this week vs
last week and the tables)."""

from __future__ import annotations

import csv
import io
from typing import Any
from xml.sax.saxutils import escape

from backend.services.report import has_data

MEDIA = {"md": "text/markdown; charset=utf-8", "csv": "text/csv; charset=utf-8", "pdf": "application/pdf"}
CSV_FIELDS = ("week", "model", "model_stage", "scope", "stage", "spec_mode", "alpha", "alpha_prev", "alpha_delta",
              "tau", "margin", "speedup", "drafts", "tpot_p99_verdict", "itl_p99_verdict", "alerts_fired",
              "seconds_in_alert", "pending")


def _f(v: Any, d: int = 3) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:.{d}f}"
    return str(v)


def _delta(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.3f}"


def _dur(seconds: float) -> str:
    h, rem = divmod(round(seconds), 3600)
    return f"{h}h{rem // 60:02d}m"


def markdown(r: dict[str, Any]) -> str:
    out = [f"# specwatch weekly rollout report: {r['week']}", "",
           f"{r['start']} to {r['end']} ({r['timezone']}); compared with {r['previous_week']}. "
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
                   f"{_delta(mixed.get('alpha_delta'))} | {m['alerts']['fired']} | {_dur(m['alerts']['seconds_in_alert'])} "
                   f"| {len(m['pending'])} |")
    for m in r["models"]:
        out += ["", f"## {m['model']}", "", f"Stage: **{m['stage']}**" + (f" (step {m['step']} of 5)" if m["step"] is not None else ""), ""]
        if m["scopes"]:
            out.append("Per scope: " + ", ".join(
                f"{s['scope']} {s['stage']}" + (f" (was {s['stage_at_start']})" if s["stage_at_start"] not in (None, s["stage"]) else "")
                for s in m["scopes"]))
            out.append("")
        out += ["| scope | drafter | alpha | last week | change | tau | margin | speedup | P99 TPOT | P99 ITL |",
                "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
        for c in m["classes"]:
            out.append(f"| {c['scope']} | {c['spec_mode']} | {_f(c['alpha'])} | {_f(c['alpha_prev'])} | "
                       f"{_delta(c['alpha_delta'])} | {_f(c['tau'])} | {_f(c['margin'])} | {_f(c['speedup'], 2)} | "
                       f"{c['tpot_p99_verdict'] or 'n/a'} | {c['itl_p99_verdict'] or 'n/a'} |")
        out += ["", "What changed this week:"]
        out += [f"- {e['at']} {e['scope']}: {e['from'] or '-'} -> {e['to']} ({e['kind']}, {e['actor']}): {e['reason']}"
                for e in m["changes"]] or ["- nothing"]
        out += ["", f"Alerts: {m['alerts']['fired']} fired, {_dur(m['alerts']['seconds_in_alert'])} in alert."]
        out += [f"- {a['rule']} ({a['severity']}, {a['traffic_class'] or 'model'}): fired {a['fired_at']}, "
                f"resolved {a['resolved_at'] or 'still firing'}, {_dur(a['seconds_in_week'])} this week" for a in m["alerts"]["items"]]
        out += ["", "Decisions taken:"]
        out += [f"- {d['at']} {d['scope']}: {d['action']} by {d['actor']}: {d['reason']}" for d in m["decisions"]] or ["- none"]
        out += ["", "Decisions pending:"]
        out += [f"- {p['scope']} ({p['stage']} since {p['since']}): {p['action']}" for p in m["pending"]] or ["- none"]
        if m["drafters"]:
            out += ["", "Drafter comparison (challenger vs reference):", "",
                    "| scope | reference | challenger | alpha | tau | P99 TPOT |", "|---|---|---|---|---|---|"]
            out += [f"| {d['scope']} | {d['reference']} | {d['challenger']} | {_f(d['alpha'][0])} -> {_f(d['alpha'][1])} | "
                    f"{_f(d['tau'][0])} -> {_f(d['tau'][1])} | {d['tpot_p99_verdict'] or 'n/a'} |" for d in m["drafters"]]
    return "\n".join(out) + "\n"


def csv_text(r: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for m in r["models"]:
        stages = {s["scope"]: s["stage"] for s in m["scopes"]}
        pending = {p["scope"] for p in m["pending"]}
        for c in m["classes"]:
            w.writerow({"week": r["week"], "model": m["model"], "model_stage": m["stage"], "scope": c["scope"],
                        "stage": stages.get(c["scope"], ""), "spec_mode": c["spec_mode"],
                        **{k: "" if c[k] is None else c[k] for k in ("alpha", "alpha_prev", "alpha_delta", "tau",
                                                                     "margin", "speedup", "drafts")},
                        "tpot_p99_verdict": c["tpot_p99_verdict"] or "", "itl_p99_verdict": c["itl_p99_verdict"] or "",
                        "alerts_fired": m["alerts"]["fired"], "seconds_in_alert": m["alerts"]["seconds_in_alert"],
                        "pending": "yes" if c["scope"] in pending else ""})
    return buf.getvalue()


def _chart(m: dict[str, Any]):
    from reportlab.graphics.charts.barcharts import VerticalBarChart
    from reportlab.graphics.charts.legends import Legend
    from reportlab.graphics.shapes import Drawing, Line
    from reportlab.lib import colors

    classes = m["classes"]
    d = Drawing(460, 190)
    bc = VerticalBarChart()
    bc.x, bc.y, bc.width, bc.height = 40, 30, 300, 140
    bc.data = [[c["alpha_prev"] or 0 for c in classes], [c["alpha"] or 0 for c in classes]]
    bc.categoryAxis.categoryNames = [c["scope"] for c in classes]
    bc.valueAxis.valueMin, bc.valueAxis.valueMax, bc.valueAxis.valueStep = 0, 1, 0.2
    bc.bars[0].fillColor, bc.bars[1].fillColor = colors.lightgrey, colors.steelblue
    d.add(bc)
    y = bc.y + bc.height * m.get("threshold", 0.55)
    d.add(Line(bc.x, y, bc.x + bc.width, y, strokeColor=colors.red, strokeDashArray=[3, 2]))
    lg = Legend()
    lg.x, lg.y = 355, 150
    lg.colorNamePairs = [(colors.lightgrey, "last week"), (colors.steelblue, "this week"), (colors.red, "gate")]
    d.add(lg)
    return d


def pdf_bytes(r: dict[str, Any]) -> bytes:
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    styles = getSampleStyleSheet()
    grid = TableStyle([("GRID", (0, 0), (-1, -1), 0.4, colors.grey), ("FONTSIZE", (0, 0), (-1, -1), 8),
                       ("BACKGROUND", (0, 0), (-1, 0), colors.whitesmoke)])
    buf = io.BytesIO()
    doc = SimpleDocTemplate(buf, pagesize=A4, title=f"specwatch weekly report {r['week']}", invariant=1)
    story: list = [Paragraph(f"specwatch weekly rollout report: {r['week']}", styles["Title"]),
                   Paragraph(escape(f"{r['start']} to {r['end']} ({r['timezone']}); gate alpha >= {r['threshold']:.2f}"),
                             styles["Normal"]), Spacer(1, 12)]
    rows = [["model", "stage", "alpha mixed", "last week", "alerts", "time in alert", "pending"]]
    for m in r["models"]:
        mixed = next((c for c in m["classes"] if c["scope"] == "mixed"), {})
        rows.append([m["model"], m["stage"], _f(mixed.get("alpha")), _f(mixed.get("alpha_prev")),
                     str(m["alerts"]["fired"]), _dur(m["alerts"]["seconds_in_alert"]), str(len(m["pending"]))])
    story.append(Table(rows, style=grid))
    for m in r["models"]:
        story += [PageBreak(), Paragraph(escape(m["model"]), styles["Heading1"]),
                  Paragraph(f"Stage: {m['stage']}", styles["Normal"]), Spacer(1, 6),
                  _chart({**m, "threshold": r["threshold"]}), Spacer(1, 6)]
        rows = [["scope", "drafter", "alpha", "last week", "tau", "margin", "P99 TPOT", "P99 ITL"]]
        rows += [[c["scope"], c["spec_mode"] or "", _f(c["alpha"]), _f(c["alpha_prev"]), _f(c["tau"]), _f(c["margin"]),
                  c["tpot_p99_verdict"] or "n/a", c["itl_p99_verdict"] or "n/a"] for c in m["classes"]]
        story.append(Table(rows, style=grid))
        lines = [f"{e['scope']}: {e['from'] or '-'} -> {e['to']} ({e['actor']})" for e in m["changes"]]
        lines += [f"pending: {p['scope']} ({p['stage']}): {p['action']}" for p in m["pending"]]
        lines += [f"drafter {d['challenger']} vs {d['reference']} on {d['scope']}: alpha {_f(d['alpha'][0])} -> "
                  f"{_f(d['alpha'][1])}, P99 TPOT {d['tpot_p99_verdict'] or 'n/a'}" for d in m["drafters"]]
        story += [Spacer(1, 6)] + [Paragraph(escape(x), styles["Normal"]) for x in lines[:40]]
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
