"""Pure alerting: the state machine, rule evaluations, silences, identity, and the config validator."""

from __future__ import annotations

import pytest

from backend.domain import alerting as al
from backend.domain.alert_config import ConfigError, parse_config


def run(statuses, *, for_s=120.0, keep=120.0, dt=60.0):
    st, out = al.AlertState(), []
    for i, s in enumerate(statuses):
        st, entered = al.step(st, s, i * dt, for_seconds=for_s, keep_firing_for=keep)
        out.append(entered)
    return st, out


def test_pending_then_firing_after_for():
    st, out = run(["breached"] * 4)
    assert out == ["pending", None, "firing", None] and st.phase == "firing"


def test_one_miss_resets_pending():
    _, out = run(["breached", "ok", "breached", "breached", "breached"])
    assert out == ["pending", "inactive", "pending", None, "firing"]


def test_zero_for_fires_at_once():
    _, out = run(["breached"], for_s=0)
    assert out == ["firing"]


@pytest.mark.parametrize("gap", ["no_data", "hold"])
def test_no_data_and_hold_never_resolve(gap):
    st, out = run(["breached"] * 3 + [gap] * 20)
    assert st.phase == "firing" and "resolved" not in out


def test_keep_firing_for_counts_from_last_bad():
    _, out = run(["breached"] * 3 + ["ok", "ok", "ok"], keep=120)
    assert out[3:] == [None, "resolved", None]  # last bad at t=120 s; ok at 180 s, 240 s: 120 s later


def test_alpha_low_needs_both_windows_volume_and_margin():
    s = lambda r, d=5000: al.WindowStat(300, r, d)
    kw = {"threshold": 0.55, "recover_margin": 0.03, "min_drafts": 1000}
    assert al.alpha_low(s(0.50), s(0.50), **kw).status == "breached"
    assert al.alpha_low(s(0.50), s(0.56), **kw).status == "hold"  # short below only
    assert al.alpha_low(s(0.56), s(0.50), **kw).status == "hold"
    assert al.alpha_low(s(0.59), s(0.56), **kw).status == "ok"
    assert al.alpha_low(s(0.57), s(0.60), **kw).status == "hold"  # inside the recovery band
    assert al.alpha_low(s(0.10), s(0.10, 999), **kw).status == "no_data"  # volume guard
    assert al.alpha_low(s(None, 0), s(0.10), **kw).status == "no_data"


def test_other_rules():
    assert al.margin_negative(0.9, source="measured", min_speedup=1, recover_margin=0.02, drafts=5000,
                              min_drafts=1000, window=3600).status == "breached"
    assert al.margin_negative(1.01, source="measured", min_speedup=1, recover_margin=0.02, drafts=5000,
                              min_drafts=1000, window=3600).status == "hold"
    assert al.latency_regression({"tpot": "worse", "itl": "better"}, window=60).status == "breached"
    assert al.latency_regression({"tpot": "inconclusive"}, window=60).status == "no_data"
    assert al.latency_regression({"tpot": "no-significant-change"}, window=60).status == "ok"
    unresolved = al.latency_regression({"tpot": "unresolved", "itl": "better"}, window=60)
    assert unresolved.status == "no_data"  # below the resolution: neither fires nor resolves
    why = "P99 (10, 25] ms vs (0, 10] ms: spec slower by 0 to 25 ms"
    ev = al.latency_regression({"tpot": "worse", "itl": "unresolved"}, window=60, reasons={"tpot": why, "itl": "x"})
    assert ev.status == "breached" and ev.reason == f"P99 TPOT worse than baseline (TPOT {why})"
    assert ev.values["reasons"]["tpot"] == why
    assert al.acceptance_drift(0.5, None, min_depth_ratio=0.6, min_concurrency_ratio=0.8, drafts=5000,
                               min_drafts=1000, window=60).status == "breached"
    assert al.acceptance_drift(0.9, 0.5, min_depth_ratio=0.6, min_concurrency_ratio=0.8, drafts=5000,
                               min_drafts=1000, window=60).status == "breached"
    assert al.stale_data(400, after=300).status == "breached"
    assert al.stale_data(None, after=300).status == "breached"
    assert al.stale_data(10, after=300).status == "ok"


def test_silence_matching_and_identity():
    s = al.SilenceSpec({"model": "llama-*", "rule": "alpha-low"}, 100, 200)
    labels = {"model": "llama-70b", "traffic_class": "chat", "rule": "alpha-low"}
    assert al.silence_matches(s, labels, 150)
    assert not al.silence_matches(s, labels, 200)  # end is exclusive
    assert not al.silence_matches(s, {**labels, "rule": "stale-data"}, 150)
    assert al.silenced_by([(7, s)], labels, 150) == 7
    assert al.fingerprint(labels) == al.fingerprint(dict(reversed(list(labels.items()))))
    assert al.group_key(labels) == al.group_key({**labels, "traffic_class": "code"})


def test_notify_decisions():
    assert al.notify_on("firing", notified_firing=False, silenced=False, send_resolved=True) == "firing"
    assert al.notify_on("firing", notified_firing=False, silenced=True, send_resolved=True) is None
    assert al.notify_on(None, notified_firing=False, silenced=False, send_resolved=True) == "firing"
    assert al.notify_on("resolved", notified_firing=True, silenced=True, send_resolved=True) == "resolved"
    assert al.notify_on("resolved", notified_firing=False, silenced=False, send_resolved=True) is None
    assert al.notify_on("resolved", notified_firing=True, silenced=False, send_resolved=False) is None


def test_config_errors_name_the_field():
    raw = {"version": 1, "rules": [
        {"name": "a", "kind": "alpha_low"},
        {"name": "b", "kind": "stale_data", "after": "soon"},
        {"name": "c", "kind": "alpha_low", "for": "5 minutes", "short_window": "2h", "long_window": "1h",
         "overrides": [{"match": {"colour": "red"}, "threshold": 1.5}], "bogus": 1},
        {"name": "a", "kind": "margin_negative"},
    ]}
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    errs = exc.value.errors
    assert "rules[1].after: must be a duration like 5m (got 'soon')" in errs
    assert "rules[2].for: must be a duration like 5m (got '5 minutes')" in errs
    assert "rules[2].short_window: must not be longer than long_window" in errs
    assert any(e.startswith("rules[2].overrides[0].threshold: must be between 0 and 1") for e in errs)
    assert any(e.startswith("rules[2].overrides[0].match.colour: unknown label") for e in errs)
    assert any(e.startswith("rules[2].bogus: unknown field") for e in errs)
    assert "rules[3].name: duplicate rule name 'a'" in errs


def test_example_file_is_valid():
    from pathlib import Path

    import yaml

    cfg = parse_config(yaml.safe_load((Path(__file__).parents[2] / "alerts.example.yaml").read_text()))
    alpha = cfg.rule("alpha-low")
    assert cfg.version == 1 and cfg.send_resolved
    assert alpha.params["short_window"] == 300 and alpha.params["long_window"] == 3600
    assert alpha.value("threshold", {"traffic_class": "code"}) == 0.45
    assert alpha.value("threshold", {"traffic_class": "chat"}) == 0.55
