"""Alert rules and the alert lifecycle, pure: rule inputs -> a status; (state, status, now) -> new state.

Status of one evaluation: ``breached`` (the condition holds), ``ok`` (recovered past the hysteresis
margin), ``hold`` (between threshold and threshold + margin: neither fires nor resolves) or ``no_data``
(missing, stale or too little volume: never read as recovery, unlike Prometheus where an empty vector
resolves the alert, prometheus#17482).

Lifecycle (Prometheus' rules/alerting.go, plus hysteresis and no-data holding)::

    inactive|resolved --breached--> pending --breached for `for`--> firing
    pending --anything else--> inactive (one miss resets the timer, as in Prometheus)
    firing --ok for keep_firing_for--> resolved; firing --hold|no_data|breached--> firing

Why not SLO burn-rate tiers (alerting-and-rollout.md §6): with "alpha >= 0.55" as the objective the
error budget is 0.45, so the largest possible burn rate is 1/0.45 = 2.22 and the standard 14.4x / 6x /
3x tiers can never fire; what is left is "alpha < 0.55 on the long window". We keep the useful part
of the multi-window scheme as a floor alert: short AND long window below the threshold, a volume guard
on the long window and recovery hysteresis. Alpha < 0.55 is a proxy anyway; `margin_negative`
watches the business quantity (speedup below 1).

Durations (`for`, `keep_firing_for`) are met with the evaluation tick's tolerance: evaluations come every
interval but never exactly on time (beat and queue jitter), so a `for: 10m` condition first seen at one tick
is 599.8 s old ten ticks later. Without a tolerance it would fire one tick late (11 min). A duration counts
as met when the time elapsed is at least the duration minus FOR_TOLERANCE (a tenth) of the evaluation
interval (`for_tolerance`): never more than 6 s early at the default 60 s interval, never a tick late.

Time is a parameter everywhere (seconds since the epoch as float); nothing here reads a clock.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from backend.domain import thresholds as thr

Status = Literal["breached", "ok", "hold", "no_data"]
Phase = Literal["inactive", "pending", "firing", "resolved"]


@dataclass(frozen=True)
class Evaluation:
    status: Status
    value: float | None = None  # the number compared (alpha on the long window, speedup, ratio, age)
    threshold: float | None = None
    reason: str = ""
    values: Mapping[str, object] | None = None  # everything that went into it (the audit trail)


@dataclass(frozen=True)
class WindowStat:
    """Acceptance over one window: r = A/D and the volume behind it."""

    seconds: float
    rate: float | None
    drafts: float | None
    accepted: float | None = None  # A and D behind the rate: when given, thresholds compare them exactly
    draft_tokens: float | None = None

    def below(self, threshold: thr.Number) -> bool:
        """rate < threshold, exactly (thresholds.py): A*q < p*D on the counts when known, else the rate's
        decimal value; a window with no rate is never below."""
        return bool(thr.rate_below(self.rate, threshold, num=self.accepted, den=self.draft_tokens))

    def at_least(self, threshold: thr.Number) -> bool:
        return self.rate is not None and not self.below(threshold)


def _recover(value: float, threshold: float, margin: float) -> Status:
    return "ok" if thr.value_at_least(value, thr.plus(threshold, margin)) else "hold"


def alpha_low(short: WindowStat, long: WindowStat, *, threshold: float, recover_margin: float,
              min_drafts: float) -> Evaluation:
    """Breached when BOTH windows are below the threshold; ok when the short window is at or above
    threshold + margin and the long one at or above the threshold; hold in between. Comparisons are exact
    (thresholds.py): a window at exactly the threshold is not below it. The volume guard
    applies to the long window (fewer than min_drafts drafts: no_data) and the short window needs data."""
    values = {"short_window": short.seconds, "long_window": long.seconds, "alpha_short": short.rate,
              "alpha_long": long.rate, "drafts_short": short.drafts, "drafts_long": long.drafts,
              "min_drafts": min_drafts, "recover_at": float(thr.plus(threshold, recover_margin))}
    if long.rate is None or not long.drafts or long.drafts < min_drafts:
        return Evaluation("no_data", long.rate, threshold, f"volume below the guard ({long.drafts or 0:.0f} < "
                          f"{min_drafts:.0f} drafts)", values)
    if short.rate is None or not short.drafts:
        return Evaluation("no_data", long.rate, threshold, "no drafts in the short window", values)
    if short.below(threshold) and long.below(threshold):
        return Evaluation("breached", long.rate, threshold, "alpha below threshold on both windows", values)
    if short.at_least(thr.plus(threshold, recover_margin)) and long.at_least(threshold):
        return Evaluation("ok", long.rate, threshold, "recovered", values)
    return Evaluation("hold", long.rate, threshold, "inside the recovery band", values)


def margin_negative(speedup: float | None, *, source: str | None, min_speedup: float, recover_margin: float,
                    drafts: float | None, min_drafts: float, window: float) -> Evaluation:
    """Speculation is net-negative: speedup (measured when a baseline exists, else estimated) below 1."""
    values = {"speedup": speedup, "speedup_source": source, "drafts": drafts, "min_drafts": min_drafts,
              "window": window, "recover_at": min_speedup + recover_margin}
    if speedup is None or not drafts or drafts < min_drafts:
        return Evaluation("no_data", speedup, min_speedup, "no speedup or too little volume", values)
    if speedup < min_speedup:
        return Evaluation("breached", speedup, min_speedup, f"{source} speedup below {min_speedup:g}", values)
    return Evaluation(_recover(speedup, min_speedup, recover_margin), speedup, min_speedup, "", values)


def latency_regression(verdicts: Mapping[str, str | None], *, window: float,
                       details: Mapping[str, object] | None = None,
                       reasons: Mapping[str, str | None] | None = None) -> Evaluation:
    """Any P99 verdict "worse" breaches; all better / no-significant-change is ok; otherwise no_data
    (an inconclusive or unresolved verdict never resolves an alert). `reasons`: each verdict's one-line
    reason, quoted in the breach reason and kept in the values."""
    reasons = dict(reasons or {})
    values = {"window": window, "verdicts": dict(verdicts), **({"reasons": reasons} if reasons else {}),
              **(details or {})}
    worse = [m for m, v in verdicts.items() if v == "worse"]
    if worse:
        why = "; ".join(f"{m.upper()} {reasons[m]}" for m in worse if reasons.get(m))
        return Evaluation("breached", None, None,
                          f"P99 {'/'.join(worse).upper()} worse than baseline" + (f" ({why})" if why else ""), values)
    if verdicts and all(v in ("better", "no-significant-change") for v in verdicts.values()):
        return Evaluation("ok", None, None, "", values)
    return Evaluation("no_data", None, None, "no conclusive verdict", values)


def acceptance_drift(depth_ratio: float | None, concurrency_ratio: float | None, *, min_depth_ratio: float,
                     min_concurrency_ratio: float, drafts: float | None, min_drafts: float, window: float,
                     recover_margin: float = 0.05) -> Evaluation:
    """p_{K-1}/p_0 below min_depth_ratio (depth drift) or alpha in the highest concurrency band over alpha
    in the lowest below min_concurrency_ratio (EAGLE-3.0 attention drift under load)."""
    values = {"depth_ratio": depth_ratio, "concurrency_ratio": concurrency_ratio, "drafts": drafts,
              "min_depth_ratio": min_depth_ratio, "min_concurrency_ratio": min_concurrency_ratio, "window": window}
    if not drafts or drafts < min_drafts or (depth_ratio is None and concurrency_ratio is None):
        return Evaluation("no_data", depth_ratio, min_depth_ratio, "no per-position data or too little volume", values)
    if depth_ratio is not None and depth_ratio < min_depth_ratio:
        return Evaluation("breached", depth_ratio, min_depth_ratio, "conditional acceptance decays with depth", values)
    if concurrency_ratio is not None and concurrency_ratio < min_concurrency_ratio:
        return Evaluation("breached", concurrency_ratio, min_concurrency_ratio,
                          "acceptance at high concurrency far below low concurrency", values)
    ok = all(r is None or r >= lo + recover_margin for r, lo in
             ((depth_ratio, min_depth_ratio), (concurrency_ratio, min_concurrency_ratio)))
    return Evaluation("ok" if ok else "hold", depth_ratio, min_depth_ratio, "", values)


def pool_limit(refused: int, *, limit: int, lookback: float) -> Evaluation:
    """New pools refused by the collection's cardinality limit within the lookback: breached while it goes on."""
    values = {"refused_pools": refused, "limit": limit, "lookback": lookback}
    if refused > 0:
        return Evaluation("breached", float(refused), float(limit),
                          f"pool limit of {limit} reached: {refused} new pools refused", values)
    return Evaluation("ok", 0.0, float(limit), "", values)


