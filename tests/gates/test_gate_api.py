"""The progressive-delivery gate (/api/v1/gate, /api/v1/gate/flagger) on tracks the real rollout evaluation
wrote: one answer per decision (pass / fail / inconclusive / no data) with the evaluation's own figures,
read as Argo Rollouts reads deploy/argo/analysis-template.yaml and as Flagger reads the webhooks of
deploy/flagger/canary.yaml (tests/support/delivery.py); and who may read it (the `gate` role)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml
from sqlalchemy.orm import Session

from backend.config import Settings
from backend.db.rollups import ensure_partitions
from backend.domain import gates
from backend.services import rollout
from tests.factories import make_bucket, make_pool
from tests.support import delivery
from tests.support.auth import app_on_session, bearer, token_in

ROOT = Path(__file__).resolve().parents[2]
MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # the manifests' model: a name with a slash, in a query string
SETTINGS = {"rollout_min_drafts": 1000, "rollout_window_seconds": 3600}  # eval interval: the default 900 s
# class -> (drafts, draft tokens, accepted tokens) in the hour before `now`; K = 3; the thresholds are the
# default alert rules' alpha_low per class (chat 0.55, code 0.45)
TRAFFIC = {"chat": (2000, 6000, 4200),   # alpha 0.7 -> pass
           "code": (2000, 6000, 1800),   # alpha 0.3 -> fail
           "rare": (100, 300, 210)}      # 100 drafts < the volume guard of 1000 -> inconclusive
# P99 TPOT of chat: every token in (0, 10] ms with the drafter, in (25, 50] ms on the baseline pool -> better
LATENCY = {"chat": {"tpot": [100] + [0] * 19}}
# "quiet": a drafter pool whose last data is three hours old -> no spec-decode data in the window -> no_data
EXPECTED = {"chat": "pass", "code": "fail", "rare": "inconclusive", "quiet": "no_data"}


def _docs(path: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((ROOT / path).read_text()) if d]


@pytest.fixture
def evaluated(db: Session, now: datetime) -> Session:
    ensure_partitions(db, {now.date(), (now - timedelta(hours=3)).date()})
    for cls, (drafts, draft_tokens, accepted) in TRAFFIC.items():
        pool = make_pool(db, model_name=MODEL, traffic_class=cls)
        for minute in range(5, 55, 5):  # ten buckets of a tenth of the counts (a P99 verdict needs ten)
            make_bucket(db, pool, now - timedelta(minutes=minute), drafts=drafts / 10, draft_tokens=draft_tokens / 10,
                        accepted_tokens=accepted / 10, accepted_per_pos=None, **LATENCY.get(cls, {}))
    base = make_pool(db, model_name=MODEL, traffic_class="chat", spec_mode="off")
    for minute in range(5, 55, 5):
        make_bucket(db, base, now - timedelta(minutes=minute), tpot=[0, 0, 100] + [0] * 17)
    quiet = make_pool(db, model_name=MODEL, traffic_class="quiet")
    make_bucket(db, quiet, now - timedelta(hours=3), drafts=5000, draft_tokens=15000, accepted_tokens=9000,
                accepted_per_pos=None)
    make_pool(db, model_name="other-model", traffic_class="chat")
    rollout.evaluate(db, settings=Settings(_env_file=None, **SETTINGS), now=now)
    return db


@pytest.fixture
def client(evaluated, now):
    return app_on_session(evaluated, now, **SETTINGS)


@pytest.fixture
def gate_token(evaluated, now) -> str:
    return token_in(evaluated, "gate", now=now)


def _gate(client, headers, scope, check="alpha", **kw):
    return client.get("/api/v1/gate", params={"model": MODEL, "scope": scope, "check": check, **kw}, headers=headers)


def test_each_decision_with_the_evaluations_figures(client, gate_token, now) -> None:
    h = bearer(gate_token)
    chat = _gate(client, h, "chat").json()
    assert chat["decision"] == "pass" and chat["argo_phase"] == "Successful" and chat["flagger_status"] == 200
    assert chat["alpha"] == pytest.approx(0.7) and chat["threshold"] == 0.55 and chat["drafts"] == 2000
    assert chat["min_drafts"] == 1000 and chat["spec_mode"] == "eagle3" and chat["gate_result"] == "pass"
    assert chat["reason"] == "alpha pass: alpha 0.700 >= 0.55"
    assert datetime.fromisoformat(chat["evaluated_at"]) == now and chat["max_age_seconds"] == 1800
    assert datetime.fromisoformat(chat["window_start"]) == now - timedelta(hours=1)
    code = _gate(client, h, "code").json()
    assert (code["decision"], code["argo_phase"], code["flagger_status"]) == ("fail", "Failed", 412)
    # the gate compares with the class's alpha_low threshold of the alert rules (0.45 for code by default)
    assert code["reason"] == "alpha fail: alpha 0.300 < 0.45" and code["alpha"] == pytest.approx(0.3)
    assert code["threshold"] == 0.45
    rare = _gate(client, h, "rare").json()
    assert (rare["decision"], rare["argo_phase"], rare["flagger_status"]) == ("inconclusive", "Inconclusive", 425)
    assert rare["reason"] == "alpha inconclusive: 100 drafts < volume guard 1000"
    quiet = _gate(client, h, "quiet").json()
    assert (quiet["decision"], quiet["argo_phase"], quiet["flagger_status"]) == ("no_data", "Inconclusive", 424)
    assert quiet["reason"] == "alpha no_data: no spec-decode data in the window"
    # the production mix pools the three classes that reported: (4200 + 1800 + 210) / (6000 + 6000 + 300)
    mixed = _gate(client, h, "mixed").json()
    assert mixed["decision"] == "fail" and mixed["alpha"] == pytest.approx(6210 / 12300)


def test_all_needs_the_latency_check_too(client, gate_token) -> None:
    """`all` (the default) also asks the P99 TPOT check: chat's drafter is faster than its baseline pool, so it
    passes with its figures; rare has drafts but no TPOT to compare, so no_data even though alpha is no worse;
    a fail of either check is a fail."""
    h = bearer(gate_token)
    chat = client.get("/api/v1/gate", params={"model": MODEL, "scope": "chat"}, headers=h).json()
    assert (chat["check"], chat["decision"], chat["latency_result"], chat["baseline_source"]) == (
        "all", "pass", "pass", "pool")
    tpot = chat["tpot_p99"]
    assert tpot["verdict"] == "better" and (tpot["delta_low"], tpot["delta_high"]) == pytest.approx((-0.05, -0.015))
    assert chat["reason"] == ("alpha pass: alpha 0.700 >= 0.55; latency pass: P99 TPOT faster than baseline: P99 "
                              "(0, 10] ms vs (25, 50] ms: spec faster by 15 to 50 ms; above 10 ms: spec 0 %, "
                              "baseline 100 % (limit 1 %)")
    assert _gate(client, h, "chat", "latency").json()["decision"] == "pass"
    rare = _gate(client, h, "rare", "all").json()
    assert rare["decision"] == "no_data" and rare["latency_result"] == "error"
    assert rare["reason"] == "latency no_data: no baseline to compare P99 TPOT against"
    assert _gate(client, h, "code", "all").json()["decision"] == "fail"


def test_no_evaluation_stale_evaluation_and_unknown_model(evaluated, client, gate_token, now) -> None:
    h = bearer(gate_token)
    body = _gate(client, h, "tools").json()  # a known model, a scope never evaluated
    assert body["decision"] == "no_data" and body["reason"] == "no rollout evaluation of this scope yet"
    assert body["evaluated_at"] is None and body["stage"] is None
    r = client.get("/api/v1/gate", params={"model": "nope"}, headers=h)
    assert r.status_code == 404 and r.json()["code"] == "unknown_model" and MODEL in r.json()["known_models"]
    # two evaluation intervals (2 x 900 s) later without a new evaluation, a pass is no longer news
    later = app_on_session(evaluated, now + timedelta(seconds=1801), **SETTINGS)
    stale = _gate(later, h, "chat").json()
    assert stale["decision"] == "no_data" and "older than 2 evaluation intervals" in stale["reason"]
    assert _gate(app_on_session(evaluated, now + timedelta(seconds=1800), **SETTINGS), h, "chat").json()[
        "decision"] == "pass"


def test_bad_parameters_are_refused(client, gate_token) -> None:
    h = bearer(gate_token)
    r = client.get("/api/v1/gate", params={"model": MODEL, "check": "speed"}, headers=h)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "check"]
    assert client.get("/api/v1/gate", headers=h).status_code == 422  # model is required
    assert client.get("/api/v1/gate", params={"model": "x" * 301}, headers=h).status_code == 422


def test_argo_reads_the_shipped_analysis_template(client, gate_token) -> None:
    """deploy/argo/analysis-template.yaml run as Argo's web provider runs it, against the real answers."""
    (template,) = _docs("deploy/argo/analysis-template.yaml")
    phases = {}
    for scope, expected in EXPECTED.items():
        args = delivery.template_args(template, {"model": MODEL, "scope": scope, "check": "alpha",
                                                 "specwatch-url": "http://testserver", "api-token": gate_token})
        phase, value = delivery.argo_measure(client, template, args)
        assert value == expected, scope
        phases[expected] = phase
    assert phases == {"pass": "Successful", "fail": "Failed", "inconclusive": "Inconclusive",
                      "no_data": "Inconclusive"}
    assert phases == {d: gates.ARGO_PHASE[d] for d in gates.DECISIONS}  # what the API says it maps to
    # the template's own default check (all): chat passes both checks; rare has no TPOT to compare
    args = delivery.template_args(template, {"model": MODEL, "scope": "chat", "specwatch-url": "http://testserver",
                                             "api-token": gate_token})
    assert delivery.argo_measure(client, template, args) == ("Successful", "pass")
    assert delivery.argo_measure(client, template, {**args, "scope": "rare"}) == ("Inconclusive", "no_data")
    # a wrong token or an unknown model is an Error measurement (consecutiveErrorLimit), never a pass
    bad = {**args, "api-token": "sw_wrong"}
    assert delivery.argo_measure(client, template, bad) == ("Error", 401)
    assert delivery.argo_measure(client, template, {**args, "model": "nope"}) == ("Error", 404)


