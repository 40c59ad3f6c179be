"""Scenario files for the fleet simulator: schema, validation and the built-in scenarios.

A scenario is a YAML mapping. Every key is checked: unknown keys, wrong types and out-of-range values
raise :class:`ScenarioError` whose message starts with the path of the offending field, for example
``pools[1].acceptance.a: must be between 0 and 1, got 1.3``. All times are offsets in seconds of
simulated time from the simulator's start.

Schema (``*`` = required)::

    name: str                      # defaults to the file stem
    description: str
    tick: float > 0                # simulated seconds per tick (default 0.1); the CLI may override it
    history_seconds: float > 0     # how far back /truth?at= can answer (default 7200)
    defaults: {<pool fields>}      # merged (deeply) under every pool
    pools*:                        # non-empty list
      - id: str                    # default "<traffic_class>-<spec_mode>"; unique
        model*: str                # the model_name label
        traffic_class*: str
        spec_mode*: str            # "off" = baseline pool (no spec_decode series); YAML `off` (false) is accepted
        engine: vllm | llamacpp | sglang   # whose /metrics and responses the pool speaks (default vllm; see
                                   # backend/sim/exposition.py): vLLM's counters, llama-server's llamacpp:*
                                   # (draft and accepted tokens, no drafts), SGLang's sglang:* (accept length
                                   # and rate gauges per logging interval); per-request records in its shape
        llamacpp_names: current | old      # an engine: llamacpp pool's metric names: a current llama-server's
                                   # spec_decode_* (default), or an older build's n_drafted_* only
        k: int 1..16               # num_speculative_tokens; required unless spec_mode is "off"
        drafter: str               # the drafter's name (spec pools only; /truth and the A/B scenarios name it)
        engines: int 1..64         # data-parallel engines, one series set per engine label (default 1)
        labels: {str: str}         # extra target labels added to the fleet /metrics (e.g. instance; the fleet
                                   # /metrics names every pool's instance: this label, else the pool's id)
        acceptance:                # required unless spec_mode is "off"; conditional per-position probabilities
          mode*: iid | decay | list | rate
          a: float 0..1                        # iid: p_i = a
          a0: float 0..1, decay: float >= 0    # decay: p_i = max(0, a0 - decay*i)
          p: [float 0..1] * k                  # list: explicit conditional p_0..p_{k-1}
          r: float 0..1                        # rate: i.i.d. a solved so that accepted/draft_tokens = r at this k
          concurrency: {above: int >= 0, slope: float >= 0, min_scale: float 0..1,
                        swing: float 0..1, swing_seconds: float > 0}
                                   # every p_i *= max(min_scale, 1 - slope*(R - above)) when R > above;
                                   # swing: also *= (1 - swing*u), u uniform 0..1 drawn afresh every
                                   # swing_seconds (default 60): acceptance unstable above `above`
          drafter_max_len: int > 0 # a request whose prompt+generated length exceeds it gets ...
          beyond_max_len_a: float 0..1   # ... i.i.d. acceptance a (default 0: zero-filled drafts)
          no_draft_prob: float 0..1      # share of decode outputs that carry no draft (default 0)
        concurrency*: <profile>    # running requests per engine
        waiting: <profile>         # mean of vllm:num_requests_waiting (Poisson per tick; default 0)
        step_time: {base: float > 0, per_seq: float >= 0}   # plain decode step t_base(R) = base + per_seq*R
        overhead: {eps0: float >= 0, slope: float >= 0}      # spec step = (1 + eps0 + slope*R) * t_base(R)
        jitter: {sigma: float >= 0, stall_prob: float 0..1, stall_factor: float >= 1}
        output_len: {mean: float >= 1, sigma: float >= 0, max: int >= 1}   # lognormal, capped at max
        prompt_len: {mean: float >= 1, sigma: float >= 0, max: int >= 1}
        ttft: {base: float >= 0, per_prompt_token: float >= 0, sigma: float >= 0, queue_mean: float >= 0}
        finish: {abort: float 0..1, error: float 0..1, repetition: float 0..1}   # probabilities
        kv_capacity_tokens: int > 0
        preemptions_per_s: float >= 0
        per_request:               # optional, spec pools only: per-request records (vLLM's
                                   # metrics.speculative_decoding) for requests of several classes in ONE pool
          classes*: [{name*: str, share*: float > 0, acceptance*: {...as above},
                      prompt_len: {mean, sigma, max as above},      # the class's prompts (default: the pool's)
                      context_drift: {from*: int >= 1, per_doubling*: float 0..1}}]
                                   # each admitted request draws a class by share; its drafts use the class's
                                   # acceptance (the pool's acceptance and its events do not apply to them);
                                   # every record carries its prompt_tokens. context_drift: long-context
                                   # drift: a request whose prompt is longer than `from` tokens drafts with
                                   # each conditional p_i scaled by max(0, 1 - per_doubling * log2(prompt/from))
          report_running: bool     # records carry running_requests: the engine's running requests at the
                                   # request's finish (default false: specwatch uses the pool's band)
          report_share: float 0..1 # share of finished requests whose record is reported (default 1; < 1
                                   # models a partial rollout of --per-request-spec-decode-metrics)

    <profile> := number | {points*: [[t, value], ...], interp: linear | step, period: float > 0}
                                   # times in seconds, increasing; before the first point the first value
                                   # holds, after the last the last (or the profile repeats with `period`)

    events:                        # optional list
      - at: float >= 0 | [float, ...]      # or every: float > 0 (+ start, until)
        pool*: str | [str, ...] | "*"
        restart: true              # counters and histograms back to 0, _created = restart time
        acceptance: {...}          # replaces the pool's acceptance from then on
        concurrency: <profile>     # replaces the pool's concurrency from then on (times stay absolute)
        drafter: str               # a drafter change (a new version): its name from then on; needs
                                   # acceptance (the new drafter's, the change's known effect)
    phases:                        # optional named stretches of time; sugar for events
      - name*: str
        start*: float >= 0
        set: {<pool id or "*">: {acceptance: ..., concurrency: ...}}
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"

MAX_K = 16


class ScenarioError(ValueError):
    """A scenario file or mapping is invalid. The message names the field and the problem."""


# ---------------------------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Profile:
    """A value over simulated time: constant, or piecewise over points (optionally periodic)."""

    points: tuple[tuple[float, float], ...]
    interp: str = "linear"
    period: float | None = None

    @classmethod
    def constant(cls, value: float) -> Profile:
        return cls(points=((0.0, float(value)),), interp="step")

    def value(self, t: float) -> float:
        pts = self.points
        if self.period:
            t = t % self.period
        if t <= pts[0][0] or len(pts) == 1:
            return pts[0][1]
        if t >= pts[-1][0]:
            return pts[-1][1]
        for (t0, v0), (t1, v1) in itertools.pairwise(pts):
            if t0 <= t < t1:
                if self.interp == "step":
                    return v0
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0)
        return pts[-1][1]  # pragma: no cover

    def maximum(self) -> float:
        return max(v for _, v in self.points)


@dataclass(frozen=True)
class Acceptance:
    """Conditional acceptance p_i per draft position, plus load and context effects."""

    p: tuple[float, ...]
    conc_above: int | None = None
    conc_slope: float = 0.0
    conc_min_scale: float = 0.0
    conc_swing: float = 0.0
    conc_swing_seconds: float = 60.0
    drafter_max_len: int | None = None
    beyond_max_len_a: float = 0.0
    no_draft_prob: float = 0.0

    def conditional(self, running: float, t: float = 0.0) -> tuple[float, ...]:
        """p_i at `running` requests per engine at simulated time `t` (after the concurrency effect)."""
        if self.conc_above is None or running <= self.conc_above:
            return self.p
        scale = max(self.conc_min_scale, 1.0 - self.conc_slope * (running - self.conc_above))
        if self.conc_swing:  # the same draw for every pool and class within one swing period
            scale *= 1.0 - self.conc_swing * random.Random(int(t // self.conc_swing_seconds)).random()
        return tuple(min(1.0, max(0.0, x * scale)) for x in self.p)


@dataclass(frozen=True)
class RequestClass:
    name: str
    share: float
    acceptance: Acceptance
    prompt_len: tuple[float, float, int] | None = None  # (mean, sigma, max) of a lognormal; None: the pool's
    drift_from: int | None = None  # context_drift: prompts longer than this draft worse...
    drift_per_doubling: float = 0.0  # ...p_i scaled by 1 - this per doubling of the prompt beyond drift_from


@dataclass(frozen=True)
class PerRequest:
    classes: tuple[RequestClass, ...]
    report_share: float = 1.0
    report_running: bool = False


@dataclass(frozen=True)
class PoolSpec:
    id: str
    model: str
    traffic_class: str
    spec_mode: str
    k: int  # 0 for a baseline ("off") pool
    engines: int
    labels: dict[str, str]
    acceptance: Acceptance | None
    concurrency: Profile
    waiting: Profile
    step_base: float
    step_per_seq: float
    eps0: float
    eps_slope: float
    jitter_sigma: float
    stall_prob: float
    stall_factor: float
    output_mean: float
    output_sigma: float
    output_max: int
    prompt_mean: float
    prompt_sigma: float
    prompt_max: int
    ttft_base: float
    ttft_per_prompt_token: float
    ttft_sigma: float
    ttft_queue_mean: float
    p_abort: float
    p_error: float
    p_repetition: float
    kv_capacity_tokens: int
    preemptions_per_s: float
    per_request: PerRequest | None = None
    drafter: str | None = None
    engine: str = "vllm"
    llamacpp_names: str = "current"

    @property
    def spec(self) -> bool:
        return self.spec_mode != "off"

    @property
    def instance(self) -> str:
        """The pool's server as a replica: its `instance` label, else its id. The fleet /metrics carries it
        and the demo's per-pool scrape targets name it, so seeded history and live collection agree."""
        return self.labels.get("instance", self.id)


