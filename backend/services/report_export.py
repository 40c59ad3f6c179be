"""The weekly report as Markdown (stable: fixed formats, no generation time), CSV (one row per model x
scope) and PDF (reportlab: a summary page, then one page per model with an alpha chart this week vs
last week and the tables)."""

from __future__ import annotations

import csv
import io
from typing import Any
from xml.sax.saxutils import escape

from backend.services.report import duration, has_data

MEDIA = {"md": "text/markdown; charset=utf-8", "csv": "text/csv; charset=utf-8", "pdf": "application/pdf"}
CSV_FIELDS = ("week", "model", "model_stage", "scope", "stage", "spec_mode", "drafter", "alpha", "alpha_prev", "alpha_delta",
              "tau", "margin", "speedup", "drafts", "tpot_p99_verdict", "itl_p99_verdict", "alerts_fired",
              "seconds_in_alert", "pending", "cost_per_mtok_spec", "cost_per_mtok_baseline", "saving", "saving_low",
              "saving_high", "stops_paying_band")
CAPACITY_CSV = CSV_FIELDS[-6:]


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


def _money(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.2f}"


def _interval(m: dict[str, Any], key: str = "saving") -> str:
    lo, hi = m.get(f"{key}_low"), m.get(f"{key}_high")
    return "n/a" if lo is None or hi is None else f"{_money(lo)} to {_money(hi)}"


SAVING_HEAD = ("Saving from speculation: the replica-hours the baseline would have needed for the same output tokens "
               "in the same concurrency band, minus those used, times the configured GPU-hour price (negative: a "
               "loss); 95 % bootstrap interval over time bins.")


def capacity_summary(r: dict[str, Any]) -> list[str]:
    """The managers' lines: one per model and the fleet total."""
    out = ["| model | saving this week | 95 % interval | per week |", "|---|---:|---:|---:|"]
    for m in r["models"]:
        t = m.get("capacity", {}).get("total", {})
        out.append(f"| {m['model']} | {_money(t.get('saving'))} | {_interval(t)} | {_money(t.get('saving_per_week'))} |")
    t = r.get("capacity_total", {})
    out.append(f"| fleet | {_money(t.get('saving'))} | {_interval(t)} | {_money(t.get('saving_per_week'))} |")
    return out


def capacity_lines(m: dict[str, Any]) -> list[str]:
    cp = m.get("capacity") or {}
    if not cp.get("lines"):
        return []
    price = "not set" if cp.get("gpu_hour_price") is None else _money(cp["gpu_hour_price"])
    out = ["", f"Capacity and money (GPU-hour price {price}, {cp.get('gpus_per_replica')} GPU(s) per replica):", "",
           ("| scope | method | tokens/s per replica | baseline | cost per 1M tokens | baseline | saving | 95 % interval "
           "| stops paying from |"), "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for x in cp["lines"]:
        stop = x["stops_paying_band"] or "never"
        if x["stops_paying_band"] and not x["stops_paying_significant"]:
            stop += " (not significant)"
        out.append(f"| {x['scope']} | {x['spec_mode']} | {_f(x['per_replica'], 1)} | {_f(x['per_replica_baseline'], 1)} "
                   f"| {_money(x['cost_per_mtok_spec'])} | {_money(x['cost_per_mtok_baseline'])} | {_money(x['saving'])} "
                   f"| {_interval(x)} | {stop} |")
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


def _capacity_cells(m: dict[str, Any], c: dict[str, Any]) -> dict[str, Any]:
    """The capacity line of the row's scope and spec mode (the model's total on the mixed row)."""
    cp = m.get("capacity") or {}
    if c["scope"] == "mixed":
        line = cp.get("total", {})
    else:
        line = next((x for x in cp.get("lines", []) if x["scope"] == c["scope"] and x["spec_mode"] == c["spec_mode"]), {})
    return {k: "" if line.get(k) is None else line[k] for k in CAPACITY_CSV}


def csv_text(r: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for m in r["models"]:
        stages = {s["scope"]: s["stage"] for s in m["scopes"]}
        pending = {p["scope"] for p in m["pending"]}
        for c in m["classes"]:
            w.writerow({"week": r["week"], "model": m["model"], "model_stage": m["stage"], "scope": c["scope"],
                        "stage": stages.get(c["scope"], ""), "spec_mode": c["spec_mode"], "drafter": c.get("drafter") or "",
                        **{k: "" if c[k] is None else c[k] for k in ("alpha", "alpha_prev", "alpha_delta", "tau",
                                                                     "margin", "speedup", "drafts")},
                        "tpot_p99_verdict": c["tpot_p99_verdict"] or "", "itl_p99_verdict": c["itl_p99_verdict"] or "",
                        "alerts_fired": m["alerts"]["fired"], "seconds_in_alert": m["alerts"]["seconds_in_alert"],
                        "pending": "yes" if c["scope"] in pending else "",
                        **_capacity_cells(m, c)})
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
                     if i != 1], [3, 2, 3, 2]), Spacer(1, 18)]
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
                      table([[x.strip() for x in line.strip("|").split("|")] for line in cap_md[3:]
                             if line.startswith("|") and not line.startswith("|---")],
                            [1.1, 1.1, 1.2, 1.1, 1.2, 1.1, 1, 1.6, 1.4])]
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
