"""The weekly report as CSV: rows of four kinds (class, mixed, model total, context band; see csv_rows and
docs/report-csv.md), money columns naming the report's currency."""

from __future__ import annotations

import csv
import io
from typing import Any

from backend.services import report_changes
from backend.services import report_wording as rw

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


def csv_header(field: str, currency: str) -> str:
    """A money column names its currency: 'saved_this_week_so_far (USD)'."""
    return f"{field} ({currency})" if field in MONEY_CSV else field


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
    cur = rw.currency_of(r)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([csv_header(f, cur) for f in CSV_FIELDS])
    changes = [{"week": r["week"], **x} for x in report_changes.csv_rows(r.get("what_changed", []))]
    for row in changes + csv_rows(r):  # the report opens with what changed
        w.writerow(["" if row.get(f) is None else row.get(f, "") for f in CSV_FIELDS])
    return buf.getvalue()
