"""The rollout gate compares alpha with the scope's alpha_low threshold of the alert rules (the evaluator's,
per class): a code class at alpha 0.35 passes a rules file that sets code's threshold to 0.30, and the
decision records the threshold it used; the other scopes keep the rule's 0.55."""

from __future__ import annotations

from backend.db import rollout_repo as repo
from backend.db.session import session_scope
from backend.services import alerts
from backend.services.history import seed_history
from tests.rollout.conftest import BASELINE, MODEL, SPEC, T0, scenario
from tests.rollout.test_stages import at, evaluate, stages

RULES = {"version": 1, "rules": [{"name": "alpha-low", "kind": "alpha_low", "threshold": 0.55,
                                  "overrides": [{"match": {"traffic_class": "code"}, "threshold": 0.30}]}]}


def test_the_gate_uses_the_class_threshold_of_the_alert_rules(factory, rollout_settings, tmp_path):
    s = rollout_settings.model_copy(update={"alert_rules_file": tmp_path / "none.yaml"})
    with session_scope(factory) as sess:
        alerts.store_config(sess, RULES, source="test", by="test", now=at(T0))
    seed_history(factory, s, scenario=scenario(BASELINE), seconds=1200, end=T0, tick=1.0)
    evaluate(factory, s, T0)
    end = T0
    for until in (120, 1020):
        seed_history(factory, s, scenario=scenario(BASELINE + SPEC), seconds=int(T0 + until - end),
                     end=T0 + until, tick=1.0)
        end = T0 + until
        evaluate(factory, s, end)
    got = stages(factory)
    assert got["code"] == ("measuring", "pass", got["code"][2]), got  # 0.35 >= 0.30: no gate_failed
    with session_scope(factory) as sess:
        code = repo.track(sess, MODEL, "code")
        assert 0.30 < code.last_values["alpha"] < 0.40 and code.last_values["threshold"] == 0.30
        (m,) = [x for x in repo.measurements(sess, track_id=code.id) if x.at == at(T0 + 1020)]
        assert m.threshold == 0.30 and m.result == "pass"
        assert repo.track(sess, MODEL, "mixed").last_values["threshold"] == 0.55