def test_the_argo_emulation_can_fail() -> None:
    """The conditions as Argo evaluates them (utils/evaluate): a value matching neither is Inconclusive."""
    ok, bad = 'result == "pass"', 'result == "fail"'
    assert [delivery.evaluate_result(v, ok, bad) for v in ("pass", "fail", "no_data", "inconclusive")] == [
        "Successful", "Failed", "Inconclusive", "Inconclusive"]
    assert delivery.condition('result != "pass" && result != "fail"', "no_data") is True
    with pytest.raises(NotImplementedError):
        delivery.condition("asFloat(result) > 0.5", "0.6")
    with pytest.raises(LookupError):
        delivery.jsonpath("{$.decision}", {"detail": "x"})
    assert delivery.jsonpath("{.a.b}", {"a": {"b": 3}}) == 3


def test_flagger_reads_the_shipped_canary_webhooks(client, evaluated, now) -> None:
    """deploy/flagger/canary.yaml's webhooks called as Flagger calls them (a POST of its payload, the token in
    the metadata, any status above 202 a failure), pointed at each scope."""
    (canary,) = _docs("deploy/flagger/canary.yaml")
    hooks = {h["type"]: h for h in canary["spec"]["analysis"]["webhooks"]}
    assert set(hooks) == {"confirm-rollout", "rollout"}
    token = token_in(evaluated, "gate", now=now)
    statuses = {}
    for scope, expected in EXPECTED.items():
        hook = hooks["confirm-rollout"]
        url = hook["url"].replace("scope=chat", f"scope={scope}")
        passed, r = delivery.flagger_call(client, canary, {**hook, "url": url, "metadata": {"token": token}})
        assert r.json()["decision"] == expected and r.json()["scope"] == scope
        assert passed is (expected == "pass")
        statuses[expected] = r.status_code
    assert statuses == {"pass": 200, "fail": 412, "inconclusive": 425, "no_data": 424}
    assert statuses == gates.FLAGGER_STATUS
    body = delivery.flagger_call(client, canary, {**hooks["confirm-rollout"], "metadata": {"token": token}})[1].json()
    assert body == {"decision": "pass", "reason": "alpha pass: alpha 0.700 >= 0.55", "model": MODEL, "scope": "chat",
                    "check": "alpha", "evaluated_at": now.isoformat().replace("+00:00", "Z")}
    # the rollout webhook asks for both checks: chat passes them; without a baseline (rare) it halts
    passed, r = delivery.flagger_call(client, canary, {**hooks["rollout"], "metadata": {"token": token}})
    assert (passed, r.status_code, r.json()["decision"]) == (True, 200, "pass")
    rare = {**hooks["rollout"], "url": hooks["rollout"]["url"].replace("scope=chat", "scope=rare"),
            "metadata": {"token": token}}
    passed, r = delivery.flagger_call(client, canary, rare)
    assert (passed, r.status_code, r.json()["decision"]) == (False, 424, "no_data")
    # the placeholder token of the example (and no token at all) is refused: a failed webhook, never a pass
    passed, r = delivery.flagger_call(client, canary, hooks["confirm-rollout"])
    assert (passed, r.status_code, r.json()["detail"]) == (False, 401, "invalid or revoked token")
    passed, r = delivery.flagger_call(client, canary, {**hooks["confirm-rollout"], "metadata": {}})
    assert (passed, r.status_code) == (False, 401)