def stale_data(age_seconds: float | None, *, after: float) -> Evaluation:
    """Its own state: stale is breached (never no_data), and the other rules read it as no_data."""
    values = {"age_seconds": age_seconds, "after": after}
    if age_seconds is None or age_seconds > after:
        return Evaluation("breached", age_seconds, after, "no fresh data", values)
    return Evaluation("ok", age_seconds, after, "", values)


# --- the state machine ------------------------------------------------------------------------------

FOR_TOLERANCE = 0.1  # of the evaluation interval: how much shorter than `for` an elapsed time may be


def for_tolerance(eval_interval_seconds: float) -> float:
    """Seconds a duration may fall short and still count as met: FOR_TOLERANCE of the evaluation interval."""
    return max(0.0, FOR_TOLERANCE * eval_interval_seconds)


@dataclass(frozen=True)
class AlertState:
    phase: Phase = "inactive"
    pending_since: float | None = None
    firing_since: float | None = None
    last_bad_at: float | None = None  # last evaluation that was not "ok" while firing (keep_firing_for)
    resolved_at: float | None = None


def step(state: AlertState, status: Status, now: float, *, for_seconds: float,
         keep_firing_for: float, tolerance: float = 0.0) -> tuple[AlertState, Phase | None]:
    """One evaluation. Returns the new state and the phase entered (None: no transition).

    Edge cases: for_seconds == 0 fires on the first breach; a pending alert that misses once goes back
    to inactive; no_data and hold never resolve; keep_firing_for counts from the last non-ok evaluation.
    `tolerance` (for_tolerance of the evaluation interval): both durations count as met that much early,
    so tick jitter never delays a transition by a whole evaluation.
    """
    if state.phase in ("inactive", "resolved"):
        if status != "breached":
            return state, None
        if for_seconds <= 0:
            return AlertState("firing", now, now, now), "firing"
        return AlertState("pending", pending_since=now, resolved_at=state.resolved_at), "pending"
    if state.phase == "pending":
        if status != "breached":
            return AlertState("inactive", resolved_at=state.resolved_at), "inactive"
        if now - (now if state.pending_since is None else state.pending_since) >= for_seconds - tolerance:
            return replace(state, phase="firing", firing_since=now, last_bad_at=now), "firing"
        return state, None
    # firing
    if status != "ok":
        return replace(state, last_bad_at=now), None
    if now - (now if state.last_bad_at is None else state.last_bad_at) >= keep_firing_for - tolerance:
        return AlertState("resolved", resolved_at=now), "resolved"
    return state, None


