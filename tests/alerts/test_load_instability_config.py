"""The load_instability rule in the rules file: defaults, a boundary that is not a band edge, a recovery
ratio above the limit, overrides of the boundary; and the page's parameters come from the stored rule."""

from __future__ import annotations

import pytest

from backend.domain.alert_config import ConfigError, parse_config
from backend.services import load_bands


def _rule(**kw) -> dict:
    return {"version": 1, "rules": [{"name": "load", "kind": "load_instability", **kw}]}


def test_defaults() -> None:
    (rule,) = parse_config(_rule()).rules
    assert rule.params == {"boundary": 32.0, "margin": 0.05, "recover_margin": 0.02, "dispersion_ratio": 2.0,
                           "recover_dispersion_ratio": 1.5, "window": 3600.0}
    assert "batches above 32" in rule.runbook


def test_errors_are_named() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(_rule(boundary=30, dispersion_ratio=2.0, recover_dispersion_ratio=3.0,
                           overrides=[{"match": {"traffic_class": "code"}, "boundary": 64}]))
    assert exc.value.errors == [
        "rules[0].boundary: must be a concurrency band edge (8, 32, 128) in running requests (got 30)",
        "rules[0].recover_dispersion_ratio: must not be above dispersion_ratio (2), got 3",
        "rules[0].overrides[0].boundary: must be a concurrency band edge (8, 32, 128) in running requests (got 64)"]
    with pytest.raises(ConfigError, match="dispersion_ratio: must be between 1 and 1000"):
        parse_config(_rule(dispersion_ratio=0.5, recover_dispersion_ratio=0.5))


def test_page_parameters_follow_the_rule_and_its_overrides() -> None:
    (rule,) = parse_config(_rule(boundary=8, margin=0.1, min_drafts=300, match={"model": "m*"},
                                 overrides=[{"match": {"traffic_class": "code"}, "boundary": 128}])).rules
    chat = {"model": "m1", "traffic_class": "chat", "spec_mode": "eagle3"}
    assert load_bands.rule_for([rule], chat) is rule
    assert load_bands.rule_for([rule], {**chat, "model": "other"}) is None
    p = load_bands.rule_params(rule, chat, min_drafts=1000)
    assert (p.boundary, p.margin, p.min_drafts, p.dispersion_ratio) == (8, 0.1, 300, 2.0)
    assert load_bands.rule_params(rule, {**chat, "traffic_class": "code"}, min_drafts=1000).boundary == 128
    assert load_bands.rule_params(None, chat, min_drafts=700).min_drafts == 700
