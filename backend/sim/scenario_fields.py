"""Checking a scenario's fields: mappings with known keys, numbers within range, strings, and the two
field shapes pools and events share (a profile over time, a per-position acceptance). Every error names
the field's path (``pools[1].acceptance.a: must be between 0 and 1, got 1.3``)."""

from __future__ import annotations

import math
from typing import Any

from backend.sim.scenario_model import Acceptance, Profile, ScenarioError


def shown(v: Any) -> str:
    return repr(v) if isinstance(v, str) else str(v)


def type_name(v: Any) -> str:
    if v is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a mapping"}.get(type(v), type(v).__name__)


def mapping(v: Any, path: str) -> dict:
    if not isinstance(v, dict):
        raise ScenarioError(f"{path}: must be a mapping, got {type_name(v)}")
    for key in v:
        if not isinstance(key, str):
            raise ScenarioError(f"{path}: keys must be strings, got {shown(key)}")
    return v


def check_keys(d: dict, path: str, allowed: set[str], required: set[str] = frozenset()) -> None:
    for key in d:
        if key not in allowed:
            raise ScenarioError(f"{path}.{key}: unknown key (allowed: {', '.join(sorted(allowed))})")
    for key in sorted(required):
        if key not in d:
            raise ScenarioError(f"{path}.{key}: required field is missing")


def number(v: Any, path: str, *, lo: float | None = None, hi: float | None = None,
            lo_open: bool = False, integer: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        kind = "an integer" if integer else "a number"
        raise ScenarioError(f"{path}: must be {kind}, got {type_name(v)} {shown(v)}")
    if integer and not (isinstance(v, int) or float(v).is_integer()):
        raise ScenarioError(f"{path}: must be an integer, got {shown(v)}")
    if not math.isfinite(v):
        raise ScenarioError(f"{path}: must be finite, got {shown(v)}")
    if lo is not None and hi is not None and (v < lo or v > hi or (lo_open and v == lo)):
        raise ScenarioError(f"{path}: must be between {lo:g} and {hi:g}, got {shown(v)}")
    if lo is not None and (v < lo or (lo_open and v == lo)):
        rel = ">" if lo_open else ">="
        raise ScenarioError(f"{path}: must be {rel} {lo:g}, got {shown(v)}")
    if hi is not None and v > hi:
        raise ScenarioError(f"{path}: must be <= {hi:g}, got {shown(v)}")
    return int(v) if integer else float(v)


def string(v: Any, path: str) -> str:
    if not isinstance(v, str) or not v:
        raise ScenarioError(f"{path}: must be a non-empty string, got {type_name(v)} {shown(v)}")
    return v


def parse_profile(v: Any, path: str, *, lo: float = 0.0) -> Profile:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return Profile.constant(number(v, path, lo=lo))
    if not isinstance(v, dict):
        raise ScenarioError(f"{path}: must be a number or a mapping with points, got {type_name(v)}")
    check_keys(v, path, {"points", "interp", "period"}, {"points"})
    pts_raw = v["points"]
    if not isinstance(pts_raw, list) or not pts_raw:
        raise ScenarioError(f"{path}.points: must be a non-empty list of [t, value], got {type_name(pts_raw)}")
    pts: list[tuple[float, float]] = []
    for i, pt in enumerate(pts_raw):
        pp = f"{path}.points[{i}]"
        if not isinstance(pt, list) or len(pt) != 2:
            raise ScenarioError(f"{pp}: must be a pair [t, value], got {shown(pt)}")
        t = number(pt[0], f"{pp}[0]", lo=0.0)
        val = number(pt[1], f"{pp}[1]", lo=lo)
        if pts and t <= pts[-1][0]:
            raise ScenarioError(f"{pp}[0]: times must increase, got {t:g} after {pts[-1][0]:g}")
        pts.append((t, val))
    interp = v.get("interp", "linear")
    if interp not in ("linear", "step"):
        raise ScenarioError(f"{path}.interp: must be 'linear' or 'step', got {shown(interp)}")
    period = None
    if "period" in v:
        period = number(v["period"], f"{path}.period", lo=0.0, lo_open=True)
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
    m = mapping(v, path)
    mode = m.get("mode")
    common = {"concurrency", "drafter_max_len", "beyond_max_len_a", "no_draft_prob", "mode"}
    per_mode = {"iid": {"a"}, "decay": {"a0", "decay"}, "list": {"p"}, "rate": {"r"}}
    if "mode" not in m:
        raise ScenarioError(f"{path}.mode: required field is missing (one of iid, decay, list, rate)")
    if mode not in per_mode:
        raise ScenarioError(f"{path}.mode: must be one of iid, decay, list, rate, got {shown(mode)}")
    check_keys(m, path, common | per_mode[mode], per_mode[mode])
    if mode == "iid":
        p = (number(m["a"], f"{path}.a", lo=0.0, hi=1.0),) * k
    elif mode == "decay":
        a0 = number(m["a0"], f"{path}.a0", lo=0.0, hi=1.0)
        dec = number(m["decay"], f"{path}.decay", lo=0.0, hi=1.0)
        p = tuple(max(0.0, a0 - dec * i) for i in range(k))
    elif mode == "rate":
        p = (solve_iid_a(number(m["r"], f"{path}.r", lo=0.0, hi=1.0), k),) * k
    else:
        raw = m["p"]
        if not isinstance(raw, list):
            raise ScenarioError(f"{path}.p: must be a list of {k} probabilities, got {type_name(raw)}")
        if len(raw) != k:
            raise ScenarioError(f"{path}.p: must have k={k} entries (one per draft position), got {len(raw)}")
        p = tuple(number(x, f"{path}.p[{i}]", lo=0.0, hi=1.0) for i, x in enumerate(raw))
    kw: dict[str, Any] = {"p": p}
    if "concurrency" in m:
        c = mapping(m["concurrency"], f"{path}.concurrency")
        check_keys(c, f"{path}.concurrency", {"above", "slope", "min_scale", "swing", "swing_seconds"}, {"above", "slope"})
        kw["conc_above"] = number(c["above"], f"{path}.concurrency.above", lo=0, integer=True)
        kw["conc_slope"] = number(c["slope"], f"{path}.concurrency.slope", lo=0.0)
        kw["conc_min_scale"] = number(c.get("min_scale", 0.0), f"{path}.concurrency.min_scale", lo=0.0, hi=1.0)
        kw["conc_swing"] = number(c.get("swing", 0.0), f"{path}.concurrency.swing", lo=0.0, hi=1.0)
        kw["conc_swing_seconds"] = number(c.get("swing_seconds", 60.0), f"{path}.concurrency.swing_seconds",
                                           lo=0.0, lo_open=True)
    if "drafter_max_len" in m:
        kw["drafter_max_len"] = number(m["drafter_max_len"], f"{path}.drafter_max_len", lo=1, integer=True)
    if "beyond_max_len_a" in m:
        if "drafter_max_len" not in m:
            raise ScenarioError(f"{path}.beyond_max_len_a: needs drafter_max_len")
        kw["beyond_max_len_a"] = number(m["beyond_max_len_a"], f"{path}.beyond_max_len_a", lo=0.0, hi=1.0)
    if "no_draft_prob" in m:
        kw["no_draft_prob"] = number(m["no_draft_prob"], f"{path}.no_draft_prob", lo=0.0, hi=1.0)
    return Acceptance(**kw)
