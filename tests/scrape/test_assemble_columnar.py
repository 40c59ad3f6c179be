"""The columnar assembler (backend.scrape.assemble) against the pre-columnar one it replaced
(tests/support/assemble_reference.py): the same records, field by field, on random scrape histories with
resets, dips, `_created` changes, gaps and layout changes, on the simulator's expositions, and on a
hand-computed example.

Float sums are compared exactly. The one place the two may differ is the order in which a pool's series
are added up: the reference adds series in global order of first appearance, the columnar code per
target (targets, then each target's series, in order of first appearance). The two orders differ for a
pool (or replica) spread over several targets when a series of target A first appears after target B,
first scraped after A, has shown its series (a layout change mid-window: an engine that joins late, a new
position). There, and only there, a float field (a histogram's _sum, running_mean) may differ in its last
bits: it is compared with math.isclose(rel_tol=1e-12) against the reference, and exactly against the
reference summing in the columnar order (`by_target=True`)."""

from __future__ import annotations

import dataclasses
import functools
import math
import random
from collections import defaultdict

import pytest

import backend.scrape.assemble as columnar
from backend.domain.records import PoolKey
from backend.scrape import bucket_records, increases
from backend.scrape.assemble import REPLICA_FIELDS, PoolNaming, Scrape, replica_of_target
from backend.scrape.layout import LayoutCache
from backend.scrape.parse import SAMPLE_FAMILY, ParsedScrape, parse
from backend.sim.server import Simulator
from tests.support import assemble_reference as reference
from tests.support.assemble_reference import RefScrape

NAMING = PoolNaming("traffic_class", "spec_mode", "default", "on")
WIDTH = 60
BASE = 1_800_000_000  # a bucket boundary
MAX_GAP = 45.0
LLAMA, QWEN = "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct"
POOLS = [(LLAMA, "chat", "eagle3"), (LLAMA, "chat", "off"), (QWEN, "code", "eagle3")]
LES = ("0.005", "0.02", "0.1", "+Inf")
LAYOUTS = LayoutCache(size=1_000_000)  # this file's layouts, decoded once (the histories are cached too)

DRAFTS = "vllm:spec_decode_num_drafts_total"
GEN = "vllm:generation_tokens_total"  # RESTART_SERIES
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
ITL = "vllm:inter_token_latency_seconds"
RUNNING = "vllm:num_requests_running"
assert {DRAFTS, GEN, PER_POS, ITL + "_bucket", ITL + "_sum", ITL + "_count", RUNNING} <= set(SAMPLE_FAMILY)
assert columnar.RESTART_SERIES == GEN


# --- random scrape histories ------------------------------------------------------------------------------

