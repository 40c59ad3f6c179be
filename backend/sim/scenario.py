"""Scenario files for the fleet simulator: schema, validation and the built-in scenarios.

A scenario is a YAML mapping. Every key is checked: unknown keys, wrong types and out-of-range values
raise :class:`ScenarioError` whose message starts with the path of the offending field, for example
``pools[1].acceptance.a: must be between 0 and 1, got 1.3``. All times are offsets in seconds of
simulated time from the simulator's start.

The schema, field by field: docs/scenarios.md.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from backend.sim import scenario_events
from backend.sim import scenario_fields as sf
from backend.sim.scenario_model import (
    MAX_K,
    Event,
    Params,
    PerRequest,
    Phase,
    PoolSpec,
    RequestClass,
    Scenario,
    ScenarioError,
)

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"

# ---------------------------------------------------------------------------------------------- validation

ENGINES = ("vllm", "llamacpp", "sglang")

POOL_DEFAULTS: dict[str, Any] = {
    "engine": "vllm",
    "llamacpp_names": "current",
    "engines": 1,
    "labels": {},
    "waiting": 0,
    "step_time": {"base": 0.010, "per_seq": 0.0002},
    "overhead": {"eps0": 0.12, "slope": 0.004},
    "jitter": {"sigma": 0.08, "stall_prob": 0.002, "stall_factor": 6.0},
    "output_len": {"mean": 250.0, "sigma": 0.7, "max": 2048},
    "prompt_len": {"mean": 800.0, "sigma": 0.8, "max": 32768},
    "ttft": {"base": 0.02, "per_prompt_token": 0.00004, "sigma": 0.3, "queue_mean": 0.03},
    "finish": {"abort": 0.002, "error": 0.0, "repetition": 0.0},
    "kv_capacity_tokens": 120_000,
    "preemptions_per_s": 0.0,
}

_POOL_KEYS = {"id", "model", "traffic_class", "spec_mode", "k", "acceptance", "concurrency", "per_request", "drafter",
              "vllm_version", *POOL_DEFAULTS.keys()}
_TOP_KEYS = {"name", "description", "tick", "history_seconds", "defaults", "pools", "events", "phases",
             "config_labels"}


def _sub(d: dict, key: str, path: str, spec: dict[str, dict]) -> Params:
    """A flat mapping of numbers; `spec` maps field -> sf.number kwargs."""
    m = sf.mapping(d[key], f"{path}.{key}")
    sf.check_keys(m, f"{path}.{key}", set(spec))
    defaults = POOL_DEFAULTS.get(key, {})
    out = Params()
    for name, kw in spec.items():
        if name in m:
            out[name] = sf.number(m[name], f"{path}.{key}.{name}", **kw)
        elif name in defaults:
            out[name] = defaults[name]
        else:
            raise ScenarioError(f"{path}.{key}.{name}: required field is missing")
    return out


def _deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, val in over.items():
        if isinstance(val, dict) and isinstance(out.get(key), dict) and key != "acceptance":
            out[key] = _deep_merge(out[key], val)
        else:
            out[key] = copy.deepcopy(val)
    return out


def _spec_mode(v: Any, path: str) -> str:
    if v is False:  # YAML 1.1 reads an unquoted `off` as false
        return "off"
    return sf.string(v, path)


def parse_pool(raw: Any, path: str, defaults: dict) -> PoolSpec:
    m = sf.mapping(raw, path)
    sf.check_keys(m, path, _POOL_KEYS, {"model", "traffic_class", "spec_mode", "concurrency"} - set(defaults))
    m = _deep_merge(_deep_merge(POOL_DEFAULTS, defaults), m)
    model = sf.string(m["model"], f"{path}.model")
    tclass = sf.string(m["traffic_class"], f"{path}.traffic_class")
    mode = _spec_mode(m["spec_mode"], f"{path}.spec_mode")
    if mode == "off":
        if "k" in raw:
            raise ScenarioError(f"{path}.k: a baseline pool (spec_mode off) has no draft length; remove k")
        if "acceptance" in raw:
            raise ScenarioError(f"{path}.acceptance: a baseline pool (spec_mode off) has no acceptance; remove it")
        if "drafter" in raw:
            raise ScenarioError(f"{path}.drafter: a baseline pool (spec_mode off) has no drafter; remove it")
        k, acc = 0, None
    else:
        if "k" not in m:
            raise ScenarioError(f"{path}.k: required field is missing (num_speculative_tokens)")
        k = sf.number(m["k"], f"{path}.k", lo=1, hi=MAX_K, integer=True)
        if "acceptance" not in m:
            raise ScenarioError(f"{path}.acceptance: required field is missing")
        acc = sf.parse_acceptance(m["acceptance"], f"{path}.acceptance", k)
    pid = sf.string(m.get("id", f"{tclass}-{mode}"), f"{path}.id")
    if "/" in pid or "?" in pid or " " in pid:
        raise ScenarioError(f"{path}.id: must not contain '/', '?' or spaces, got {sf.shown(pid)}")
    labels = sf.mapping(m["labels"], f"{path}.labels")
    reserved = {"engine", "model_name", "traffic_class", "spec_mode", "position", "le", "finished_reason"}
    for key, val in labels.items():
        if key in reserved:
            raise ScenarioError(f"{path}.labels.{key}: reserved label name")
        if not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise ScenarioError(f"{path}.labels.{key}: not a valid Prometheus label name")
        sf.string(val, f"{path}.labels.{key}")
    st = _sub(m, "step_time", path, {"base": {"lo": 0.0, "lo_open": True}, "per_seq": {"lo": 0.0}})
    ov = _sub(m, "overhead", path, {"eps0": {"lo": 0.0}, "slope": {"lo": 0.0}})
    jt = _sub(m, "jitter", path, {"sigma": {"lo": 0.0, "hi": 3.0}, "stall_prob": {"lo": 0.0, "hi": 1.0},
                                  "stall_factor": {"lo": 1.0}})
    ol = _sub(m, "output_len", path, {"mean": {"lo": 1.0}, "sigma": {"lo": 0.0, "hi": 5.0},
                                      "max": {"lo": 1, "integer": True}})
    pl = _sub(m, "prompt_len", path, {"mean": {"lo": 1.0}, "sigma": {"lo": 0.0, "hi": 5.0},
                                      "max": {"lo": 1, "integer": True}})
    tt = _sub(m, "ttft", path, {"base": {"lo": 0.0}, "per_prompt_token": {"lo": 0.0},
                                "sigma": {"lo": 0.0, "hi": 5.0}, "queue_mean": {"lo": 0.0}})
    fi = _sub(m, "finish", path, {"abort": {"lo": 0.0, "hi": 1.0}, "error": {"lo": 0.0, "hi": 1.0},
                                  "repetition": {"lo": 0.0, "hi": 1.0}})
    if fi["abort"] + fi["error"] + fi["repetition"] > 1.0:
        raise ScenarioError(f"{path}.finish: abort + error + repetition must be <= 1")
    engine = m["engine"]
    if engine not in ENGINES:
        raise ScenarioError(f"{path}.engine: must be one of {', '.join(ENGINES)}, got {sf.type_name(engine)} "
                            f"{sf.shown(engine)}")
    if m["llamacpp_names"] not in ("current", "old"):
        raise ScenarioError(f"{path}.llamacpp_names: must be current or old, got {sf.shown(m['llamacpp_names'])}")
    if m["llamacpp_names"] != "current" and engine != "llamacpp":
        raise ScenarioError(f"{path}.llamacpp_names: only for engine: llamacpp")
    if engine != "vllm" and m["engines"] != 1:
        raise ScenarioError(f"{path}.engines: a {engine} server has no engine label: one engine per pool "
                            "(more replicas: more pools)")
    return PoolSpec(
        id=pid, model=model, traffic_class=tclass, spec_mode=mode, k=k, engine=engine,
        llamacpp_names=m["llamacpp_names"],
        engines=sf.number(m["engines"], f"{path}.engines", lo=1, hi=64, integer=True),
        labels=dict(labels), acceptance=acc,
        concurrency=sf.parse_profile(m["concurrency"], f"{path}.concurrency"),
        waiting=sf.parse_profile(m["waiting"], f"{path}.waiting"),
        step_time=st, overhead=ov, jitter=jt, output_len=ol, prompt_len=pl, ttft=tt, finish=fi,
        kv_capacity_tokens=sf.number(m["kv_capacity_tokens"], f"{path}.kv_capacity_tokens", lo=1, integer=True),
        preemptions_per_s=sf.number(m["preemptions_per_s"], f"{path}.preemptions_per_s", lo=0.0),
        per_request=parse_per_request(m["per_request"], f"{path}.per_request", k) if m.get("per_request") else None,
        drafter=sf.string(m["drafter"], f"{path}.drafter") if mode != "off" and "drafter" in m else None,
        vllm_version=sf.string(m["vllm_version"], f"{path}.vllm_version") if "vllm_version" in m else None,
    )


def parse_per_request(raw: Any, path: str, k: int) -> PerRequest:
    if k == 0:
        raise ScenarioError(f"{path}: a baseline pool (spec_mode off) has no per-request acceptance")
    m = sf.mapping(raw, path)
    sf.check_keys(m, path, {"classes", "report_share", "report_running"}, {"classes"})
    if not isinstance(m["classes"], list) or not m["classes"]:
        raise ScenarioError(f"{path}.classes: must be a non-empty list")
    classes = []
    for i, c in enumerate(m["classes"]):
        cp = f"{path}.classes[{i}]"
        cm = sf.mapping(c, cp)
        sf.check_keys(cm, cp, {"name", "share", "acceptance", "prompt_len", "context_drift"}, {"name", "share", "acceptance"})
        pl = None
        if "prompt_len" in cm:
            d = _sub(cm, "prompt_len", cp, {"mean": {"lo": 1.0}, "sigma": {"lo": 0.0, "hi": 5.0},
                                            "max": {"lo": 1, "integer": True}})
            pl = (d["mean"], d["sigma"], int(d["max"]))
        drift_from, per_doubling = None, 0.0
        if "context_drift" in cm:
            dm = sf.mapping(cm["context_drift"], f"{cp}.context_drift")
            sf.check_keys(dm, f"{cp}.context_drift", {"from", "per_doubling"}, {"from", "per_doubling"})
            drift_from = int(sf.number(dm["from"], f"{cp}.context_drift.from", lo=1, integer=True))
            per_doubling = sf.number(dm["per_doubling"], f"{cp}.context_drift.per_doubling", lo=0.0, hi=1.0)
        classes.append(RequestClass(name=sf.string(cm["name"], f"{cp}.name"),
                                    share=sf.number(cm["share"], f"{cp}.share", lo=0.0, lo_open=True),
                                    acceptance=sf.parse_acceptance(cm["acceptance"], f"{cp}.acceptance", k),
                                    prompt_len=pl, drift_from=drift_from, drift_per_doubling=per_doubling))
    if len({c.name for c in classes}) != len(classes):
        raise ScenarioError(f"{path}.classes: class names must be unique")
    share = sf.number(m.get("report_share", 1.0), f"{path}.report_share", lo=0.0, hi=1.0)
    running = m.get("report_running", False)
    if not isinstance(running, bool):
        raise ScenarioError(f"{path}.report_running: must be true or false, got {sf.shown(running)}")
    return PerRequest(classes=tuple(classes), report_share=share, report_running=running)


def parse_scenario(raw: Any, *, name: str = "scenario") -> Scenario:
    """Validate a scenario mapping (as loaded from YAML) into a :class:`Scenario`."""
    m = sf.mapping(raw, "scenario")
    for key in m:
        if key not in _TOP_KEYS:
            raise ScenarioError(f"{key}: unknown key (allowed: {', '.join(sorted(_TOP_KEYS))})")
    if "pools" not in m:
        raise ScenarioError("pools: required field is missing")
    nm = sf.string(m.get("name", name), "name")
    desc = m.get("description", "")
    if not isinstance(desc, str):
        raise ScenarioError(f"description: must be a string, got {sf.type_name(desc)}")
    tick = sf.number(m.get("tick", 0.1), "tick", lo=0.001, hi=60.0)
    hist = sf.number(m.get("history_seconds", 7200.0), "history_seconds", lo=0.0, lo_open=True)
    defaults = sf.mapping(m.get("defaults", {}), "defaults")
    for key in defaults:
        if key not in _POOL_KEYS - {"id"}:
            raise ScenarioError(f"defaults.{key}: unknown key (allowed: {', '.join(sorted(_POOL_KEYS - {'id'}))})")
    if not isinstance(m["pools"], list) or not m["pools"]:
        raise ScenarioError(f"pools: must be a non-empty list, got {sf.type_name(m['pools'])}")
    pools: dict[str, PoolSpec] = {}
    label_sets: dict[tuple, str] = {}
    for i, praw in enumerate(m["pools"]):
        pool = parse_pool(praw, f"pools[{i}]", defaults)
        if pool.id in pools:
            raise ScenarioError(f"pools[{i}].id: duplicate pool id {sf.shown(pool.id)}")
        ident = (pool.model, pool.traffic_class, pool.spec_mode, tuple(sorted(pool.labels.items())))
        if ident in label_sets:
            raise ScenarioError(f"pools[{i}]: same model_name/traffic_class/spec_mode/labels as pool "
                                f"{sf.shown(label_sets[ident])}; the fleet exposition would repeat series "
                                f"(give it distinct labels, e.g. labels: {{instance: ...}})")
        label_sets[ident] = pool.id
        pools[pool.id] = pool
    events: list[Event] = []
    ev_raw = m.get("events", [])
    if not isinstance(ev_raw, list):
        raise ScenarioError(f"events: must be a list, got {sf.type_name(ev_raw)}")
    for i, eraw in enumerate(ev_raw):
        events.append(scenario_events.parse_event(eraw, f"events[{i}]", pools))
    phases: list[Phase] = []
    ph_raw = m.get("phases", [])
    if not isinstance(ph_raw, list):
        raise ScenarioError(f"phases: must be a list, got {sf.type_name(ph_raw)}")
    for i, praw in enumerate(ph_raw):
        path = f"phases[{i}]"
        pm = sf.mapping(praw, path)
        sf.check_keys(pm, path, {"name", "start", "set"}, {"name", "start"})
        ph = Phase(name=sf.string(pm["name"], f"{path}.name"), start=sf.number(pm["start"], f"{path}.start", lo=0.0))
        phases.append(ph)
        sets = sf.mapping(pm.get("set", {}), f"{path}.set")
        for sel, ov in sets.items():
            sp = f"{path}.set.{sel}"
            ids = scenario_events.pool_refs(sel, f"{path}.set", pools)
            om = sf.mapping(ov, sp)
            sf.check_keys(om, sp, {"acceptance", "concurrency"})
            acc, conc = scenario_events.overrides(om, sp, ids, pools)
            events.append(Event(pool_ids=ids, at=(ph.start,), acceptance=acc, concurrency=conc, phase=ph.name))
    config_labels = m.get("config_labels", False)
    if not isinstance(config_labels, bool):
        raise ScenarioError(f"config_labels: must be true or false, got {sf.type_name(config_labels)}")
    return Scenario(name=nm, description=desc, tick=tick, history_seconds=hist, pools=list(pools.values()),
                    events=events, phases=phases, raw=copy.deepcopy(m), config_labels=config_labels)


# ---------------------------------------------------------------------------------------------- loading


def builtin_names() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def load_scenario(source: str | Path | dict | Scenario) -> Scenario:
    """A Scenario from a Scenario, a mapping, a YAML path, or a built-in name (see builtin_names())."""
    if isinstance(source, Scenario):
        return source
    if isinstance(source, dict):
        return parse_scenario(source)
    text_path = Path(source)
    if not text_path.exists() and not str(source).endswith((".yaml", ".yml")):
        builtin = SCENARIO_DIR / f"{source}.yaml"
        if not builtin.exists():
            raise ScenarioError(f"scenario: no file {str(source)!r} and no built-in of that name "
                                f"(built-ins: {', '.join(builtin_names())})")
        text_path = builtin
    if not text_path.exists():
        raise ScenarioError(f"scenario: file not found: {text_path}")
    try:
        raw = yaml.safe_load(text_path.read_text())
    except yaml.YAMLError as exc:
        raise ScenarioError(f"scenario: {text_path} is not valid YAML: {exc}") from None
    if raw is None:
        raise ScenarioError(f"scenario: {text_path} is empty")
    return parse_scenario(raw, name=text_path.stem)