def test_flagger_form_takes_a_header_and_a_get(client, gate_token) -> None:
    params = {"model": MODEL, "scope": "code", "check": "alpha"}
    r = client.get("/api/v1/gate/flagger", params=params, headers=bearer(gate_token))
    assert r.status_code == 412 and r.json()["reason"] == "alpha fail: alpha 0.300 < 0.45"
    r = client.post("/api/v1/gate/flagger", params=params, headers=bearer(gate_token))  # no body
    assert r.status_code == 412
    r = client.post("/api/v1/gate/flagger", params=params, json={"metadata": {"token": 5}})
    assert r.status_code == 422  # metadata values are strings, as Flagger sends them
    r = client.post("/api/v1/gate/flagger", params=params, content=b"x" * 20000,
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 413


# --- who may read the gate ------------------------------------------------------------------------------

OTHER_READS = ["/api/v1/pools", "/api/v1/fleet?window=1h", f"/api/v1/summary?model={MODEL}&window=1h",
               "/api/v1/rollout", "/api/v1/rollout/snapshots", "/api/v1/reports/weekly", "/metrics",
               f"/api/v1/requests/lowest?model={MODEL}", "/api/v1/alerts", "/api/v1/whoami", "/api/v1/tokens"]


def test_a_gate_token_reads_the_gate_and_nothing_else(evaluated, client, gate_token, now) -> None:
    h = bearer(gate_token)
    assert _gate(client, h, "chat").status_code == 200
    assert client.get("/api/v1/gate/flagger", params={"model": MODEL, "scope": "chat", "check": "alpha"},
                      headers=h).status_code == 200
    for path in OTHER_READS:
        r = client.get(path, headers=h)
        assert r.status_code == 403 and "(you are gate)" in r.json()["detail"], (path, r.status_code, r.text)
    for path, body in (("/api/v1/requests", []), ("/api/v1/rollout/evaluate", None),
                       ("/api/v1/tokens", {"name": "x", "role": "admin"})):
        assert client.post(path, json=body, headers=h).status_code == 403, path


@pytest.mark.parametrize("role", ["viewer", "operator", "admin"])
def test_viewers_and_above_read_the_gate_too(evaluated, client, now, role) -> None:
    h = bearer(token_in(evaluated, role, now=now))
    assert _gate(client, h, "chat").json()["decision"] == "pass"
    r = client.post("/api/v1/gate/flagger", params={"model": MODEL, "scope": "chat", "check": "alpha"}, headers=h)
    assert r.status_code == 200


def test_an_ingest_token_and_no_token_are_refused(evaluated, client, now) -> None:
    ingest = token_in(evaluated, "ingest", now=now)
    r = _gate(client, bearer(ingest), "chat")
    assert r.status_code == 403 and r.json()["detail"] == "requires role gate or viewer or operator or admin " \
                                                         "(you are ingest)"
    r = client.post("/api/v1/gate/flagger", params={"model": MODEL}, json={"metadata": {"token": ingest}})
    assert r.status_code == 403
    r = _gate(client, {}, "chat")
    assert r.status_code == 401 and r.json()["detail"] == "missing bearer token"
    # with anonymous_read, the gate is open like the aggregates it summarises
    open_ = app_on_session(evaluated, now, anonymous_read=True, **SETTINGS)
    assert _gate(open_, {}, "chat").json()["decision"] == "pass"


def test_an_expired_gate_token_is_refused(evaluated, client, now) -> None:
    from backend.api.auth import create_token

    _, token = create_token(evaluated, name="flagger", role="gate", by="test", now=now - timedelta(days=2),
                            expires_at=now - timedelta(days=1))
    r = client.post("/api/v1/gate/flagger", params={"model": MODEL}, json={"metadata": {"token": token}})
    assert r.status_code == 401 and r.json()["detail"] == "token expired"


def test_an_admin_creates_a_gate_token(client, evaluated, now) -> None:
    admin = bearer(token_in(evaluated, "admin", now=now))
    r = client.post("/api/v1/tokens", json={"name": "argo", "role": "gate"}, headers=admin)
    assert r.status_code == 201 and r.json()["role"] == "gate"
    assert _gate(client, bearer(r.json()["token"]), "chat").json()["decision"] == "pass"


def test_the_cli_creates_a_gate_token(fresh_db_url, now) -> None:
    """`specwatch tokens create --role gate` (a subprocess on a database of its own): the token's row says gate."""
    from backend.api.auth import hash_token
    from backend.db import alert_repo
    from backend.db.session import make_engine
    from tests.dashboard.alerting_stack import make_token

    token = make_token(fresh_db_url, "gate", "argo-rollouts")
    engine = make_engine(fresh_db_url)
    try:
        with Session(engine) as session:
            row = alert_repo.token_by_hash(session, hash_token(token))
            assert (row.name, row.role, row.prefix) == ("argo-rollouts", "gate", token[:8])
    finally:
        engine.dispose()