# --- silences, grouping, identity -------------------------------------------------------------------


@dataclass(frozen=True)
class SilenceSpec:
    matchers: Mapping[str, str]  # label -> value or glob (`*`), e.g. {"model": "llama-*", "rule": "alpha-low"}
    starts_at: float
    ends_at: float


def silence_active(s: SilenceSpec, now: float) -> bool:
    return s.starts_at <= now < s.ends_at


def silence_matches(s: SilenceSpec, labels: Mapping[str, str], now: float) -> bool:
    """Active at `now` and every matcher matches (a label the alert lacks matches only `*`)."""
    return silence_active(s, now) and all(fnmatch.fnmatchcase(labels.get(k, ""), v) for k, v in s.matchers.items())


def silenced_by(silences: Sequence[tuple[int, SilenceSpec]], labels: Mapping[str, str], now: float) -> int | None:
    return next((sid for sid, s in silences if silence_matches(s, labels, now)), None)


def group_key(labels: Mapping[str, str]) -> str:
    """One incident per model: every class, mode and rule of a model share a thread."""
    return f"model={labels.get('model', '')}"


def fingerprint(labels: Mapping[str, str]) -> str:
    """Identity of an alert: the hash of its sorted label set (as Prometheus keys alerts)."""
    return hashlib.sha256(json.dumps(dict(sorted(labels.items())), separators=(",", ":")).encode()).hexdigest()[:32]


def notify_on(phase: Phase | None, *, notified_firing: bool, silenced: bool, send_resolved: bool) -> str | None:
    """Which notification a transition sends; phase None means "still firing, no transition" (a silence
    that ended on an alert whose firing was never announced).

    firing -> "firing" unless silenced (sent later when the silence ends and it still fires);
    resolved -> "resolved" only if its firing was notified, even when silenced meanwhile, so a thread
    that was opened is always closed."""
    if phase == "firing" or (phase is None and not notified_firing):
        return None if silenced else "firing"
    if phase == "resolved" and notified_firing and send_resolved:
        return "resolved"
    return None
