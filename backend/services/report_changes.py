"""The weekly report's opening section, "What changed this week": each change of drafter, K or vLLM version
(config_changes, found by collection or annotated by an operator) and each spec mode first seen in the week,
with its A/B verdicts (services.compare: before/after the change; a new spec mode side by side against the
model's incumbent spec mode over the week)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import config_repo
from backend.domain import ab_compare as ab
from backend.schemas.summary import MIXED
from backend.services import analytics, compare
from backend.services.errors import InvalidParameter, NotFound
from backend.services.windows import Range

MAX_ITEMS = 20  # per report: each is a comparison of its own
FIELD_WORDS = {"num_spec_tokens": "K", "drafter": "drafter", "vllm_version": "vLLM"}
SHOWN = ("alpha", "measured_speedup", "cost_per_mtok")


def _verdicts(r: dict[str, Any], scope: str) -> dict[str, Any]:
    s = next((x for x in r["scopes"] if x["scope"] == scope), None)
    if s is None:
        return {}
    out: dict[str, Any] = {}
    for m in s["metrics"]:
        if m["metric"] in SHOWN:
            out[m["metric"]] = {"verdict": m["verdict"], "change": m["change"], "change_low": m["change_low"],
                                "change_high": m["change_high"],
                                "text": ab.percent_text(m["change"], m["change_low"], m["change_high"])}
    out["p99_tpot"] = {"verdict": s["p99"]["tpot"]["verdict"]}
    out["p99_itl"] = {"verdict": s["p99"]["itl"]["verdict"]}
    return out


def week_changes(session: Session, *, models: list[str], rng: Range, now: datetime,
                 settings: Settings) -> list[dict[str, Any]]:
    """The week's changes, oldest first, at most MAX_ITEMS (`truncated` on the last when more were found)."""
    items: list[dict[str, Any]] = []
    for model in models:
        rows = config_repo.changes(session, start=rng.start, end=min(rng.end, now), model_name=model)
        grouped: dict[tuple, list[config_repo.ChangeRow]] = {}
        for c in rows:
            grouped.setdefault((c.at, c.spec_mode), []).append(c)
        for (at, mode), group in grouped.items():
            what = "; ".join(f"{FIELD_WORDS.get(c.field, c.field)} {c.old_value or '?'} -> {c.new_value}"
                             for c in sorted(group, key=lambda c: (c.traffic_class, c.field)))
            classes = sorted({c.traffic_class for c in group})
            item = {"at": at.isoformat(), "model": model, "spec_mode": mode, "classes": classes, "kind": "change",
                    "what": what, "source": sorted({c.source for c in group})}
            try:
                r = compare.compare(session, model=model, a=mode, at=at, now=now, settings=settings)
                scope = classes[0] if len(classes) == 1 else MIXED
                item |= {"scope": scope, "verdicts": _verdicts(r, scope), "sentence": r["sentence"]}
            except (InvalidParameter, NotFound) as exc:
                item |= {"scope": None, "verdicts": {}, "sentence": f"no comparison: {exc}"}
            items.append(item)
        items += _new_modes(session, model=model, rng=rng, now=now, settings=settings)
    items.sort(key=lambda x: (x["at"], x["model"], x["spec_mode"]))
    if len(items) > MAX_ITEMS:
        items = items[:MAX_ITEMS]
        items[-1] = {**items[-1], "truncated": True}
    return items


def _new_modes(session: Session, *, model: str, rng: Range, now: datetime, settings: Settings) -> list[dict]:
    """Spec modes first seen this week beside an older one: side by side over the week so far."""
    spec = [p for p in analytics.model_pools(session, model)
            if p.spec_mode != settings.baseline_mode and getattr(p, "origin", "engine") == "engine"]
    first = {}
    for p in spec:
        first[p.spec_mode] = min(first.get(p.spec_mode, p.first_seen), p.first_seen)
    old = sorted((m for m, t in first.items() if t < rng.start), key=lambda m: (first[m], m))
    out = []
    for mode, t in sorted(first.items(), key=lambda x: (x[1], x[0])):
        if not rng.start <= t < rng.end or not old:
            continue
        ref = old[0]
        item = {"at": t.isoformat(), "model": model, "spec_mode": mode, "classes": [], "kind": "new_spec_mode",
                "what": f"new spec mode {mode} beside {ref}", "source": ["collection"]}
        try:
            r = compare.compare(session, model=model, a=ref, b=mode, rng=Range(t, min(rng.end, now)), now=now,
                                settings=settings)
            item |= {"scope": MIXED, "verdicts": _verdicts(r, MIXED), "sentence": r["sentence"]}
        except (InvalidParameter, NotFound) as exc:
            item |= {"scope": None, "verdicts": {}, "sentence": f"no comparison: {exc}"}
        out.append(item)
    return out


CHANGE_CSV = ("at", "what", "change_source", *(f"{k}_change{x}" for k in SHOWN for x in ("", "_low", "_high")),
              *(f"{k}_change_verdict" for k in (*SHOWN, "p99_tpot", "p99_itl")), "sentence")


def csv_rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The section's rows for the report's CSV (row "change"): per item, its instant, what changed, who saw
    it, and each verdict's change B/A - 1 with its 95 % interval, as the page and the JSON show them."""
    out = []
    for x in items:
        v = x.get("verdicts") or {}
        row = {"model": x["model"], "row": "change", "scope": x.get("scope") or "", "spec_mode": x["spec_mode"],
               "at": x["at"], "what": x["what"], "change_source": "+".join(x["source"]), "sentence": x["sentence"]}
        for key in SHOWN:
            m = v.get(key, {})
            row |= {f"{key}_change": m.get("change"), f"{key}_change_low": m.get("change_low"),
                    f"{key}_change_high": m.get("change_high")}
        for key in (*SHOWN, "p99_tpot", "p99_itl"):
            row[f"{key}_change_verdict"] = (v.get(key) or {}).get("verdict")
        out.append(row)
    return out


def markdown_lines(items: list[dict[str, Any]], at_text) -> list[str]:
    """The section in Markdown: one bullet per change, its verdicts, then its sentence."""
    out = ["## What changed this week", ""]
    if not items:
        return [*out, "- no drafter, K or vLLM version change this week"]
    for x in items:
        v = x.get("verdicts") or {}
        parts = [f"{name} {v[key]['text']} ({v[key]['verdict']})" for key, name in
                 (("alpha", "alpha"), ("measured_speedup", "speedup"), ("cost_per_mtok", "cost per 1 M tokens"))
                 if key in v]
        parts += [f"P99 {n} {v[k]['verdict']}" for k, n in (("p99_tpot", "TPOT"), ("p99_itl", "ITL")) if k in v]
        where = f"{x['model']} {x['spec_mode']}" + (f" ({', '.join(x['classes'])})" if x["classes"] else "")
        out.append(f"- {at_text(x['at'])} {where}: {x['what']}" + (f": {'; '.join(parts)}" if parts else ""))
        out.append(f"  {x['sentence']}")
    if items[-1].get("truncated"):
        out.append(f"- (the first {MAX_ITEMS} changes only)")
    return out
