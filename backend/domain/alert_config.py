"""The alert rules file: parse and validate a YAML-loaded mapping into a typed, frozen config.

Pure: no YAML parsing here (the caller loads the file), no settings, no clock. Every error names the
field the way a reader finds it in the file, e.g. ``rules[2].for: must be a duration like 5m (got 'x')``,
and all errors are collected before raising, so one `specwatch alerts check FILE` run lists them all.

Format (``version: 1``)::

    version: 1
    defaults: {for: 2m, keep_firing_for: 10m, min_drafts: 1000, severity: warning, send_resolved: true}
    rules:
      - name: alpha-low            # unique; becomes the `rule` label
        kind: alpha_low            # alpha_low | margin_negative | latency_regression | acceptance_drift | stale_data
                                   # | pool_limit (new pools refused: the collection's cardinality limit)
                                   # | replica_outlier (one replica's alpha below its pool's other replicas)
                                   # | context_drift (per-request records: long-context alpha below short)
                                   # | load_instability (per-request records: alpha falls or swings above a
                                   #   concurrency band)
        threshold: 0.55            # r = A/D (draft acceptance rate, with K shown next to it; spec-math §2.2)
        recover_margin: 0.03       # hysteresis: resolves only at threshold + margin
        short_window: 5m           # both windows must be below the threshold
        long_window: 1h
        overrides:                 # per model / class thresholds (first match wins)
          - {match: {model: llama-70b, traffic_class: code}, threshold: 0.45}
        runbook: "..."             # the rollout-recipe step shown in the message

Durations: ``90s``, ``5m``, ``1h``, ``1d`` or a plain number of seconds (tests use seconds).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

from backend.domain.bands import BAND_EDGES
from backend.domain.context_drift import is_power_of_two

KINDS = ("alpha_low", "margin_negative", "latency_regression", "acceptance_drift", "stale_data", "pool_limit",
         "replica_outlier", "context_drift", "load_instability")
SEVERITIES = ("info", "warning", "page")
MATCH_LABELS = ("model", "traffic_class", "spec_mode", "replica")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,79}$")

DEFAULT_RUNBOOK = {
    "alpha_low": "Hold the rollout for this class; compare per-position p_i with the last good week. If the drop "
                 "follows a drafter or vLLM change, roll the class back to spec_mode off.",
    "margin_negative": "Speculation is net-negative here: lower K or disable speculation for this class at "
                       "this concurrency band, then re-measure the margin.",
    "latency_regression": "Check the P99 verdict, its interval and buckets on the model page; if it holds for the class, "
                          "hold the rollout step and compare the concurrency band with the baseline.",
    "acceptance_drift": "Depth drift (EAGLE attention drift): lower K for this class or cap concurrency; "
                        "verify p_i decay per class before rolling further.",
    "pool_limit": "New pools are being refused (SPECWATCH_MAX_POOLS reached): find the target or label that "
                  "multiplies pools (rejections with rule pool_limit name them) and fix its labels, or raise the "
                  "limit if the fleet really grew; stored pools are still collected.",
    "replica_outlier": "One replica drafts worse than the rest of its pool: compare its version labels and drafter "
                       "checkpoint with the others, check its GPU (ECC, clocks); drain or restart it, and roll back "
                       "a config drift.",
    "context_drift": "Long prompts draft worse than short ones (EAGLE attention drift on long inputs): compare "
                     "alpha by context band on the model page; cap speculation for long prompts of this class "
                     "(route them to spec_mode off or a lower K) or try a drafter trained on long contexts.",
    "load_instability": "Acceptance falls or swings from minute to minute at high load (EAGLE's weak spot is batches "
                        "above 32): compare alpha by concurrency band on the model page; cap concurrency for this "
                        "class, lower K at high load, or route its high-load traffic to spec_mode off.",
    "stale_data": "No fresh data: check the collector (specwatch collect --once) and the pool's /metrics; "
                  "alerts on this pool keep their state until data returns.",
}


class ConfigError(ValueError):
    """The config is invalid; `errors` holds one `path: message` line per problem."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("\n".join(errors))


@dataclass(frozen=True)
class Override:
    match: dict[str, str]
    values: dict[str, float]

    def applies(self, labels: dict[str, str]) -> bool:
        return all(fnmatch.fnmatchcase(labels.get(k, ""), v) for k, v in self.match.items())


