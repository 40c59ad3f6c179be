"""Plain words for the identifiers a decision is made of: rollout stages, gate phases and results, P99
latency verdicts, and the stamp of a measured value (its window and when it was evaluated). One mapping
each, used by the rollout page, the weekly report (web, Markdown, PDF) and the Slack digest; the API and
the CSV keep the identifiers, the words are for people.

Pure: no I/O; times are formatted from the instants given.
"""

from __future__ import annotations

from datetime import UTC, datetime

# stage identifier -> what it means, in words a manager reads without the recipe at hand
STAGE_WORDS = {
    "no_data": "no data yet",
    "baseline": "baseline measured",
    "spec_on": "drafter on, gate not started",
    "measuring": "measuring acceptance",
    "gate_passed": "acceptance gate passed, checking latency",
    "rolled_out": "rolled out",
    "gate_failed": "stopped: acceptance below the gate",
    "gate_error": "stopped: no data to judge the gate",
    "held": "on hold for a person",
    "latency_failed": "stopped: latency got worse",
    "disabled": "speculation turned off",
    "domain_drafter_training": "domain drafter in training",
    "untracked": "not tracked yet",
}

# an operator's action on a track (and a snapshot) -> what was done
ACTION_WORDS = {
    "sign_off": "signed off",
    "disable": "turned speculation off",
    "domain_drafter": "moved to domain drafter training",
    "hold": "put on hold",
    "resume": "resumed (new gate run)",
    "snapshot": "froze a baseline snapshot",
}

# gate phase (the Argo-style state of the current gate run) -> words
PHASE_WORDS = {
    "idle": "not started",
    "running": "running",
    "passed": "passed",
    "failed": "failed",
    "error": "cannot measure",
    "inconclusive": "too little data",
}

# one gate or latency measurement -> words
RESULT_WORDS = {
    "pass": "pass",
    "fail": "fail",
    "inconclusive": "too little data",
    "error": "cannot measure",
}

# P99 latency verdict (the API's value) -> (label, what it means). The label says it; the meaning is the
# hover / tap text, followed by the verdict's own one-line reason where there is one.
VERDICT_WORDS = {
    "better": ("faster than baseline",
               "spec's P99 is in a lower histogram bucket than the baseline's, beyond sampling noise"),
    "worse": ("slower than baseline",
              "spec's P99 is in a higher histogram bucket than the baseline's, beyond sampling noise"),
    "no-significant-change": ("no clear change",
                              "the P99s are in different buckets but the difference is within sampling noise"),
    "unresolved": ("too close to tell",
                   ("both P99s fall in one histogram bucket, so the histogram cannot say which is faster; finer "
                    "histogram buckets in vLLM would")),
    "inconclusive": ("too little data", "too few requests on one side to compare P99s; wait for more traffic"),
}


def stage_text(stage: str | None) -> str:
    """'stopped: acceptance below the gate' for 'gate_failed'; an unknown identifier as it is."""
    if stage is None:
        return "not tracked yet"
    return STAGE_WORDS.get(stage, stage.replace("_", " "))


def action_text(action: str | None) -> str:
    return "" if action is None else ACTION_WORDS.get(action, action.replace("_", " "))


def phase_text(phase: str | None) -> str:
    return "not started" if phase is None else PHASE_WORDS.get(phase, phase)


def result_text(result: str | None) -> str:
    return "not measured" if result is None else RESULT_WORDS.get(result, result)


def verdict_text(verdict: str | None) -> str:
    """The verdict's label ('too close to tell' for 'unresolved'); 'n/a' for none."""
    if verdict is None:
        return "n/a"
    return VERDICT_WORDS.get(verdict, (verdict, ""))[0]


def verdict_meaning(verdict: str | None, reason: str | None = None) -> str:
    """What the verdict means, then (when given) its own one-line reason: the hover / tap text."""
    meaning = VERDICT_WORDS.get(verdict or "", ("", ""))[1]
    parts = [x for x in (meaning, reason) if x]
    return ". ".join(parts)


def explain(check: str, result: str | None, reason: str | None, *, model: str | None = None) -> str | None:
    """What went wrong and what to do, for a measurement that could not judge: `check` is "gate" or
    "latency", `result` its result, `reason` the recorded one-line reason. None for pass and fail (the
    reason says it)."""
    why = (reason or "").strip()
    if result == "error" and check == "gate":
        if why.startswith("query failed"):
            return (f"the database query for the window failed ({why.removeprefix('query failed:').strip()}); "
                    "the next evaluation retries on its own; if it keeps failing, check the API's log")
        if "no spec-decode data" in why:
            return ("the drafter's pool sent no acceptance counters in the window: check that the collector "
                    "scrapes it (the overview marks it stale); the gate resumes when data arrives")
        if "undefined" in why:
            return ("drafts were counted but no tokens were accepted or reported, so the acceptance rate is "
                    "undefined: check the pool's spec-decode metrics")
        return f"the gate could not be measured ({why or 'no reason recorded'}): check the pool's data"
    if result == "error" and check == "latency":
        return ("no baseline to compare P99 latency with: run a baseline pool (speculation off) beside the "
                f"drafter's, or freeze one with `specwatch rollout snapshot --model {model or 'MODEL'}`")
    if result == "inconclusive" and check == "gate":
        return (f"too little traffic to judge ({why or 'below the volume guard'}): wait for more drafts; "
                "the gate holds for a person after repeated low-volume evaluations")
    if result == "inconclusive" and check == "latency":
        if _unresolved(why):
            return (f"{VERDICT_WORDS['unresolved'][1]}: more data will not decide it, a person does (sign off, "
                    "resume or turn speculation off)")
        return VERDICT_WORDS["inconclusive"][1]
    return None


def _unresolved(reason: str | None) -> bool:
    why = reason or ""
    return "unresolved" in why or VERDICT_WORDS["unresolved"][0] in why


def check_text(check: str, result: str | None, reason: str | None = None) -> str:
    """A check's result in words; a latency check that is inconclusive because both P99s share a bucket
    says 'too close to tell', as its verdict does."""
    if check == "latency" and result == "inconclusive" and _unresolved(reason):
        return VERDICT_WORDS["unresolved"][0]
    return result_text(result)


def _clock(at: datetime, now: datetime | None) -> str:
    at = at.astimezone(UTC)
    same_day = now is not None and at.date() == now.astimezone(UTC).date()
    return at.strftime("%H:%M UTC" if same_day else "%b %d %H:%M UTC")


def span_text(seconds: float) -> str:
    """'6 h', '45 min', '1 h 30 min', '7 d'."""
    minutes = round(seconds / 60)
    d, rem = divmod(minutes, 1440)
    h, m = divmod(rem, 60)
    parts = [f"{d} d" if d else "", f"{h} h" if h else "", f"{m} min" if m else ""]
    return " ".join(p for p in parts if p) or "0 min"


def stamp(start: datetime | None, end: datetime | None, evaluated_at: datetime | None, *,
          now: datetime | None = None, every_seconds: float | None = None) -> str:
    """'over 6 h to 20:15 UTC, evaluated 20:15 UTC (every 15 min)': the window a value was measured
    over and when. The date is shown unless both instants fall on `now`'s day."""
    if start is None or end is None:
        text = "no window recorded"
    else:
        text = f"over {span_text((end - start).total_seconds())} to {_clock(end, now)}"
    if evaluated_at is not None:
        text += f", evaluated {_clock(evaluated_at, now)}"
    if every_seconds:
        text += f" (every {span_text(every_seconds)})"
    return text
