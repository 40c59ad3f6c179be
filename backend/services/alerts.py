"""The alert evaluation cycle: rules file -> evaluations -> state machine -> audit trail + outbox, in ONE
transaction (the caller's), so a notification exists if and only if its transition was committed.

Flow per cycle (`evaluate`): take the evaluation advisory lock (overlapping beat runs skip), load the
config in force (the rules file is imported as a new version when its content changed), evaluate every
rule on every target (alert_eval), step each alert's state (domain.alerting.step), record transitions
with the values that caused them, then group the notifications per model (one incident, one message per
model per cycle) and enqueue one outbox row per routed channel (outbox.enqueue_notification).

Why the alpha rule is a floor with two windows and not SLO burn-rate tiers: see domain/alerting.py
(the 0.45 error budget caps the burn rate at 2.22, so 14.4x/6x/3x tiers can never fire).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import alert_repo as repo
from backend.db.models_alerts import Acknowledgement, AlertStateRow, AlertTransition, Silence
from backend.domain import alerting as al
from backend.domain import safe_yaml
from backend.domain.alert_config import AlertConfig, ConfigError, parse_config
from backend.gc_pause import gc_paused
from backend.services import alert_eval, alert_rules, outbox

log = logging.getLogger("specwatch.alerts")


class AlertNotFound(LookupError):
    pass


# --- config ---------------------------------------------------------------------------------------------


def load_file(path: Path) -> dict[str, Any]:
    try:
        raw = safe_yaml.load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read ({exc.strerror})"]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: not valid YAML ({exc})"]) from None
    parse_config(raw)
    return raw


def digest(raw: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()


def store_config(session: Session, raw: dict[str, Any], *, source: str, by: str | None, now: datetime) -> int:
    """Validate and store a new config version (a repeat of the newest content is not stored twice)."""
    cfg = parse_config(raw)
    latest = repo.latest_config(session)
    if latest is not None and latest.digest == digest(raw):
        return latest.id
    return repo.add_config(session, version=cfg.version, digest=digest(raw), source=source, content=raw,
                           created_by=by, created_at=now).id


def config_in_force(session: Session, settings: Settings, *, now: datetime) -> tuple[AlertConfig | None, int | None]:
    """The newest stored version; the rules file is imported first when it changed since its last import."""
    path = Path(settings.alert_rules_file)
    if path.exists():
        raw = load_file(path)
        last_file = repo.latest_config(session, source=str(path))
        if last_file is None or last_file.digest != digest(raw):
            store_config(session, raw, source=str(path), by="rules-file", now=now)
    latest = repo.latest_config(session)
    if latest is None:
        return None, None
    return parse_config(latest.content), latest.id


# --- evaluation -----------------------------------------------------------------------------------------


def _ts(dt: datetime | None) -> float | None:
    return dt.timestamp() if dt is not None else None


def _dt(t: float | None) -> datetime | None:
    return datetime.fromtimestamp(t, tz=UTC) if t is not None else None


def _clean(values: Any) -> Any:
    return json.loads(json.dumps(values, default=str)) if values is not None else None


def evaluate(session: Session, *, settings: Settings, now: datetime) -> dict[str, Any]:
    """One evaluation cycle. Safe to re-run at any time (a re-run at the same `now` changes nothing)."""
    if not repo.try_eval_lock(session):
        return {"skipped": "another evaluation holds the lock"}
    config, config_id = config_in_force(session, settings, now=now)
    if config is None:
        log.warning("no alert rules: %s does not exist and none were stored", settings.alert_rules_file)
        return {"skipped": "no rules configured"}
    needs = alert_eval.reads(config)
    with gc_paused():  # the windows' bins and rows are acyclic: no collector passes over them
        targets = alert_eval.snapshot(session, windows=needs.windows, now=now, settings=settings,
                                      latency_windows=needs.latency, full_windows=needs.full,
                                      drift_windows=needs.drift)
        if needs.context:
            alert_eval.context_bands(session, targets, windows=needs.context)
        if needs.load:
            alert_eval.load_bands(session, targets, windows=needs.load, settings=settings)
    replica_windows = {float(r.params["window"]) for r in config.rules if r.kind == "replica_outlier"}
    if replica_windows:
        targets.update(alert_eval.replica_targets(session, windows=replica_windows, now=now, settings=settings))
    stale_after = alert_rules.stale_after(config, settings)
    lookbacks = {float(r.params["lookback"]) for r in config.rules if r.kind == "pool_limit"}
    if lookbacks:
        collection = alert_eval.collection_target(session, lookbacks=lookbacks, now=now)
        targets[tuple(collection.labels.values())] = collection
    existing = {s.fingerprint: s for s in repo.state_records(session, for_update=True)}
    silences = [(s.id, al.SilenceSpec(s.matchers, s.starts_at.timestamp(), s.ends_at.timestamp()))
                for s in repo.silences(session, active_at=now)]
    pending: dict[str, list[tuple[repo.StateRecord, AlertTransition]]] = defaultdict(list)
    seen: set[str] = set()
    stepped: dict[int, repo.StateRecord] = {}  # written back in one statement once the cycle is done
    counts = {"targets": len(targets), "evaluated": 0, "transitions": 0, "notifications": 0}
    tolerance = al.for_tolerance(settings.alert_eval_interval_seconds)  # tick jitter never costs a whole tick
    for rule in config.rules:
        for target in targets.values():
            labels = {**target.labels, "rule": rule.name}
            if not rule.selects(labels) or (rule.kind == "pool_limit") != target.is_collection \
                    or (rule.kind == "replica_outlier") != target.is_replica:
                continue
            ev = alert_rules.evaluate(rule, target, now=now, stale_after_seconds=stale_after,
                                      limit=settings.max_pools)
            fp = al.fingerprint(labels)
            seen.add(fp)
            row = existing.get(fp) or _new_state(session, fp, rule, labels)
            stepped[row.id] = row
            counts["evaluated"] += 1
            tr = _apply(session, row, ev, rule=rule, now=now, silences=silences, config_id=config_id,
                        send_resolved=config.send_resolved, window=alert_rules.window_text(rule),
                        tolerance=tolerance)
            if tr is not None:
                counts["transitions"] += tr.from_phase != tr.to_phase
                if tr.notification:
                    pending[row.group_key].append((row, tr))
    for fp, row in existing.items():  # rules or pools that disappeared: no data, never resolved
        if fp not in seen and row.phase in ("pending", "firing") and row.kind != "internal":
            rule = config.rule(row.rule)
            stepped[row.id] = row
            _apply(session, row, al.Evaluation("no_data", None, None, "rule or pool no longer evaluated"),
                   rule=rule, now=now, silences=silences, config_id=config_id, send_resolved=config.send_resolved,
                   window="", tolerance=tolerance)
    for group, items in pending.items():
        counts["notifications"] += outbox.enqueue_notification(session, group=group, items=items, now=now,
                                                               settings=settings)
    repo.save_states(session, stepped.values())  # after the outbox: it sets the incident of each notified alert
    counts["refreshed"] = outbox.enqueue_refresh(session, now=now, settings=settings)  # after the states
    _close_quiet_incidents(session, now=now)
    return counts


def _new_state(session: Session, fp: str, rule, labels: dict[str, str]) -> repo.StateRecord:
    return repo.add_state_record(session, fingerprint=fp, rule=rule.name, kind=rule.kind, severity=rule.severity,
                                 labels=labels, group_key=al.group_key(labels), phase="inactive",
                                 notified_firing=False)


def _apply(session: Session, row: repo.StateRecord, ev: al.Evaluation, *, rule, now: datetime, silences,
           config_id: int | None, send_resolved: bool, window: str, tolerance: float = 0.0) -> AlertTransition | None:
    """Step one alert (the caller writes `row` back); record its transition and return it (also for a delayed
    firing notice)."""
    before = al.AlertState(row.phase, _ts(row.pending_since), _ts(row.firing_since), _ts(row.last_bad_at),  # type: ignore[arg-type]
                           _ts(row.resolved_at))
    for_s = rule.for_seconds if rule else 0.0
    keep = rule.keep_firing_for_seconds if rule else 0.0
    after, entered = al.step(before, ev.status, now.timestamp(), for_seconds=for_s, keep_firing_for=keep,
                             tolerance=tolerance)
    silence_id = al.silenced_by(silences, row.labels, now.timestamp())
    note = None
    if entered in ("firing", "resolved") or (entered is None and after.phase == "firing"):
        note = al.notify_on(entered, notified_firing=row.notified_firing, silenced=silence_id is not None,
                            send_resolved=send_resolved)
    old_phase = row.phase
    row.phase, row.pending_since, row.firing_since = after.phase, _dt(after.pending_since), _dt(after.firing_since)
    row.last_bad_at, row.resolved_at = _dt(after.last_bad_at), _dt(after.resolved_at)
    row.last_eval_at, row.last_status, row.last_value = now, ev.status, ev.value
    row.last_values = _clean({**(ev.values or {}), "reason": ev.reason, "threshold": ev.threshold, "window": window,
                             "runbook": rule.runbook if rule else None})
    if entered is None and note is None:
        return None
    if note == "firing":
        row.notified_firing = True
    if entered == "resolved":
        row.notified_firing = False
        row.acked_by = row.acked_at = None
    reason = ev.reason if entered is not None else "silence ended while firing: announcing now"
    return repo.add(session, AlertTransition(
        alert_id=row.id, at=now, from_phase=old_phase, to_phase=after.phase, status=ev.status, value=ev.value,
        threshold=ev.threshold, reason=reason, values=row.last_values, notification=note,
        silence_id=silence_id, config_id=config_id))


def _close_quiet_incidents(session: Session, *, now: datetime) -> None:
    firing_groups = {s.group_key for s in repo.states(session, phases=("firing",))}
    for s in repo.states(session, phases=("resolved",)):
        inc = repo.open_incident(session, s.group_key)
        if inc is not None and s.group_key not in firing_groups:
            inc.closed_at = now


# --- silences and acknowledgements ------------------------------------------------------------------------


def create_silence(session: Session, *, matchers: dict[str, str], starts_at: datetime, ends_at: datetime, by: str,
                   reason: str, now: datetime) -> Silence:
    return repo.add(session, Silence(matchers=matchers, starts_at=starts_at, ends_at=ends_at, created_by=by,
                                     reason=reason, created_at=now))


def expire_silence(session: Session, silence_id: int, *, by: str, now: datetime) -> Silence:
    s = repo.get_silence(session, silence_id)
    if s is None:
        raise AlertNotFound(f"silence {silence_id}")
    if s.ends_at > now:
        s.ends_at, s.expired_by = max(now, s.starts_at), by
    return s


def acknowledge(session: Session, alert_id: int, *, by: str, comment: str, now: datetime) -> Acknowledgement:
    row = repo.get_state(session, alert_id)
    if row is None:
        raise AlertNotFound(f"alert {alert_id}")
    row.acked_by, row.acked_at = by, now
    return repo.add(session, Acknowledgement(alert_id=alert_id, by=by, comment=comment, at=now))


def states_view(session: Session, *, now: datetime) -> list[tuple[AlertStateRow, int | None]]:
    """Every non-inactive alert with the silence that currently matches it (None: not silenced)."""
    silences = [(s.id, al.SilenceSpec(s.matchers, s.starts_at.timestamp(), s.ends_at.timestamp()))
                for s in repo.silences(session, active_at=now)]
    return [(s, al.silenced_by(silences, s.labels, now.timestamp())) for s in repo.states(session)
            if s.phase != "inactive"]