@dataclass(frozen=True)
class Rule:
    name: str
    kind: str
    for_seconds: float
    keep_firing_for_seconds: float
    severity: str
    min_drafts: float
    params: dict[str, Any]  # kind-specific numbers (threshold, windows in seconds, ratios, metrics)
    overrides: tuple[Override, ...] = ()
    runbook: str = ""
    match: dict[str, str] = field(default_factory=dict)  # limit the rule to some pools (globs)

    def value(self, key: str, labels: dict[str, str]) -> Any:
        """A parameter for one pool: the first matching override wins, else the rule's own."""
        for o in self.overrides:
            if key in o.values and o.applies(labels):
                return o.values[key]
        return self.params.get(key)

    def selects(self, labels: dict[str, str]) -> bool:
        return all(fnmatch.fnmatchcase(labels.get(k, ""), v) for k, v in self.match.items())

    def windows(self) -> set[float]:
        return {v for k, v in self.params.items() if k.endswith("window")}


@dataclass(frozen=True)
class AlertConfig:
    version: int
    rules: tuple[Rule, ...]
    send_resolved: bool = True

    def rule(self, name: str) -> Rule | None:
        return next((r for r in self.rules if r.name == name), None)

    def alpha_threshold(self, labels: dict[str, str]) -> float | None:
        """The acceptance-rate threshold of one target (model, traffic_class, spec_mode labels): the first
        alpha_low rule that selects it, after that rule's overrides (`Rule.value`, as the evaluator reads
        it); None when no alpha_low rule applies."""
        for r in self.rules:
            if r.kind == "alpha_low" and r.selects({**labels, "rule": r.name}):
                value = r.value("threshold", {**labels, "rule": r.name})
                return None if value is None else float(value)
        return None


