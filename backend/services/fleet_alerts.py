"""What the fleet rows take from alerting: each row's acceptance-rate threshold, from the rules the alert
evaluation uses (so "below threshold" means what the alpha_low rule means for that class), and the pool's
pending / firing alerts, read when an answer is served (a stored snapshot never shows an alert that has
resolved, nor misses one that fired since)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db import alert_repo
from backend.domain.alert_config import AlertConfig, ConfigError, parse_config
from backend.schemas.fleet import FleetAlertRead
from backend.services.alerts import load_file  # the evaluation's own reader of the rules file

ACTIVE = ("pending", "firing")
SEVERITY_ORDER = ("page", "warning", "info")
Key = tuple[str, str, str]


def rules(session: Session, settings: Settings) -> AlertConfig | None:
    """The rules the evaluation uses: the newest stored version (the evaluation stores the rules file's
    content before each cycle when it changed); before any cycle, the rules file itself. None: no rules."""
    latest = alert_repo.latest_config(session)
    if latest is not None:
        try:
            return parse_config(latest.content)
        except ConfigError:  # stored before a stricter check: the evaluation refuses it too; no thresholds
            return None
    path = Path(settings.alert_rules_file)
    if not path.exists():
        return None
    try:
        return parse_config(load_file(path))
    except ConfigError:
        return None


class Thresholds:
    """Per-row thresholds: AlertConfig.alpha_threshold of the row's labels (the evaluator's Rule.value), or
    `default` where no alpha_low rule applies (or there are no rules)."""

    def __init__(self, config: AlertConfig | None, default: float) -> None:
        self.config, self.default = config, default
        self._memo: dict[Key, float] = {}

    def of(self, model: str, traffic_class: str, spec_mode: str) -> float:
        key = (model, traffic_class, spec_mode)
        hit = self._memo.get(key)
        if hit is None:
            found = self.config.alpha_threshold({"model": model, "traffic_class": traffic_class,
                                                 "spec_mode": spec_mode}) if self.config else None
            hit = self._memo[key] = self.default if found is None else found
        return hit


def thresholds(session: Session, settings: Settings, default: float | None = None) -> Thresholds:
    """The thresholds of the rules in force; `default` (SPECWATCH_ALPHA_THRESHOLD unless given) elsewhere."""
    return Thresholds(rules(session, settings), settings.alpha_threshold if default is None else default)


def _order(a: FleetAlertRead) -> tuple:
    sev = SEVERITY_ORDER.index(a.severity) if a.severity in SEVERITY_ORDER else len(SEVERITY_ORDER)
    return (0 if a.state == "firing" else 1, sev, a.since.timestamp() if a.since else 0.0, a.rule)


def active(session: Session) -> dict[Key, list[FleetAlertRead]]:
    """The pending and firing alerts of every pool (replica alerts on their pool), by (model, class, mode),
    each list firing first, then by severity and age. Collection-wide alerts belong to no row."""
    out: dict[Key, list[FleetAlertRead]] = defaultdict(list)
    for s in alert_repo.states(session, phases=ACTIVE):
        labels = s.labels or {}
        key = (labels.get("model"), labels.get("traffic_class"), labels.get("spec_mode"))
        if None in key:
            continue
        values = s.last_values or {}
        alpha_short = values.get("alpha_short") if s.kind == "alpha_low" else None
        out[key].append(FleetAlertRead(  # type: ignore[index]
            id=s.id, rule=s.rule, kind=s.kind, severity=s.severity, state=s.phase,
            value=s.last_value, threshold=values.get("threshold"),
            since=s.firing_since if s.phase == "firing" else s.pending_since,
            alpha_short=alpha_short, short_window_seconds=values.get("short_window") if s.kind == "alpha_low" else None,
            window=values.get("window") or None, evaluated_at=s.last_eval_at))
    return {k: sorted(v, key=_order) for k, v in out.items()}


def state_with(alerts: list[Any], data_state: str) -> str:
    """A row's state: firing / pending when one of its alerts is (alerts in `active`'s order), else its data's."""
    if not alerts:
        return data_state
    first = alerts[0]
    return first.state if isinstance(first, FleetAlertRead) else first["state"]


def overlay(rows: list[dict[str, Any]], found: dict[Key, list[FleetAlertRead]]) -> list[dict[str, Any]]:
    """JSON rows (a stored snapshot's or a live answer's) with the alerts of `found` and the state they give;
    the rows given are not changed (a parsed snapshot is shared): a row that changes is copied."""
    dumped = {k: [a.model_dump(mode="json") for a in v] for k, v in found.items()}
    out = []
    for r in rows:
        alerts = dumped.get((r["model_name"], r["traffic_class"], r["spec_mode"]), [])
        base = r.get("data_state") or r["state"]
        if not alerts and not r.get("alerts") and r["state"] == base:
            out.append(r)
            continue
        out.append({**r, "alerts": alerts, "data_state": base, "state": state_with(alerts, base)})
    return out