@dataclass(frozen=True)
class Event:
    pool_ids: tuple[str, ...]
    at: tuple[float, ...] = ()
    every: float | None = None
    start: float = 0.0
    until: float | None = None
    restart: bool = False
    acceptance: Acceptance | None = None
    concurrency: Profile | None = None
    phase: str | None = None
    drafter: str | None = None


@dataclass(frozen=True)
class Phase:
    name: str
    start: float


@dataclass
class Scenario:
    name: str
    description: str
    tick: float
    history_seconds: float
    pools: list[PoolSpec]
    events: list[Event]
    phases: list[Phase]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    def pool(self, pool_id: str) -> PoolSpec:
        for p in self.pools:
            if p.id == pool_id:
                return p
        raise KeyError(pool_id)

    def drafter_at(self, pool_id: str, t: float) -> str | None:
        """The drafter a pool runs at simulated time t: its own, or the last drafter change at or before t."""
        name, last = self.pool(pool_id).drafter, -1.0
        for ev in self.events:
            if ev.drafter is not None and pool_id in ev.pool_ids:
                for at in ev.at:
                    if last <= at <= t:
                        name, last = ev.drafter, at
        return name

    def phase_at(self, t: float) -> str | None:
        name = None
        for ph in sorted(self.phases, key=lambda p: p.start):
            if ph.start <= t:
                name = ph.name
        return name


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
              *POOL_DEFAULTS.keys()}