def parse_duration(v: Any) -> float | None:
    """`90s`, `5m`, `1h`, or a number of seconds -> seconds; None when malformed."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v) if v >= 0 else None
    if isinstance(v, str):
        m = _DURATION.match(v)
        if m:
            return float(m.group(1)) * _UNITS[m.group(2)]
        if v.strip().replace(".", "", 1).isdigit():
            return float(v)
    return None


# kind -> {param: (type, default, (lo, hi) or None)}; type "duration", "number", "metrics"
_PARAMS: dict[str, dict[str, tuple[str, Any, tuple[float, float] | None]]] = {
    "alpha_low": {"threshold": ("number", 0.55, (0.0, 1.0)), "recover_margin": ("number", 0.03, (0.0, 1.0)),
                  "short_window": ("duration", 300.0, None), "long_window": ("duration", 3600.0, None)},
    "margin_negative": {"min_speedup": ("number", 1.0, (0.0, 100.0)),
                        "recover_margin": ("number", 0.02, (0.0, 10.0)), "window": ("duration", 3600.0, None)},
    "latency_regression": {"window": ("duration", 3600.0, None), "metrics": ("metrics", ("tpot", "itl"), None)},
    "acceptance_drift": {"min_depth_ratio": ("number", 0.6, (0.0, 1.0)),
                         "min_concurrency_ratio": ("number", 0.8, (0.0, 1.0)),
                         "window": ("duration", 3600.0, None)},
    "stale_data": {"after": ("duration", 300.0, None)},
    "pool_limit": {"lookback": ("duration", 900.0, None)},
    "replica_outlier": {"gap": ("number", 0.1, (0.0, 1.0)), "recover_margin": ("number", 0.02, (0.0, 1.0)),
                        "window": ("duration", 3600.0, None)},
    "context_drift": {"boundary": ("number", 32768.0, (1.0, 2.0**31)), "margin": ("number", 0.05, (0.0, 1.0)),
                      "recover_margin": ("number", 0.02, (0.0, 1.0)), "window": ("duration", 3600.0, None)},
    "load_instability": {"boundary": ("number", 32.0, (1.0, 1e6)), "margin": ("number", 0.05, (0.0, 1.0)),
                         "recover_margin": ("number", 0.02, (0.0, 1.0)),
                         "dispersion_ratio": ("number", 2.0, (1.0, 1000.0)),
                         "recover_dispersion_ratio": ("number", 1.5, (1.0, 1000.0)),
                         "window": ("duration", 3600.0, None)},
}
_COMMON = {"name", "kind", "for", "keep_firing_for", "severity", "min_drafts", "overrides", "runbook", "match"}


class _Errors(list):
    def add(self, path: str, msg: str) -> None:
        self.append(f"{path}: {msg}")


def _show(v: Any) -> str:
    return repr(v) if isinstance(v, str) else str(v)


def _param(errs: _Errors, path: str, spec: tuple, raw: Any) -> Any:
    kind, _, bounds = spec
    if kind == "duration":
        d = parse_duration(raw)
        if d is None or d <= 0:
            errs.add(path, f"must be a duration like 5m (got {_show(raw)})")
        return d
    if kind == "metrics":
        vals = raw if isinstance(raw, list) else [raw]
        if not vals or any(v not in ("tpot", "itl") for v in vals):
            errs.add(path, f"must be a list of tpot / itl (got {_show(raw)})")
            return None
        return tuple(vals)
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        errs.add(path, f"must be a number (got {_show(raw)})")
        return None
    if bounds and not bounds[0] <= raw <= bounds[1]:
        errs.add(path, f"must be between {bounds[0]:g} and {bounds[1]:g} (got {raw})")
    return float(raw)


def _match(errs: _Errors, path: str, raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        errs.add(path, "must be a mapping of model / traffic_class / spec_mode to a value or glob")
        return {}
    for k, v in raw.items():
        if k not in MATCH_LABELS:
            errs.add(f"{path}.{k}", f"unknown label (one of {', '.join(MATCH_LABELS)})")
        elif not isinstance(v, str) or not v:
            errs.add(f"{path}.{k}", f"must be a non-empty string (got {_show(v)})")
    return {str(k): str(v) for k, v in raw.items()}


def _rule(errs: _Errors, path: str, raw: Any, defaults: dict[str, Any]) -> Rule | None:
    if not isinstance(raw, dict):
        errs.add(path, "must be a mapping with at least name and kind")
        return None
    kind = raw.get("kind")
    if kind not in KINDS:
        errs.add(f"{path}.kind", f"must be one of {', '.join(KINDS)} (got {_show(kind)})")
        return None
    name = raw.get("name", kind)
    if not isinstance(name, str) or not _NAME.match(name):
        errs.add(f"{path}.name", f"must be lower-case letters, digits, '-', '_' or '.' (got {_show(name)})")
    specs = _PARAMS[kind]
    for key in raw:
        if key not in _COMMON and key not in specs:
            errs.add(f"{path}.{key}", f"unknown field for kind {kind} (known: {', '.join(sorted(_COMMON | set(specs)))})")
    params = {k: _param(errs, f"{path}.{k}", spec, raw.get(k, spec[1])) for k, spec in specs.items()}
    if kind == "alpha_low" and params["short_window"] and params["long_window"] \
            and params["short_window"] > params["long_window"]:
        errs.add(f"{path}.short_window", "must not be longer than long_window")
    if kind == "context_drift" and params["boundary"] is not None and not is_power_of_two(params["boundary"]):
        errs.add(f"{path}.boundary", f"must be a power of two in prompt tokens, e.g. 32768 (got {raw['boundary']})")
    if kind == "load_instability":
        _check_load(errs, path, params, raw)
    timing = {}
    for key in ("for", "keep_firing_for"):
        value = raw.get(key, defaults.get(key, 0))
        d = parse_duration(value)
        if d is None:
            errs.add(f"{path}.{key}", f"must be a duration like 5m (got {_show(value)})")
        timing[key] = d or 0.0
    severity = raw.get("severity", defaults.get("severity", "warning"))
    if severity not in SEVERITIES:
        errs.add(f"{path}.severity", f"must be one of {', '.join(SEVERITIES)} (got {_show(severity)})")
    min_drafts = raw.get("min_drafts", defaults.get("min_drafts", 1000))
    if isinstance(min_drafts, bool) or not isinstance(min_drafts, int | float) or min_drafts < 0:
        errs.add(f"{path}.min_drafts", f"must be a number >= 0 (got {_show(min_drafts)})")
        min_drafts = 0
    overrides = []
    raw_over = raw.get("overrides", [])
    if not isinstance(raw_over, list):
        errs.add(f"{path}.overrides", "must be a list of {match: {...}, <param>: value}")
        raw_over = []
    for j, o in enumerate(raw_over):
        opath = f"{path}.overrides[{j}]"
        if not isinstance(o, dict) or "match" not in o:
            errs.add(opath, "must be a mapping with `match` and the values to override")
            continue
        vals = {}
        for k, v in o.items():
            if k == "match":
                continue
            if k not in specs or specs[k][0] != "number":
                errs.add(f"{opath}.{k}", f"cannot be overridden for kind {kind}")
                continue
            vals[k] = _param(errs, f"{opath}.{k}", specs[k], v)
            if kind == "load_instability" and k == "boundary" and vals[k] is not None and vals[k] not in BAND_EDGES:
                errs.add(f"{opath}.{k}", f"must be a concurrency band edge ({', '.join(map(str, BAND_EDGES))}) "
                         f"in running requests (got {v})")
            elif k == "boundary" and vals[k] is not None and not is_power_of_two(vals[k]):
                errs.add(f"{opath}.{k}", f"must be a power of two in prompt tokens, e.g. 32768 (got {v})")
        overrides.append(Override(match=_match(errs, f"{opath}.match", o["match"]), values=vals))
    runbook = raw.get("runbook", DEFAULT_RUNBOOK[kind])
    if not isinstance(runbook, str):
        errs.add(f"{path}.runbook", "must be text")
    return Rule(name=str(name), kind=kind, for_seconds=timing["for"], keep_firing_for_seconds=timing["keep_firing_for"],
                severity=str(severity), min_drafts=float(min_drafts), params=params, overrides=tuple(overrides),
                runbook=str(runbook), match=_match(errs, f"{path}.match", raw["match"]) if "match" in raw else {})


def _check_load(errs: _Errors, path: str, params: dict[str, Any], raw: dict) -> None:
    """load_instability: the boundary is a concurrency band edge; recovery needs a ratio at or below the limit."""
    if params["boundary"] is not None and params["boundary"] not in BAND_EDGES:
        errs.add(f"{path}.boundary", f"must be a concurrency band edge ({', '.join(map(str, BAND_EDGES))}) in running "
                 f"requests (got {raw['boundary']})")
    ratio, recover = params["dispersion_ratio"], params["recover_dispersion_ratio"]
    if ratio is not None and recover is not None and recover > ratio:
        errs.add(f"{path}.recover_dispersion_ratio", f"must not be above dispersion_ratio ({ratio:g}), got {recover:g}")


def parse_config(raw: Any) -> AlertConfig:
    """Validate a YAML-loaded mapping; raise ConfigError listing every problem."""
    errs = _Errors()
    if not isinstance(raw, dict):
        raise ConfigError(["(top level): must be a mapping with `version` and `rules`"])
    for key in raw:
        if key not in ("version", "defaults", "rules"):
            errs.add(str(key), "unknown top-level field (known: version, defaults, rules)")
    version = raw.get("version")
    if version != 1:
        errs.add("version", f"must be 1 (got {_show(version)})")
    defaults = raw.get("defaults", {}) or {}
    if not isinstance(defaults, dict):
        errs.add("defaults", "must be a mapping")
        defaults = {}
    for key in defaults:
        if key not in ("for", "keep_firing_for", "severity", "min_drafts", "send_resolved"):
            errs.add(f"defaults.{key}", "unknown field (known: for, keep_firing_for, severity, min_drafts, send_resolved)")
    send_resolved = defaults.get("send_resolved", True)
    if not isinstance(send_resolved, bool):
        errs.add("defaults.send_resolved", f"must be true or false (got {_show(send_resolved)})")
    rules_raw = raw.get("rules")
    if not isinstance(rules_raw, list) or not rules_raw:
        errs.add("rules", "must be a non-empty list")
        rules_raw = []
    rules = [_rule(errs, f"rules[{i}]", r, defaults) for i, r in enumerate(rules_raw)]
    seen: set[str] = set()
    for i, r in enumerate(rules):
        if r is not None and r.name in seen:
            errs.add(f"rules[{i}].name", f"duplicate rule name {r.name!r}")
        if r is not None:
            seen.add(r.name)
    if errs:
        raise ConfigError(list(errs))
    return AlertConfig(version=1, rules=tuple(r for r in rules if r is not None), send_resolved=bool(send_resolved))
