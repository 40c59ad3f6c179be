"""What `specwatch demo` prepares before it prints its URLs: the history (seeded up to now, then handed
over to live collection without a gap), an operator token for the dashboard, the alert rules and a
Slack-compatible channel, and the scenario with an incident that fires and resolves in the first minutes."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from backend.schema_version import ROOT

INCIDENT_R = 0.30  # draft acceptance rate of the incident's pool while it lasts (the threshold is 0.55)
DEMO_CHANNEL = "demo-slack"
DEMO_TOKEN_NAME = "demo dashboard"


def scenario_dict(scenario: str) -> dict[str, Any]:
    from backend.sim.scenario import SCENARIO_DIR, ScenarioError

    path = Path(scenario)
    if not path.exists():
        path = SCENARIO_DIR / f"{scenario}.yaml"
    if not path.exists():
        raise ScenarioError(f"scenario {scenario!r} is neither a file nor a built-in scenario")
    doc = yaml.safe_load(path.read_text())
    doc.setdefault("name", Path(scenario).stem)
    return doc


def incident_pool(doc: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The scenario's first speculative pool and its acceptance (the one the incident degrades)."""
    from backend.sim.scenario import load_scenario

    defaults = doc.get("defaults") or {}
    for raw, pool in zip(doc["pools"], load_scenario(copy.deepcopy(doc)).pools, strict=True):
        acceptance = raw.get("acceptance") or defaults.get("acceptance")
        if pool.spec and acceptance:
            return pool.id, copy.deepcopy(acceptance)
    return None


def schedule_incident(sim_url: str, doc: dict[str, Any], *, after: float, seconds: float) -> str | None:
    """Tell the running simulator: `after` seconds from now the incident pool's acceptance rate drops to
    INCIDENT_R, `seconds` later it is back (POST /events, relative to now: the story starts when the demo
    is up, however long the start-up took). Returns the pool's id (None: no speculative pool)."""
    import json
    import urllib.request

    found = incident_pool(doc)
    if found is None:
        return None
    pool, normal = found
    for wait, acceptance in ((after, {"mode": "rate", "r": INCIDENT_R}), (after + seconds, normal)):
        body = json.dumps({"pool": pool, "in_seconds": max(wait, 0.001), "acceptance": acceptance}).encode()
        req = urllib.request.Request(f"{sim_url}/events", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
    return pool


# the built-in scenarios' normal levels sit below the example's 0.55 for the code class (0.40 at K=5) and
# for the model's mixed traffic (~0.50): the demo's thresholds sit under them, so only the incident fires
DEMO_OVERRIDES = [{"match": {"traffic_class": "code"}, "threshold": 0.35},
                  {"match": {"traffic_class": "mixed"}, "threshold": 0.42}]


def demo_rules(bucket_seconds: int) -> dict[str, Any]:
    """The example rules with the fast alpha-low rule scaled to the bucket width (2- and 5-bucket windows,
    one bucket `for` and `keep_firing_for`) and thresholds under the scenario's normal levels, so the
    incident, and only it, fires and resolves within minutes. The slow ticket-level twin (30 m / 6 h
    windows) is left out: a demo does not run for hours. `context-drift` reads the last hour of records and
    fires after one bucket, so the per-request demo's drifting code class shows it firing within minutes."""
    doc = yaml.safe_load((ROOT / "alerts.example.yaml").read_text())
    w = bucket_seconds
    rules = []
    for rule in doc["rules"]:
        if rule["name"] == "alpha-low":
            rule.update({"short_window": f"{2 * w}s", "long_window": f"{5 * w}s", "for": f"{w}s",
                         "keep_firing_for": f"{w}s", "overrides": DEMO_OVERRIDES})
        elif rule["kind"] == "alpha_low":
            continue
        elif rule["kind"] == "context_drift":
            rule.update({"window": "1h", "for": f"{w}s"})
        rules.append(rule)
    doc["rules"] = rules
    return doc


def operator_token(factory) -> str:
    """A new operator token for the demo dashboard (printed; make more with `specwatch tokens create`)."""
    from backend.api.auth import create_token
    from backend.db.session import session_scope

    with session_scope(factory) as session:
        _row, token = create_token(session, name=DEMO_TOKEN_NAME, role="operator", by="specwatch demo",
                                   now=datetime.now(UTC))
    return token


def slack_channel(factory, settings, webhook_url: str) -> None:
    """The demo's Slack channel, pointed at this run's receiver (created once, its URL updated later)."""
    from backend.db import alert_repo
    from backend.db.session import session_scope
    from backend.notify.delivery import SecretBox
    from backend.services import outbox

    box, now = SecretBox(settings.secret_key), datetime.now(UTC)
    with session_scope(factory) as session:
        existing = alert_repo.channel_by_name(session, DEMO_CHANNEL)
        if existing is None:
            outbox.create_channel(session, name=DEMO_CHANNEL, kind="slack", url=webhook_url, token=None,
                                  options={"send_resolved": True}, matchers={}, box=box, now=now)
        else:
            outbox.update_channel(session, existing, url=webhook_url, token=None, options=None, matchers=None,
                                  enabled=True, box=box, now=now, settings=settings)
