"""The weekly report as a file: Markdown here (stable: fixed formats, no generation time), CSV
(services.report_csv) and PDF (services.report_pdf)."""

from __future__ import annotations

from typing import Any

from backend.domain.wording import action_text, stage_text, verdict_text
from backend.services import report_changes
from backend.services import report_wording as rw
from backend.services.report_csv import csv_text
from backend.services.report_pdf import pdf_bytes

MEDIA = {"md": "text/markdown; charset=utf-8", "csv": "text/csv; charset=utf-8", "pdf": "application/pdf"}


def markdown(r: dict[str, Any]) -> str:
    tz = r["timezone"]
    out = [f"# specwatch weekly rollout report: {r['week']}", "",
           f"{rw.at_local(r['start'], tz)} to {rw.at_local(r['end'], tz)} ({tz}); compared with {r['previous_week']}. "
           f"Gate: {r.get('gate') or 'alpha >= ' + format(r['threshold'], '.2f')} on the production mix." + ("" if r["complete"] else
                                                                              " Week in progress."), ""]
    if not rw.has_data(r):
        return "\n".join([*out, (f"No data for {r['week']}: no model reported speculative-decoding metrics that "
                                  "week (is the collector running, and is this the week you meant?)"), ""])
    out += [rw.stamp(r), "", *report_changes.markdown_lines(r.get("what_changed", []), lambda iso: rw.at_local(iso, tz)), ""]
    out += rw.md_table(rw.summary_table(r))
    out += ["", rw.SAVING_HEAD, "", *rw.capacity_summary(r)]
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
            method, drafter = rw.method_drafter(c)
            out.append(f"| {c['scope']} | {c.get('engine') or 'vLLM'} | {method} | {drafter} | "
                       f"{c.get('alpha_text') or rw.fmt(c['alpha'])} | {rw.fmt(c['alpha_prev'])} | "
                       f"{rw.num(c['alpha_delta'], sign='+')} | {c.get('tau_text') or rw.fmt(c['tau'])} | "
                       f"{c.get('margin_text') or rw.fmt(c['margin'])} | {rw.fmt(c['speedup'], 2)} | "
                       f"{c.get('concurrency_band') or '-'} | "
                       f"{c.get('tpot_text') or verdict_text(c['tpot_p99_verdict'])} | "
                       f"{c.get('itl_text') or verdict_text(c['itl_p99_verdict'])} |")
        notes = sorted({n for c in m["classes"] for n in (c.get("excluded"),) if n}
                       | {f"estimated: {c['estimate_basis']}" for c in m["classes"]
                          if c.get("alpha_estimate") is not None and c.get("estimate_basis")})
        out += ["", *(f"- {n}" for n in notes)] if notes else []
        out += rw.capacity_lines(m)
        out += rw.context_lines(m)
        why = [f"- {c['scope']} P99 {name} {verdict_text(c[f'{key}_p99_verdict'])}: {c[f'{key}_p99_reason']}"
               for c in m["classes"] for key, name in (("tpot", "TPOT"), ("itl", "ITL")) if c.get(f"{key}_p99_reason")]
        out += ["", "P99 verdicts (spec vs baseline):", *why] if why else []
        out += ["", "Rollout stage changes:"]
        out += [f"- {rw.at_local(e['at'], tz)} {e['scope']}: {rw.stage_change(e)} ({e['kind']}, {e['actor']}): {e['reason']}"
                for e in m["changes"]] or ["- nothing"]
        out += ["", (f"Alerts: {m['alerts']['fired']} fired, {rw.duration(m['alerts']['seconds_in_alert'])} in alert "
                     "(overlapping alerts counted once).")]
        out += [f"- {a['rule']} ({a['severity']}, {a['traffic_class'] or 'model'}): fired {rw.at_local(a['fired_at'], tz)}, "
                + (f"resolved {rw.at_local(a['resolved_at'], tz)}" if a["resolved_at"] else "still firing")
                + f", {rw.duration(a['seconds_in_week'])} this week" for a in m["alerts"]["items"]]
        out += ["", "Decisions taken:"]
        out += [f"- {rw.at_local(d['at'], tz)} {d['scope']}: {action_text(d['action'])} by {d['actor']}: {d['reason']}"
                for d in m["decisions"]] or ["- none"]
        out += ["", "Decisions pending:"]
        out += [f"- {p['scope']}: {stage_text(p['stage'])} since {rw.at_local(p['since'], tz)}; to do: {p['action']}"
                for p in m["pending"]] or ["- none"]
        if m["drafters"]:
            out += ["", "Drafter comparison (challenger vs reference):", "",
                    "| scope | reference | challenger | alpha | tau | P99 TPOT |", "|---|---|---|---|---|---|"]
            out += [f"| {d['scope']} | {d['reference']} | {d['challenger']} | {rw.fmt(d['alpha'][0])} -> {rw.fmt(d['alpha'][1])} | "
                    f"{rw.fmt(d['tau'][0])} -> {rw.fmt(d['tau'][1])} | {verdict_text(d['tpot_p99_verdict'])} |" for d in m["drafters"]]
    return "\n".join(out) + "\n"


def export(r: dict[str, Any], fmt: str) -> bytes:
    if fmt == "md":
        return markdown(r).encode()
    if fmt == "csv":
        return csv_text(r).encode()
    if fmt == "pdf":
        return pdf_bytes(r)
    raise ValueError(f"format must be md, csv or pdf, got {fmt!r}")
