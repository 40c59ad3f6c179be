"""A scenario's events and phases: which pools they name (ids or "*"), and what changes for them at a
simulated time (acceptance, concurrency, a restart, a drafter or vLLM version)."""

from __future__ import annotations

from typing import Any

from backend.sim import scenario_fields as sf
from backend.sim.scenario_model import Acceptance, Event, PoolSpec, Profile, ScenarioError


def pool_refs(v: Any, path: str, pools: dict[str, PoolSpec]) -> tuple[str, ...]:
    if v == "*":
        return tuple(pools)
    ids = v if isinstance(v, list) else [v]
    out = []
    for i, pid in enumerate(ids):
        pp = path if not isinstance(v, list) else f"{path}[{i}]"
        sf.string(pid, pp)
        if pid not in pools:
            raise ScenarioError(f"{pp}: unknown pool {sf.shown(pid)} (known: {', '.join(pools)})")
        out.append(pid)
    return tuple(out)


def overrides(m: dict, path: str, pool_ids: tuple[str, ...], pools: dict[str, PoolSpec]
               ) -> tuple[Acceptance | None, Profile | None]:
    acc = conc = None
    if "acceptance" in m:
        ks = {pools[p].k for p in pool_ids}
        if 0 in ks:
            raise ScenarioError(f"{path}.acceptance: cannot set acceptance on a baseline (spec_mode off) pool")
        if len(ks) != 1:
            raise ScenarioError(f"{path}.acceptance: the pools have different k ({sorted(ks)}); use one event per k")
        acc = sf.parse_acceptance(m["acceptance"], f"{path}.acceptance", ks.pop())
    if "concurrency" in m:
        conc = sf.parse_profile(m["concurrency"], f"{path}.concurrency")
    return acc, conc


def parse_event(raw: Any, path: str, pools: dict[str, PoolSpec]) -> Event:
    m = sf.mapping(raw, path)
    sf.check_keys(m, path, {"at", "every", "start", "until", "pool", "restart", "acceptance", "concurrency", "drafter",
                   "vllm_version"}, {"pool"})
    ids = pool_refs(m["pool"], f"{path}.pool", pools)
    if ("at" in m) == ("every" in m):
        raise ScenarioError(f"{path}.at: give exactly one of 'at' (offset or list of offsets) or 'every'")
    at: tuple[float, ...] = ()
    every = until = None
    start = 0.0
    if "at" in m:
        if "start" in m or "until" in m:
            raise ScenarioError(f"{path}.start: 'start'/'until' go with 'every', not 'at'")
        vals = m["at"] if isinstance(m["at"], list) else [m["at"]]
        at = tuple(sorted(sf.number(x, f"{path}.at" + (f"[{i}]" if isinstance(m["at"], list) else ""), lo=0.0)
                          for i, x in enumerate(vals)))
    else:
        every = sf.number(m["every"], f"{path}.every", lo=0.0, lo_open=True)
        start = sf.number(m.get("start", every), f"{path}.start", lo=0.0)
        if "until" in m:
            until = sf.number(m["until"], f"{path}.until", lo=0.0)
    restart = m.get("restart", False)
    if not isinstance(restart, bool):
        raise ScenarioError(f"{path}.restart: must be true or false, got {sf.type_name(restart)} {sf.shown(restart)}")
    acc, conc = overrides(m, path, ids, pools)
    drafter = None
    if "drafter" in m:
        drafter = sf.string(m["drafter"], f"{path}.drafter")
        if acc is None:
            raise ScenarioError(f"{path}.drafter: a drafter change needs acceptance (the new drafter's)")
    version = None
    if "vllm_version" in m:
        version = sf.string(m["vllm_version"], f"{path}.vllm_version")
        if not restart:
            raise ScenarioError(f"{path}.vllm_version: a vLLM upgrade restarts the server; add restart: true")
    if not restart and acc is None and conc is None:
        raise ScenarioError(f"{path}: an event needs restart: true, acceptance or concurrency")
    if every is not None and (acc is not None or conc is not None or "drafter" in m or version is not None):
        raise ScenarioError(f"{path}.every: only restarts may repeat; use 'at' for acceptance/concurrency changes")
    return Event(pool_ids=ids, at=at, every=every, start=start, until=until, restart=restart,
                 acceptance=acc, concurrency=conc, drafter=drafter, vllm_version=version)
