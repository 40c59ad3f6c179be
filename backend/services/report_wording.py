"""How the weekly report words its figures on every surface (web page, Markdown, CSV, PDF, digest): the
stamp, the summary table, numbers and money (domain.money: "saved this week so far (N h of data)"), the
capacity and context-length tables."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from backend.domain import context_view as cv
from backend.domain import money, wording
from backend.domain.engines import wording as engine_words
from backend.schemas.summary import MIXED


def gate_text(r: dict[str, Any]) -> str:
    """The gate every surface of the report states: alpha against each scope's alpha_low threshold of the
    alert rules (as the rollout gate compares it), the default where no rule applies. 'alpha >= 0.55' when
    every scope has the same one, else each distinct threshold with the scopes it holds for."""
    by: dict[float, set[str]] = {}
    for m in r["models"]:
        for c in m["classes"]:
            if c.get("threshold") is not None:
                by.setdefault(c["threshold"], set()).add(c["scope"])
    if len(by) <= 1:
        return f"alpha >= {next(iter(by), r['threshold']):.2f}"
    default = max(by, key=lambda t: len(by[t]))
    rest = "; ".join(f"{', '.join(sorted(by[t]))} {t:.2f}" for t in sorted(by) if t != default)
    return f"alpha >= the class's alpha_low threshold ({rest}; every other scope {default:.2f})"


def stamp(r: dict[str, Any]) -> str:
    """The window every value of the report is measured over and when it was computed: a complete week
    is fixed (the text never changes), a week in progress says up to when and that it is still moving."""
    tz = r["timezone"]
    if r["complete"] or not r.get("generated_at"):
        return (f"Values over the whole week, {at_local(r['start'], tz)} to {at_local(r['end'], tz)} ({tz}); stages as "
                "at the week's end.")
    start, now = datetime.fromisoformat(r["start"]), datetime.fromisoformat(r["generated_at"])
    return (f"Values over {wording.span_text((now - start).total_seconds())} so far, {at_local(r['start'], tz)} to "
            f"{at_local(r['generated_at'], tz)} ({tz}), computed {at_local(r['generated_at'], tz)}; the week is in "
            "progress, so they still change; stages as at that time.")


SUMMARY_HEAD = ["model", "engine", "stage", "alpha mixed", "last week", "change", "speedup", "alerts fired", "time in alert",
                "pending"]


def num(v: float | None, digits: int = 3, sign: str = "") -> str:
    return "n/a" if v is None else f"{v:{sign}.{digits}f}"


def summary_table(r: dict[str, Any]) -> dict[str, Any]:
    """The report's opening table, one row per model: the web page, the Markdown and the PDF all show
    these rows (head + rows of text)."""
    rows = []
    for m in r["models"]:
        mixed = next((c for c in m["classes"] if c["scope"] == MIXED), {})
        engines = m.get("engines") or ["vllm"]
        alpha = mixed.get("alpha_text") or num(mixed.get("alpha"))
        rows.append([m["model"], engine_words.engines_text(engines), wording.stage_text(m["stage"]), alpha,
                     num(mixed.get("alpha_prev")), num(mixed.get("alpha_delta"), sign="+"),
                     num(mixed.get("speedup"), 2), str(m["alerts"]["fired"]),
                     duration(m["alerts"]["seconds_in_alert"]), str(len(m["pending"]))])
    return {"head": list(SUMMARY_HEAD), "rows": rows}


def duration(seconds: float) -> str:
    """"3h05m": the one format for time in alert (report page, Markdown, PDF, digest)."""
    h, rem = divmod(round(seconds), 3600)
    return f"{h}h{rem // 60:02d}m"


def has_data(r: dict[str, Any]) -> bool:
    """Whether any model measured anything in the report's week (an alpha on some scope, or alerts)."""
    return any(c.get("alpha") is not None for m in r["models"] for c in m["classes"]) or any(
        m["alerts"]["fired"] for m in r["models"])


def fmt(v: Any, d: int = 3) -> str:
    return "n/a" if v is None else f"{v:.{d}f}" if isinstance(v, float) else str(v)


def at_local(iso: str | None, tz: str) -> str:
    """'2026-11-25 06:00' in the report's time zone (the header names it): no seconds, no microseconds."""
    if not iso:
        return "n/a"
    return datetime.fromisoformat(iso).astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M")


def method_drafter(c: dict[str, Any]) -> tuple[str, str]:
    """(method, drafter): the spec method always; the drafter's name only where the pools report one."""
    return c.get("spec_mode") or "n/a", c.get("drafter") or "n/a"


def currency_of(r: dict[str, Any]) -> str:
    return r.get("currency") or money.DEFAULT_CURRENCY


def _interval(m: dict[str, Any], currency: str) -> str:
    return money.interval_text(m.get("saved_this_week_so_far_low"), m.get("saved_this_week_so_far_high"), currency)


def _saved(m: dict[str, Any], currency: str) -> str:
    return money.saved_week_cell(m.get("saved_this_week_so_far"), m.get("hours_of_data"), currency)


SAVING_HEAD = ("Saved this week so far: over the week until now (the whole week once it is over), the replica-hours the baseline would have needed for "
               "the same output tokens in the same concurrency band, minus those used, times the configured GPU-hour "
               "price (negative: a loss), with the hours of data it rests on; 95 % bootstrap interval over time bins.")


def capacity_summary(r: dict[str, Any]) -> list[str]:
    """The managers' lines: one per model and the fleet total."""
    cur = currency_of(r)
    out = [f"| model | {money.SAVED_WEEK_SO_FAR} | 95 % interval |", "|---|---:|---:|"]
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
    cur = cp.get("currency") or money.DEFAULT_CURRENCY
    price = "not set" if cp.get("gpu_hour_price") is None else money.money_text(cp["gpu_hour_price"], cur)
    out = ["", f"Capacity and money (GPU-hour price {price}, {cp.get('gpus_per_replica')} GPU(s) per replica):", "",
           ("| scope | method | operating band | tokens/s per replica | baseline | cost per 1M tokens | baseline "
            f"| {money.SAVED_WEEK_SO_FAR} | 95 % interval | stops paying from |"),
           "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for x in cp["lines"]:
        stop = x["stops_paying_band"] or "never"
        if x["stops_paying_band"] and not x["stops_paying_significant"]:
            stop += " (not significant)"
        out.append(f"| {x['scope']} | {x['spec_mode']} | {x.get('operating_band') or '-'} | {fmt(x['per_replica'], 1)} | {fmt(x['per_replica_baseline'], 1)} "
                   f"| {money.money_text(x['cost_per_mtok_spec'], cur)} | {money.money_text(x['cost_per_mtok_baseline'], cur)} "
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


def md_table(t: dict[str, Any]) -> list[str]:
    """A head + rows table as Markdown (text columns left, the rest right-aligned)."""
    left = {"model", "engine", "stage", "scope", "method", "drafter"}
    return ["| " + " | ".join(t["head"]) + " |", "|" + "|".join("---" if h in left else "---:" for h in t["head"]) + "|",
            *("| " + " | ".join(row) + " |" for row in t["rows"])]


def stage_change(e: dict[str, Any]) -> str:
    return f"{wording.stage_text(e['from']) if e['from'] else '-'} -> {wording.stage_text(e['to'])}"