class _Unit:
    """One counter, or one histogram's bucket/_sum/_count series, of one engine: its state and its events."""

    def __init__(self, rng: random.Random, kind: str, name: str, labels: dict, t0: float) -> None:
        self.rng, self.kind, self.name, self.labels = rng, kind, name, labels
        self.created: float | None = None if rng.random() < 0.2 else t0 - rng.uniform(0, 1000)
        self.eventful = rng.random() < 0.4  # the others only grow (the columnar code's fast path)
        self.counts = [0.0] * len(LES)  # histogram: cumulative per le
        self.value = 0.0  # counter value, histogram _sum
        self._grow(big=True)

    def _grow(self, big: bool = False) -> None:
        rng = self.rng
        if self.kind == "counter":
            self.value += rng.choice([0, rng.randint(1, 40), rng.randint(40, 900)]) * (50 if big else 1)
            return
        n = rng.choice([0, rng.randint(1, 20), rng.randint(20, 300)]) * (50 if big else 1)
        for _ in range(min(n, 40)):  # observations, some of them many at once
            times = max(1, n // 40)
            i = rng.randrange(len(LES))
            for j in range(i, len(LES)):
                self.counts[j] += times
            self.value += rng.uniform(0.0005, 0.3) * times  # _sum: not an integer

    def _restart(self) -> None:
        self.value, self.counts = 0.0, [0.0] * len(LES)
        self._grow()

    def step(self, ts: float) -> tuple[list[tuple[str, dict, float]], list[tuple[str, dict, float]] | None]:
        """This scrape's samples and its _created entries (None: none this time)."""
        rng = self.rng
        self._grow()
        if not self.eventful:
            return self._samples(), self._created()
        u = rng.random()
        if u < 0.05:  # restart: a new _created, counts from 0
            self._restart()
            if self.created is not None:
                self.created = ts - rng.uniform(0, 5)
        elif u < 0.10:  # a drop without a _created change
            self._restart()
        elif u < 0.15 and self.created is not None:  # a _created change without a drop
            self.created += rng.uniform(1, 100)
        samples = self._samples()
        if rng.random() < 0.1:  # a dip: one series a little lower (this scrape, or from now on)
            i = rng.randrange(len(samples))
            name, labels, v = samples[i]
            low = v * (1 - rng.choice([rng.uniform(0.0005, 0.08), rng.uniform(0.1, 0.3)]))
            samples[i] = (name, labels, low)
            if rng.random() < 0.3 and self.kind == "counter":
                self.value = low
        return samples, self._created(missing=0.05, nan=0.05)

    def _created(self, missing: float = 0.0, nan: float = 0.0) -> list[tuple[str, dict, float]] | None:
        """The _created entry, sometimes missing from one scrape or NaN in it."""
        if self.created is None or self.rng.random() < missing:
            return None
        return [(_base(self.name), dict(self.labels), math.nan if self.rng.random() < nan else self.created)]

    def _samples(self) -> list[tuple[str, dict, float]]:
        if self.kind == "counter":
            return [(self.name, dict(self.labels), self.value)]
        return ([(self.name + "_bucket", {**self.labels, "le": le}, c) for le, c in zip(LES, self.counts, strict=True)]
                + [(self.name + "_sum", dict(self.labels), self.value),
                   (self.name + "_count", dict(self.labels), self.counts[-1])])


def _base(name: str) -> str:
    return name if name == ITL else name.removesuffix("_total")


def _shuffled(labels: dict, rng: random.Random) -> dict:
    items = list(labels.items())
    rng.shuffle(items)
    return dict(items)


def _target_history(rng: random.Random, target: str, end: float) -> list[tuple[str, float, ParsedScrape]]:
    model, cls, mode = rng.choice(POOLS[:2] if rng.random() < 0.6 else POOLS)
    common = {"model_name": model}
    if rng.random() < 0.7:  # the pool's labels on the series (else the defaults, or the target's labels)
        common.update(traffic_class=cls, spec_mode=mode)
    if rng.random() < 0.3:
        common["instance"] = rng.choice(["pod-a", "pod-b", "pod-c"])
    t = BASE - rng.uniform(0, 60)
    engines = [str(e) for e in range(rng.randint(1, 3))]
    k = rng.randint(1, 3)
    units: dict[tuple, _Unit] = {}

    def unit(key: tuple, kind: str, name: str, labels: dict) -> _Unit:
        if key not in units:
            units[key] = _Unit(rng, kind, name, labels, t)
        return units[key]

    n_scrapes = 0
    # an engine missing from a few scrapes: from the first (it joins late) or from a later one
    away = {e: (rng.choice([0, rng.randrange(40)]), rng.randint(1, 4)) if rng.random() < 0.5 else (-1, 0)
            for e in engines}
    new_position_at = rng.randrange(40) if rng.random() < 0.6 else -1
    hidden = (rng.choice(["drafts", "itl", "gen"]), rng.randrange(40), rng.randint(1, 3))
    out = []
    while t < end:
        samples: list = []
        created: list = []
        for e in engines:
            start, span = away[e]
            if start <= n_scrapes < start + span:
                continue  # the engine is missing from a few scrapes
            labels = {**common, "engine": e}
            positions = k + (1 if 0 <= new_position_at <= n_scrapes else 0)
            parts = [("drafts", unit((e, "drafts"), "counter", DRAFTS, labels)),
                     ("gen", unit((e, "gen"), "counter", GEN, labels)),
                     *((f"pos{p}", unit((e, "pos", p), "counter", PER_POS, {**labels, "position": str(p)}))
                       for p in range(positions)),
                     ("itl", unit((e, "itl"), "histogram", ITL, labels))]
            for part, u in parts:
                s, c = u.step(t)
                if part == hidden[0] and e == engines[0] and hidden[1] <= n_scrapes < hidden[1] + hidden[2]:
                    continue  # one series gone for a scrape or few
                samples += s
                created += c or []
            samples.append((RUNNING, dict(labels), float(rng.randint(0, 32))))
        if rng.random() < 0.2:  # label order differs from scrape to scrape: another layout, the same series
            samples = [(n, _shuffled(lb, rng), v) for n, lb, v in samples]
            created = [(b, _shuffled(lb, rng), v) for b, lb, v in created]
        if rng.random() < 0.05:
            rng.shuffle(samples)
        out.append((target, t, ParsedScrape(samples, created)))
        n_scrapes += 1
        gap = rng.uniform(MAX_GAP + 5, 110) if rng.random() < 0.06 else rng.uniform(10, 20)
        t = round(t + gap, 3)
        if rng.random() < 0.1:  # right on a bucket boundary
            t = float(math.ceil(t / WIDTH) * WIDTH)
    return out


@functools.cache
def random_history(seed: int) -> tuple[list, dict, int, int]:
    """(scrapes as (target, ts, ParsedScrape), target labels overriding class/mode, first, last bucket);
    cached, shared between tests: read only."""
    rng = random.Random(seed)
    targets = [f"http://10.0.0.{i}:8000/metrics" for i in range(rng.randint(1, 4))]
    end = BASE + rng.uniform(300, 480)
    scrapes = [s for target in targets for s in _target_history(rng, target, end)]
    rng.shuffle(scrapes)  # stored rows come in any order
    overrides = {t: {"traffic_class": rng.choice(["chat", "code", "batch"]), "spec_mode": rng.choice(["eagle3", "off"])}
                 for t in targets if rng.random() < 0.6}
    first = BASE + WIDTH * rng.randint(0, 2)
    return scrapes, overrides, first, first + WIDTH * rng.randint(1, 4)


# --- comparing ----------------------------------------------------------------------------------------------

def args(first: int, last: int, *, target_labels: dict | None = None, dip_tolerance: float = 0.1,
         replica_of=None) -> dict:
    """assemble()'s arguments, the same for both implementations."""
    return {"target_labels": target_labels or {}, "width": WIDTH, "first_bucket": first, "last_bucket": last,
            "max_gap": MAX_GAP, "naming": NAMING, "dip_tolerance": dip_tolerance, "replica_of": replica_of}


def both(raw: list, *, layouts: LayoutCache | None = None, by_target: bool = False, **kw) -> tuple[dict, dict]:
    """(columnar, reference) records of the same scrapes; `by_target`: the reference sums in columnar order."""
    layouts = layouts or LAYOUTS
    new = columnar.assemble([Scrape.of(t, ts, p, layouts) for t, ts, p in raw], **kw)
    refs = [RefScrape(t, ts, p.samples, p.created) for t, ts, p in raw]
    return new, reference.assemble(refs, by_target=by_target, **kw)


def same(a, b, *, close: bool = False) -> bool:
    """Equal field by field, NaN equal to NaN; float fields within rel 1e-12 when `close`."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or (close and math.isclose(a, b, rel_tol=1e-12))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], close=close) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y, close=close) for x, y in zip(a, b, strict=True))
    return a == b


def mismatches(new: dict, ref: dict, *, close_for: set = frozenset()) -> list[str]:
    out = []
    if new.keys() != ref.keys():
        out.append(f"keys only in columnar: {sorted(new.keys() - ref.keys())}; "
                   f"only in reference: {sorted(ref.keys() - new.keys())}")
    for key in new.keys() & ref.keys():
        a, b = dataclasses.asdict(new[key]), dataclasses.asdict(ref[key])
        if not same(a, b, close=key[0] in close_for):
            out.append(f"{key}:\n  columnar  {a}\n  reference {b}")
    return out


def order_differs(raw: list, *, target_labels: dict, replica_of=None) -> set:
    """The pools (or (pool, replica)s) whose series the two implementations add up in different orders: the
    reference in global order of first appearance, the columnar code target by target."""
    refs = sorted((RefScrape(t, ts, p.samples, p.created) for t, ts, p in raw), key=lambda s: s.ts)
    order = list(reference._series(refs))
    rank: dict[str, int] = {}
    for sc in refs:
        rank.setdefault(sc.target, len(rank))
    grouped: tuple[dict, dict] = (defaultdict(list), defaultdict(list))
    for g, series in zip(grouped, (order, sorted(order, key=lambda s: rank[s[0]])), strict=True):
        for target, name, lkey in series:
            if replica_of is not None and SAMPLE_FAMILY[name].field not in REPLICA_FIELDS:
                continue
            labels, tl = dict(lkey), target_labels.get(target, {})
            key = PoolKey(labels["model_name"],
                          tl.get(NAMING.class_label) or labels.get(NAMING.class_label) or NAMING.default_class,
                          tl.get(NAMING.mode_label) or labels.get(NAMING.mode_label) or NAMING.default_mode)
            if replica_of is not None:
                key = (key, replica_of(target, labels, tl))
            g[key].append((target, name, lkey))
    return {k for k in grouped[0] if grouped[0][k] != grouped[1][k]}


CONFIGS = {  # dip_tolerance, target labels overriding class/mode, per replica
    "tolerant": (0.1, False, False),
    "strict-target-labels": (0.0, True, False),
    "replicas": (0.1, False, True),
}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("seed", range(60))
def test_random_histories_give_the_reference_records(seed, config):
    dip_tolerance, override, replicas = CONFIGS[config]
    raw, overrides, first, last = random_history(seed)
    replica_of = replica_of_target(lambda u: u) if replicas else None
    target_labels = overrides if override else {}
    kw = args(first, last, target_labels=target_labels, dip_tolerance=dip_tolerance, replica_of=replica_of)
    new, ref = both(raw, **kw)
    assert new, "the history gives records"
    if mismatches(new, ref):
        # bit for bit what the reference gives when it adds series up in the same order
        _, ref_in_columnar_order = both(raw, by_target=True, **kw)
        assert not mismatches(new, ref_in_columnar_order), "\n".join(mismatches(new, ref_in_columnar_order))
        # and but for float rounding what it gives in its own order, where the orders differ
        differs = order_differs(raw, target_labels=target_labels, replica_of=replica_of)
        bad = mismatches(new, ref, close_for=differs)
        assert not bad, "\n".join(bad)


def test_the_random_histories_reach_every_path(monkeypatch):
    """The generator gives both kinds of column (summed at once, and sample by sample through domain.buckets),
    several layouts a target, pools spread over targets with their series in different orders, resets,
    dips, and float sums that only agree to rounding between the two orders."""
    slow = []
    monkeypatch.setattr(increases, "bucket_increases",
                        lambda samples, **kw: slow.append(1) or reference.bucket_increases(samples, **kw))
    columns = fast = layouts_per_target = resets = dips = reordered = inexact = 0
    for seed in range(0, 60, 2):
        raw, _overrides, first, last = random_history(seed)
        kw = args(first, last)
        new, ref = both(raw, **kw)
        rows = sorted((Scrape.of(t, ts, p, LAYOUTS) for t, ts, p in raw), key=lambda s: s.ts)
        for target in {s.target for s in rows}:
            cols = columnar._columns([s for s in rows if s.target == target])
            columns += sum(SAMPLE_FAMILY[n].kind != "gauge" for n, _ in cols.keys)
            layouts_per_target = max(layouts_per_target, len({id(s.layout) for s in rows if s.target == target}))
        resets += sum(r.restarts or 0 for r in new.values())
        dips += sum(sum(r.dips.values()) for r in new.values())
        differs = order_differs(raw, target_labels={})
        reordered += len(differs)
        inexact += len(mismatches(new, ref)) > 0
    fast = columns - len(slow)
    assert 0 < fast < columns and layouts_per_target > 2
    assert resets > 0 and dips > 0 and reordered > 0 and inexact > 0


# --- the simulator ----------------------------------------------------------------------------------------

@functools.cache
def sim_history(scrapes: int = 20) -> tuple[list, list, dict]:
    """The restart scenario's pools scraped every ~15 s on a pinned clock: (per-pool target scrapes, whole
    fleet scrapes, per-pool target labels)."""
    clock = [float(BASE)]
    sim = Simulator("restart", seed=3, clock=lambda: clock[0], tick=2.0, start=BASE - 30.0)
    pools = {"chat-eagle3": ("chat", "eagle3"), "chat-off": ("chat", "off"), "code-eagle3": ("code", "eagle3")}
    rng = random.Random(7)
    per_pool, fleet = [], []
    t = float(BASE) + 3
    for _ in range(scrapes):
        for pid in pools:
            clock[0] = t = t + rng.uniform(0.1, 2)
            per_pool.append((f"http://sim/pools/{pid}/metrics", t, parse(sim.metrics(pid).decode())))
        clock[0] = t = t + rng.uniform(0.1, 2)
        fleet.append(("http://sim/metrics", t, parse(sim.metrics().decode())))
        t += rng.uniform(10, 13)
    labels = {f"http://sim/pools/{pid}/metrics": {"traffic_class": c, "spec_mode": m} for pid, (c, m) in pools.items()}
    return per_pool, fleet, labels


@pytest.mark.parametrize("replicas", [False, True])
@pytest.mark.parametrize("dip_tolerance", [0.0, 0.1])
def test_simulator_expositions_give_the_reference_records_exactly(dip_tolerance, replicas):
    per_pool, fleet, labels = sim_history()
    replica_of = replica_of_target(lambda u: u) if replicas else None
    for raw, target_labels in ((per_pool, labels), (fleet, {})):
        kw = args(BASE + WIDTH, BASE + 4 * WIDTH, target_labels=target_labels, dip_tolerance=dip_tolerance,
                  replica_of=replica_of)
        new, ref = both(raw, **kw)
        assert len(new) >= 4 * 3
        assert not mismatches(new, ref), "\n".join(mismatches(new, ref))
        if not replicas:
            assert sum(r.restarts or 0 for r in new.values()) > 0  # the scenario's restarts are in the window
            assert all(r.itl is not None and r.itl.sum for r in new.values())


# --- a known answer -----------------------------------------------------------------------------------------

def _known_scrapes() -> list:
    """One target, three scrapes: drafts dips (1000, 990, 1030), generation tokens restart (new _created),
    the ITL histogram grows, positions 0 and 1 of which 1 resets without a _created change."""
    lb = {"model_name": LLAMA, "traffic_class": "chat", "spec_mode": "eagle3", "engine": "0"}

    def scrape(ts, drafts, gen, gen_created, itl, pos, running):
        buckets, total, count = itl
        samples = [(DRAFTS, dict(lb), drafts), (GEN, dict(lb), gen),
                   *((PER_POS, {**lb, "position": str(p)}, v) for p, v in enumerate(pos)),
                   *((ITL + "_bucket", {**lb, "le": le}, v) for le, v in zip(("0.01", "+Inf"), buckets, strict=True)),
                   (ITL + "_sum", dict(lb), total), (ITL + "_count", dict(lb), count), (RUNNING, dict(lb), running)]
        created = [("vllm:spec_decode_num_drafts", dict(lb), 5.0), ("vllm:generation_tokens", dict(lb), gen_created)]
        return ("http://a/metrics", ts, ParsedScrape(samples, created))

    return [scrape(BASE + 30, 1000.0, 500.0, 1.0, ((3.0, 4.0), 1.25, 4.0), (100.0, 60.0), 4.0),
            scrape(BASE + 55, 990.0, 40.0, 2.0, ((5.0, 7.0), 1.75, 7.0), (110.0, 7.0), 6.0),
            scrape(BASE + 75, 1030.0, 70.0, 2.0, ((6.0, 9.0), 2.5, 9.0), (130.0, 12.0), 9.0)]


@pytest.mark.parametrize("dip_tolerance", [0.1, 0.0])
def test_known_answer(dip_tolerance):
    kw = args(BASE, BASE + WIDTH, dip_tolerance=dip_tolerance)
    new, ref = both(_known_scrapes(), **kw)
    assert not mismatches(new, ref), "\n".join(mismatches(new, ref))
    pool = PoolKey(LLAMA, "chat", "eagle3")
    assert set(new) == {(pool, BASE), (pool, BASE + WIDTH)}
    first, second = new[(pool, BASE)], new[(pool, BASE + WIDTH)]
    # the interval (BASE+55, BASE+75] straddles BASE+60: a quarter of its increase goes to the first bucket
    if dip_tolerance:  # 1000 -> 990 is a dip (adds 0), then growth from the high: 1030 - 1000 = 30
        assert (first.drafts, first.dips, second.drafts, second.dips) == (7.5, {DRAFTS: 1}, 22.5, {})
    else:  # any drop is a reset: 990 from 0, then 1030 - 990 = 40
        assert (first.drafts, first.dips, second.drafts, second.dips) == (1000.0, {}, 30.0, {})
    # _created 1 -> 2: restarted from 0 (40, inside the first bucket), then 30 split
    assert (first.generation_tokens, first.restarts) == (47.5, 1)
    assert (second.generation_tokens, second.restarts) == (22.5, 0)
    # position 1 drops 60 -> 7 (well past any tolerance): a reset though _created is unchanged (it has none)
    assert (first.accepted_per_pos, second.accepted_per_pos) == ([15.0, 8.25], [15.0, 3.75])
    assert (first.itl.bounds, first.itl.counts, first.itl.sum, first.itl.count) == ((0.01,), [2.25, 3.5], 0.6875, 3.5)
    assert (second.itl.bounds, second.itl.counts, second.itl.sum, second.itl.count) == ((0.01,), [0.75, 1.5], 0.5625, 1.5)
    assert (first.running_mean, second.running_mean) == (5.0, 9.0)
    # the run's totals are the counters' changes, as before the split
    assert first.generation_tokens + second.generation_tokens == 40.0 + 30.0
    assert first.itl.count + second.itl.count == 9.0 - 4.0


@pytest.mark.parametrize("replicas", [False, True])
def test_runs_after_runs_keep_the_records_makeup_only_while_the_targets_are_the_same(replicas):
    """A running worker assembles the same targets minute after minute: what each record is made of is
    kept from the run before while the targets and their plans are the same, and worked out anew when a
    target is missing (its destinations move) or comes back. Each run gives the reference's records."""
    per_pool, _fleet, labels = sim_history()
    replica_of = replica_of_target(lambda u: u) if replicas else None
    targets = sorted({t for t, _ts, _p in per_pool})
    without_first = [x for x in per_pool if x[0] != targets[0]]
    kept = []
    for raw in (per_pool, per_pool, without_first, per_pool):
        kw = args(BASE + WIDTH, BASE + 4 * WIDTH, target_labels=labels, replica_of=replica_of)
        new, ref = both(raw, **kw)
        assert new and not mismatches(new, ref), "\n".join(mismatches(new, ref))
        kept.append(bucket_records._LAST[replicas][1])
    assert kept[1] is kept[0]  # the same targets and plans: kept
    assert kept[2] is not kept[1] and kept[3] is not kept[2]  # a target fewer, then back: anew
    assert len(kept[2].key_of) < len(kept[3].key_of) == len(kept[0].key_of)
