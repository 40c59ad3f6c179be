"""The weekly report as PDF (reportlab): a summary page, then one page per model with an alpha chart this
week vs last week and the tables."""

from __future__ import annotations

import io
from typing import Any
from xml.sax.saxutils import escape

from backend.domain import context_view as cv
from backend.domain.wording import stage_text, verdict_text
from backend.services import report_changes
from backend.services import report_wording as rw


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

    summary = rw.summary_table(r)
    mixed_of = [next((c for c in m["classes"] if c["scope"] == "mixed"), {}) for m in r["models"]]
    story: list = [para(f"specwatch weekly rollout report: {r['week']}", "Title"),
                   para(f"{rw.at_local(r['start'], tz)} to {rw.at_local(r['end'], tz)} ({tz}); compared with {r['previous_week']}; "
                        f"gate {r.get('gate') or 'alpha >= ' + format(r['threshold'], '.2f')}"), para(rw.stamp(r)), Spacer(1, 12)]
    changed = report_changes.markdown_lines(r.get("what_changed", []), lambda iso: rw.at_local(iso, tz))
    story += [para(changed[0].lstrip("# "), "Heading3"), *(para(x.strip("- ").strip().replace("\u2212", "-")) for x in changed[2:]), Spacer(1, 12),
                   table([summary["head"], *summary["rows"]], [2.6, 2.6, 1.1, 1.1, 1.1, 1.1, 1.1, 1.2, 1]),
                   Spacer(1, 12), para(rw.SAVING_HEAD), Spacer(1, 4),
                   table(_md_rows(rw.capacity_summary(r)), [3, 3.5, 3.5]), Spacer(1, 18)]
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
        rows += [[c["scope"], *rw.method_drafter(c), rw.fmt(c["alpha"]), rw.fmt(c["alpha_prev"]), rw.fmt(c["tau"]), rw.fmt(c["margin"]),
                  rw.fmt(c["speedup"], 2), verdict_text(c["tpot_p99_verdict"]), verdict_text(c["itl_p99_verdict"])]
                 for c in m["classes"]]
        story += [Spacer(1, 8), table(rows, [1.2, 1.1, 1.7, 0.9, 0.9, 0.8, 0.9, 0.9, 1.5, 1.5])]
        cap_md = rw.capacity_lines(m)
        if cap_md:
            cap_rows = _md_rows(cap_md[3:])
            story += [Spacer(1, 8), para(cap_md[1]), Spacer(1, 4),
                      table(cap_rows, [1.0, 1.0, 1.1, 1.0, 1.1, 1.0, 1.0, 1.6, 1.3][:len(cap_rows[0])])]
            story += [para(x[2:]) for x in cap_md if x.startswith("- ")]
        story += context_story(m, table, para)
        lines = [f"alerts: {m['alerts']['fired']} fired, {rw.duration(m['alerts']['seconds_in_alert'])} in alert"]
        lines += ["Rollout stage changes:"]
        lines += [f"- {rw.at_local(e['at'], tz)} {e['scope']}: {rw.stage_change(e)} ({e['actor']})" for e in m["changes"]] or ["- nothing"]
        lines += [f"pending: {p['scope']}: {stage_text(p['stage'])}; to do: {p['action']}" for p in m["pending"]]
        lines += [f"drafter {d['challenger']} vs {d['reference']} on {d['scope']}: alpha {rw.fmt(d['alpha'][0])} -> "
                  f"{rw.fmt(d['alpha'][1])}, P99 TPOT {verdict_text(d['tpot_p99_verdict'])}" for d in m["drafters"]]
        story += [Spacer(1, 8)] + [para(x) for x in lines[:40]]
    return story


def _pdf_text(text: str) -> str:
    """The PDF's standard fonts have no Greek letters: α is written "alpha" there."""
    return text.replace("α", "alpha")


def context_story(m: dict[str, Any], table, para) -> list:
    """The model's "α by context length" table in the PDF (the Markdown's rows, α spelt out)."""
    from reportlab.platypus import Spacer

    lines = rw.context_lines(m)
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