_TOP_KEYS = {"name", "description", "tick", "history_seconds", "defaults", "pools", "events", "phases"}


def _fmt(v: Any) -> str:
    return repr(v) if isinstance(v, str) else str(v)


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a mapping"}.get(type(v), type(v).__name__)


def _mapping(v: Any, path: str) -> dict:
    if not isinstance(v, dict):
        raise ScenarioError(f"{path}: must be a mapping, got {_type_name(v)}")
    for key in v:
        if not isinstance(key, str):
            raise ScenarioError(f"{path}: keys must be strings, got {_fmt(key)}")
    return v


def _keys(d: dict, path: str, allowed: set[str], required: set[str] = frozenset()) -> None:
    for key in d:
        if key not in allowed:
            raise ScenarioError(f"{path}.{key}: unknown key (allowed: {', '.join(sorted(allowed))})")
    for key in sorted(required):
        if key not in d:
            raise ScenarioError(f"{path}.{key}: required field is missing")


def _number(v: Any, path: str, *, lo: float | None = None, hi: float | None = None,
            lo_open: bool = False, integer: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        kind = "an integer" if integer else "a number"
        raise ScenarioError(f"{path}: must be {kind}, got {_type_name(v)} {_fmt(v)}")
    if integer and not (isinstance(v, int) or float(v).is_integer()):
        raise ScenarioError(f"{path}: must be an integer, got {_fmt(v)}")
    if not math.isfinite(v):
        raise ScenarioError(f"{path}: must be finite, got {_fmt(v)}")
    if lo is not None and hi is not None and (v < lo or v > hi or (lo_open and v == lo)):
        raise ScenarioError(f"{path}: must be between {lo:g} and {hi:g}, got {_fmt(v)}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        rel = ">" if lo_open else ">="
        raise ScenarioError(f"{path}: must be {rel} {lo:g}, got {_fmt(v)}")
    if hi is not None and v > hi:
        raise ScenarioError(f"{path}: must be <= {hi:g}, got {_fmt(v)}")
    return int(v) if integer else float(v)


def _string(v: Any, path: str) -> str:
    if not isinstance(v, str) or not v:
        raise ScenarioError(f"{path}: must be a non-empty string, got {_type_name(v)} {_fmt(v)}")
    return v


def _sub(d: dict, key: str, path: str, spec: dict[str, dict]) -> dict[str, float]:
    """A flat mapping of numbers; `spec` maps field -> _number kwargs."""
    m = _mapping(d[key], f"{path}.{key}")
    _keys(m, f"{path}.{key}", set(spec))
    defaults = POOL_DEFAULTS.get(key, {})
    out = {}
    for name, kw in spec.items():
        if name in m:
            out[name] = _number(m[name], f"{path}.{key}.{name}", **kw)
        elif name in defaults:
            out[name] = defaults[name]
        else:
            raise ScenarioError(f"{path}.{key}.{name}: required field is missing")
    return out


def parse_profile(v: Any, path: str, *, lo: float = 0.0) -> Profile:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return Profile.constant(_number(v, path, lo=lo))
    if not isinstance(v, dict):
        raise ScenarioError(f"{path}: must be a number or a mapping with points, got {_type_name(v)}")
    _keys(v, path, {"points", "interp", "period"}, {"points"})
    pts_raw = v["points"]
    if not isinstance(pts_raw, list) or not pts_raw:
        raise ScenarioError(f"{path}.points: must be a non-empty list of [t, value], got {_type_name(pts_raw)}")
    pts: list[tuple[float, float]] = []
    for i, pt in enumerate(pts_raw):
        pp = f"{path}.points[{i}]"
        if not isinstance(pt, list) or len(pt) != 2:
            raise ScenarioError(f"{pp}: must be a pair [t, value], got {_fmt(pt)}")
        t = _number(pt[0], f"{pp}[0]", lo=0.0)
        val = _number(pt[1], f"{pp}[1]", lo=lo)
        if pts and t <= pts[-1][0]:
            raise ScenarioError(f"{pp}[0]: times must increase, got {t:g} after {pts[-1][0]:g}")
        pts.append((t, val))
    interp = v.get("interp", "linear")
    if interp not in ("linear", "step"):
        raise ScenarioError(f"{path}.interp: must be 'linear' or 'step', got {_fmt(interp)}")
    period = None
    if "period" in v:
        period = _number(v["period"], f"{path}.period", lo=0.0, lo_open=True)
    return Profile(points=tuple(pts), interp=interp, period=period)


def solve_iid_a(r: float, k: int) -> float:
    """The i.i.d. a whose draft acceptance rate (a + ... + a^k)/k equals r (bisection; spec-math §2.1)."""
    if r <= 0.0:
        return 0.0
    if r >= 1.0:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        val = sum(mid ** i for i in range(1, k + 1)) / k
        lo, hi = (mid, hi) if val < r else (lo, mid)
    return (lo + hi) / 2


def parse_acceptance(v: Any, path: str, k: int) -> Acceptance:
    m = _mapping(v, path)
    mode = m.get("mode")
    common = {"concurrency", "drafter_max_len", "beyond_max_len_a", "no_draft_prob", "mode"}
    per_mode = {"iid": {"a"}, "decay": {"a0", "decay"}, "list": {"p"}, "rate": {"r"}}
    if "mode" not in m:
        raise ScenarioError(f"{path}.mode: required field is missing (one of iid, decay, list, rate)")
    if mode not in per_mode:
        raise ScenarioError(f"{path}.mode: must be one of iid, decay, list, rate, got {_fmt(mode)}")
    _keys(m, path, common | per_mode[mode], per_mode[mode])
    if mode == "iid":
        p = (_number(m["a"], f"{path}.a", lo=0.0, hi=1.0),) * k
    elif mode == "decay":
        a0 = _number(m["a0"], f"{path}.a0", lo=0.0, hi=1.0)
        dec = _number(m["decay"], f"{path}.decay", lo=0.0, hi=1.0)
        p = tuple(max(0.0, a0 - dec * i) for i in range(k))
    elif mode == "rate":
        p = (solve_iid_a(_number(m["r"], f"{path}.r", lo=0.0, hi=1.0), k),) * k
    else:
        raw = m["p"]
        if not isinstance(raw, list):
            raise ScenarioError(f"{path}.p: must be a list of {k} probabilities, got {_type_name(raw)}")
        if len(raw) != k:
            raise ScenarioError(f"{path}.p: must have k={k} entries (one per draft position), got {len(raw)}")
        p = tuple(_number(x, f"{path}.p[{i}]", lo=0.0, hi=1.0) for i, x in enumerate(raw))
    kw: dict[str, Any] = {"p": p}
    if "concurrency" in m:
        c = _mapping(m["concurrency"], f"{path}.concurrency")
        _keys(c, f"{path}.concurrency", {"above", "slope", "min_scale", "swing", "swing_seconds"}, {"above", "slope"})
        kw["conc_above"] = _number(c["above"], f"{path}.concurrency.above", lo=0, integer=True)
        kw["conc_slope"] = _number(c["slope"], f"{path}.concurrency.slope", lo=0.0)
        kw["conc_min_scale"] = _number(c.get("min_scale", 0.0), f"{path}.concurrency.min_scale", lo=0.0, hi=1.0)
        kw["conc_swing"] = _number(c.get("swing", 0.0), f"{path}.concurrency.swing", lo=0.0, hi=1.0)
        kw["conc_swing_seconds"] = _number(c.get("swing_seconds", 60.0), f"{path}.concurrency.swing_seconds",
                                           lo=0.0, lo_open=True)
    if "drafter_max_len" in m:
        kw["drafter_max_len"] = _number(m["drafter_max_len"], f"{path}.drafter_max_len", lo=1, integer=True)
    if "beyond_max_len_a" in m:
        if "drafter_max_len" not in m:
            raise ScenarioError(f"{path}.beyond_max_len_a: needs drafter_max_len")
        kw["beyond_max_len_a"] = _number(m["beyond_max_len_a"], f"{path}.beyond_max_len_a", lo=0.0, hi=1.0)
    if "no_draft_prob" in m:
        kw["no_draft_prob"] = _number(m["no_draft_prob"], f"{path}.no_draft_prob", lo=0.0, hi=1.0)
    return Acceptance(**kw)


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
    return _string(v, path)


def parse_pool(raw: Any, path: str, defaults: dict) -> PoolSpec:
    m = _mapping(raw, path)
    _keys(m, path, _POOL_KEYS, {"model", "traffic_class", "spec_mode", "concurrency"} - set(defaults))
    m = _deep_merge(_deep_merge(POOL_DEFAULTS, defaults), m)
    model = _string(m["model"], f"{path}.model")
    tclass = _string(m["traffic_class"], f"{path}.traffic_class")
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
        k = _number(m["k"], f"{path}.k", lo=1, hi=MAX_K, integer=True)
        if "acceptance" not in m:
            raise ScenarioError(f"{path}.acceptance: required field is missing")
        acc = parse_acceptance(m["acceptance"], f"{path}.acceptance", k)
    pid = _string(m.get("id", f"{tclass}-{mode}"), f"{path}.id")
    if "/" in pid or "?" in pid or " " in pid:
        raise ScenarioError(f"{path}.id: must not contain '/', '?' or spaces, got {_fmt(pid)}")
    labels = _mapping(m["labels"], f"{path}.labels")
    reserved = {"engine", "model_name", "traffic_class", "spec_mode", "position", "le", "finished_reason"}
    for key, val in labels.items():
        if key in reserved:
            raise ScenarioError(f"{path}.labels.{key}: reserved label name")
        if not key.replace("_", "a").isalnum() or key[0].isdigit():
            raise ScenarioError(f"{path}.labels.{key}: not a valid Prometheus label name")
        _string(val, f"{path}.labels.{key}")
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
        raise ScenarioError(f"{path}.engine: must be one of {', '.join(ENGINES)}, got {_type_name(engine)} "
                            f"{_fmt(engine)}")
    if m["llamacpp_names"] not in ("current", "old"):
        raise ScenarioError(f"{path}.llamacpp_names: must be current or old, got {_fmt(m['llamacpp_names'])}")
    if m["llamacpp_names"] != "current" and engine != "llamacpp":
        raise ScenarioError(f"{path}.llamacpp_names: only for engine: llamacpp")
    if engine != "vllm" and m["engines"] != 1:
        raise ScenarioError(f"{path}.engines: a {engine} server has no engine label: one engine per pool "
                            "(more replicas: more pools)")
    return PoolSpec(
        id=pid, model=model, traffic_class=tclass, spec_mode=mode, k=k, engine=engine,
        llamacpp_names=m["llamacpp_names"],
        engines=_number(m["engines"], f"{path}.engines", lo=1, hi=64, integer=True),
        labels=dict(labels), acceptance=acc,
        concurrency=parse_profile(m["concurrency"], f"{path}.concurrency"),
        waiting=parse_profile(m["waiting"], f"{path}.waiting"),
        step_base=st["base"], step_per_seq=st["per_seq"], eps0=ov["eps0"], eps_slope=ov["slope"],
        jitter_sigma=jt["sigma"], stall_prob=jt["stall_prob"], stall_factor=jt["stall_factor"],
        output_mean=ol["mean"], output_sigma=ol["sigma"], output_max=ol["max"],
        prompt_mean=pl["mean"], prompt_sigma=pl["sigma"], prompt_max=pl["max"],
        ttft_base=tt["base"], ttft_per_prompt_token=tt["per_prompt_token"], ttft_sigma=tt["sigma"],
        ttft_queue_mean=tt["queue_mean"],
        p_abort=fi["abort"], p_error=fi["error"], p_repetition=fi["repetition"],
        kv_capacity_tokens=_number(m["kv_capacity_tokens"], f"{path}.kv_capacity_tokens", lo=1, integer=True),
        preemptions_per_s=_number(m["preemptions_per_s"], f"{path}.preemptions_per_s", lo=0.0),
        per_request=parse_per_request(m["per_request"], f"{path}.per_request", k) if m.get("per_request") else None,
        drafter=_string(m["drafter"], f"{path}.drafter") if mode != "off" and "drafter" in m else None,
    )


def parse_per_request(raw: Any, path: str, k: int) -> PerRequest:
    if k == 0:
        raise ScenarioError(f"{path}: a baseline pool (spec_mode off) has no per-request acceptance")
    m = _mapping(raw, path)
    _keys(m, path, {"classes", "report_share", "report_running"}, {"classes"})
    if not isinstance(m["classes"], list) or not m["classes"]:
        raise ScenarioError(f"{path}.classes: must be a non-empty list")
    classes = []
    for i, c in enumerate(m["classes"]):
        cp = f"{path}.classes[{i}]"
        cm = _mapping(c, cp)
        _keys(cm, cp, {"name", "share", "acceptance", "prompt_len", "context_drift"}, {"name", "share", "acceptance"})
        pl = None
        if "prompt_len" in cm:
            d = _sub(cm, "prompt_len", cp, {"mean": {"lo": 1.0}, "sigma": {"lo": 0.0, "hi": 5.0},
                                            "max": {"lo": 1, "integer": True}})
            pl = (d["mean"], d["sigma"], int(d["max"]))
        drift_from, per_doubling = None, 0.0
        if "context_drift" in cm:
            dm = _mapping(cm["context_drift"], f"{cp}.context_drift")
            _keys(dm, f"{cp}.context_drift", {"from", "per_doubling"}, {"from", "per_doubling"})
            drift_from = int(_number(dm["from"], f"{cp}.context_drift.from", lo=1, integer=True))
            per_doubling = _number(dm["per_doubling"], f"{cp}.context_drift.per_doubling", lo=0.0, hi=1.0)
        classes.append(RequestClass(name=_string(cm["name"], f"{cp}.name"),
                                    share=_number(cm["share"], f"{cp}.share", lo=0.0, lo_open=True),
                                    acceptance=parse_acceptance(cm["acceptance"], f"{cp}.acceptance", k),
                                    prompt_len=pl, drift_from=drift_from, drift_per_doubling=per_doubling))
    if len({c.name for c in classes}) != len(classes):
        raise ScenarioError(f"{path}.classes: class names must be unique")
    share = _number(m.get("report_share", 1.0), f"{path}.report_share", lo=0.0, hi=1.0)
    running = m.get("report_running", False)
    if not isinstance(running, bool):
        raise ScenarioError(f"{path}.report_running: must be true or false, got {_fmt(running)}")
    return PerRequest(classes=tuple(classes), report_share=share, report_running=running)


def _pool_refs(v: Any, path: str, pools: dict[str, PoolSpec]) -> tuple[str, ...]:
    if v == "*":
        return tuple(pools)
    ids = v if isinstance(v, list) else [v]
    out = []
    for i, pid in enumerate(ids):
        pp = path if not isinstance(v, list) else f"{path}[{i}]"
        _string(pid, pp)
        if pid not in pools:
            raise ScenarioError(f"{pp}: unknown pool {_fmt(pid)} (known: {', '.join(pools)})")
        out.append(pid)
    return tuple(out)


def _overrides(m: dict, path: str, pool_ids: tuple[str, ...], pools: dict[str, PoolSpec]
               ) -> tuple[Acceptance | None, Profile | None]:
    acc = conc = None
    if "acceptance" in m:
        ks = {pools[p].k for p in pool_ids}
        if 0 in ks:
            raise ScenarioError(f"{path}.acceptance: cannot set acceptance on a baseline (spec_mode off) pool")
        if len(ks) != 1:
            raise ScenarioError(f"{path}.acceptance: the pools have different k ({sorted(ks)}); use one event per k")
        acc = parse_acceptance(m["acceptance"], f"{path}.acceptance", ks.pop())
    if "concurrency" in m:
        conc = parse_profile(m["concurrency"], f"{path}.concurrency")
    return acc, conc


def parse_event(raw: Any, path: str, pools: dict[str, PoolSpec]) -> Event:
    m = _mapping(raw, path)
    _keys(m, path, {"at", "every", "start", "until", "pool", "restart", "acceptance", "concurrency", "drafter"},
          {"pool"})
    ids = _pool_refs(m["pool"], f"{path}.pool", pools)
    if ("at" in m) == ("every" in m):
        raise ScenarioError(f"{path}.at: give exactly one of 'at' (offset or list of offsets) or 'every'")
    at: tuple[float, ...] = ()
    every = until = None
    start = 0.0
    if "at" in m:
        if "start" in m or "until" in m:
            raise ScenarioError(f"{path}.start: 'start'/'until' go with 'every', not 'at'")
        vals = m["at"] if isinstance(m["at"], list) else [m["at"]]
        at = tuple(sorted(_number(x, f"{path}.at" + (f"[{i}]" if isinstance(m["at"], list) else ""), lo=0.0)
                          for i, x in enumerate(vals)))
    else:
        every = _number(m["every"], f"{path}.every", lo=0.0, lo_open=True)
        start = _number(m.get("start", every), f"{path}.start", lo=0.0)
        if "until" in m:
            until = _number(m["until"], f"{path}.until", lo=0.0)
    restart = m.get("restart", False)
    if not isinstance(restart, bool):
        raise ScenarioError(f"{path}.restart: must be true or false, got {_type_name(restart)} {_fmt(restart)}")
    acc, conc = _overrides(m, path, ids, pools)
    drafter = None
    if "drafter" in m:
        drafter = _string(m["drafter"], f"{path}.drafter")
        if acc is None:
            raise ScenarioError(f"{path}.drafter: a drafter change needs acceptance (the new drafter's)")
    if not restart and acc is None and conc is None:
        raise ScenarioError(f"{path}: an event needs restart: true, acceptance or concurrency")
    if every is not None and (acc is not None or conc is not None or "drafter" in m):
        raise ScenarioError(f"{path}.every: only restarts may repeat; use 'at' for acceptance/concurrency changes")
    return Event(pool_ids=ids, at=at, every=every, start=start, until=until, restart=restart,
                 acceptance=acc, concurrency=conc, drafter=drafter)


def parse_scenario(raw: Any, *, name: str = "scenario") -> Scenario:
    """Validate a scenario mapping (as loaded from YAML) into a :class:`Scenario`."""
    m = _mapping(raw, "scenario")
    for key in m:
        if key not in _TOP_KEYS:
            raise ScenarioError(f"{key}: unknown key (allowed: {', '.join(sorted(_TOP_KEYS))})")
    if "pools" not in m:
        raise ScenarioError("pools: required field is missing")
    nm = _string(m.get("name", name), "name")
    desc = m.get("description", "")
    if not isinstance(desc, str):
        raise ScenarioError(f"description: must be a string, got {_type_name(desc)}")
    tick = _number(m.get("tick", 0.1), "tick", lo=0.001, hi=60.0)
    hist = _number(m.get("history_seconds", 7200.0), "history_seconds", lo=0.0, lo_open=True)
    defaults = _mapping(m.get("defaults", {}), "defaults")
    for key in defaults:
        if key not in _POOL_KEYS - {"id"}:
            raise ScenarioError(f"defaults.{key}: unknown key (allowed: {', '.join(sorted(_POOL_KEYS - {'id'}))})")
    if not isinstance(m["pools"], list) or not m["pools"]:
        raise ScenarioError(f"pools: must be a non-empty list, got {_type_name(m['pools'])}")
    pools: dict[str, PoolSpec] = {}
    label_sets: dict[tuple, str] = {}
    for i, praw in enumerate(m["pools"]):
        pool = parse_pool(praw, f"pools[{i}]", defaults)
        if pool.id in pools:
            raise ScenarioError(f"pools[{i}].id: duplicate pool id {_fmt(pool.id)}")
        ident = (pool.model, pool.traffic_class, pool.spec_mode, tuple(sorted(pool.labels.items())))
        if ident in label_sets:
            raise ScenarioError(f"pools[{i}]: same model_name/traffic_class/spec_mode/labels as pool "
                                f"{_fmt(label_sets[ident])}; the fleet exposition would repeat series "
                                f"(give it distinct labels, e.g. labels: {{instance: ...}})")
        label_sets[ident] = pool.id
        pools[pool.id] = pool
    events: list[Event] = []
    ev_raw = m.get("events", [])
    if not isinstance(ev_raw, list):
        raise ScenarioError(f"events: must be a list, got {_type_name(ev_raw)}")
    for i, eraw in enumerate(ev_raw):
        events.append(parse_event(eraw, f"events[{i}]", pools))
    phases: list[Phase] = []
    ph_raw = m.get("phases", [])
    if not isinstance(ph_raw, list):
        raise ScenarioError(f"phases: must be a list, got {_type_name(ph_raw)}")
    for i, praw in enumerate(ph_raw):
        path = f"phases[{i}]"
        pm = _mapping(praw, path)
        _keys(pm, path, {"name", "start", "set"}, {"name", "start"})
        ph = Phase(name=_string(pm["name"], f"{path}.name"), start=_number(pm["start"], f"{path}.start", lo=0.0))
        phases.append(ph)
        sets = _mapping(pm.get("set", {}), f"{path}.set")
        for sel, ov in sets.items():
            sp = f"{path}.set.{sel}"
            ids = _pool_refs(sel, f"{path}.set", pools)
            om = _mapping(ov, sp)
            _keys(om, sp, {"acceptance", "concurrency"})
            acc, conc = _overrides(om, sp, ids, pools)
            events.append(Event(pool_ids=ids, at=(ph.start,), acceptance=acc, concurrency=conc, phase=ph.name))
    return Scenario(name=nm, description=desc, tick=tick, history_seconds=hist, pools=list(pools.values()),
                    events=events, phases=phases, raw=copy.deepcopy(m))


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
