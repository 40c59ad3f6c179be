"""VictoriaMetrics as the query source, end to end: a real single-node `victoria-metrics` (Debian package)
scrapes the simulator every second with a Prometheus-style scrape config, and `specwatch collect --once`
runs against it with the settings docs/architecture.md gives for it (its points limit, its samples limit,
a settle time past its 30 s latency offset), configured through the environment as a user would.

What it shows, on bursty traffic whose run edges are quiet (so the simulator's truth there is what any
scrape shows):
* the stored buckets (the raw-samples path, `counts: exact`) sum, family by family, to the exporter's own
  counter change over the run, to the token;
* VictoriaMetrics' own `increase()` over each bucket equals the stored bucket exactly: MetricsQL's
  increase() does not extrapolate, it takes the last sample before the window as the base, which is the
  rule of the raw path (each increment whole in the bucket of its later sample). Prometheus' increase()
  extrapolates instead (tests/e2e/test_prometheus_exact.py shows it falling short on the same traffic);
* so specwatch's `SPECWATCH_PROMETHEUS_INCREASES=increase` path stores on it the same counts as the raw path;
* why the settle time must exceed the latency offset: a range query (the increase() path) does not compute
  its points of the newest 30 s, it repeats the last point before them (wrong buckets, no error); a raw
  range selector (the raw path) is answered up to the newest sample."""

from __future__ import annotations

import json
import math
import subprocess
import time

import pytest
from sqlalchemy import text

from backend.sim.server import start_in_thread
from tests.support import db as dbsupport
from tests.support import sim as simtruth
from tests.support.deadline import deadline
from tests.support.peers import VictoriaMetricsServer
from tests.support.prometheus import scrape_config
from tests.support.skips import require_binary
from tests.support.stack import ROOT, SPECWATCH, cursor_end, env_for, factory_for, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.peers]
WIDTH = 5
PERIOD, BURST = 15, 6  # a burst of BURST s every PERIOD s (offsets from the simulator's start)
QUIET = 10  # offset (mod PERIOD) of a bucket edge in the quiet part: 4 s after a burst, 5 s before the next
RUN_PERIODS = 2  # the compared run: 2 periods, 6 buckets
MODEL = "m-victoria"
POOLS = {"chat-eagle3": ("chat", "eagle3"), "code-eagle3": ("code", "eagle3"), "chat-off": ("chat", "off")}
SCALARS = ("drafts", "draft_tokens", "accepted_tokens", "generation_tokens", "prompt_tokens", "finished_requests")
HISTS = ("itl", "tpot", "ttft")
# docs/architecture.md, "Scale-out and Prometheus-compatible back ends", the VictoriaMetrics row
DOCUMENTED = {"prometheus_max_points": 30000, "prometheus_max_samples": 1_000_000_000, "settle_seconds": 60}
LATENCY_OFFSET = 30  # VictoriaMetrics' -search.latencyOffset default, left as it is
VM_COUNTERS = {"drafts": "vllm:spec_decode_num_drafts_total", "accepted_tokens":
               "vllm:spec_decode_num_accepted_tokens_total", "generation_tokens": "vllm:generation_tokens_total"}


def scenario() -> dict:
    return simtruth.bursty_fleet(MODEL, period=PERIOD, burst=BURST)


def stored(url: str) -> dict[tuple[str, str, int], dict]:
    cols = (*SCALARS, "accepted_per_pos", *(f"{h}_{p}" for h in HISTS for p in ("buckets", "count")), "source")
    eng = factory_for(url).kw["bind"]
    try:
        with eng.connect() as conn:
            rows = conn.execute(text(
                f"select p.traffic_class, p.spec_mode, extract(epoch from b.bucket_start)::bigint, {', '.join(cols)} "
                "from pool_buckets b join pools p on p.id = b.pool_id where p.model_name = :m"), {"m": MODEL}).all()
    finally:
        eng.dispose()
    return {(r[0], r[1], r[2]): dict(zip(cols, r[3:], strict=True)) for r in rows}


def collect_once(env: dict[str, str]) -> dict:
    done = subprocess.run([*SPECWATCH, "collect", "--once", "--json"], check=False, env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=deadline(300))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


RECENT = f'sum(increase(vllm:generation_tokens_total{{model_name="{MODEL}"}}[{WIDTH}s]))'


def series_points(result: list[dict]) -> dict[float, float]:
    """{time: value} of a one-series range answer."""
    return {float(t): float(v) for r in result for t, v in r["values"]}


def vm_increase_per_bucket(vm: VictoriaMetricsServer, metric: str, first_end: int, last_end: int,
                           ) -> dict[tuple[str, str, int], float]:
    """{(class, mode, bucket start): VictoriaMetrics' increase() over the bucket}, one range query."""
    body = vm.query_range(f'sum by (traffic_class, spec_mode) (increase({metric}{{model_name="{MODEL}"}}[{WIDTH}s]))',
                          first_end, last_end, WIDTH)
    return {(r["metric"]["traffic_class"], r["metric"]["spec_mode"], int(float(t)) - WIDTH): float(v)
            for r in body for t, v in r["values"]}


@pytest.fixture
def second_db_url(pg_admin_url: str, pg_template: str):
    """Another migrated database: the same run collected with SPECWATCH_PROMETHEUS_INCREASES=increase."""
    name, url = dbsupport.clone(pg_admin_url, pg_template)
    yield url
    dbsupport.drop_database(pg_admin_url, name)


def test_victoriametrics_source_stores_exact_buckets_equal_to_its_own_increase(fresh_db_url, second_db_url, tmp_path):
    binary = require_binary("victoria-metrics")
    start = math.floor(time.time() / PERIOD) * PERIOD  # bucket edges fall on offsets that are multiples of 5
    sim = start_in_thread(scenario(), seed=5, start=start)
    vm = VictoriaMetricsServer(scrape_config([{"target": sim.url, "metrics_path": "/metrics"}], "1s"), binary,
                               data_dir=tmp_path / "vm")
    env = env_for({"database_url": fresh_db_url, "source": "prometheus", "bucket_seconds": WIDTH,
                   "prometheus_scrape_interval_seconds": 1, "initial_lookback_seconds": 300,
                   "replica_bucket_seconds": 0, **DOCUMENTED})
    try:
        vm.start()
        env["SPECWATCH_PROMETHEUS_URL"] = vm.url
        # a raw range selector answers with the samples as soon as they are ingested
        wait_until(lambda: len(vm.query("vllm:generation_tokens_total[5s]")) >= 4, 120,
                   "VictoriaMetrics to hold the simulator's samples", seen=vm.targets)
        first_edge = start + QUIET + PERIOD * math.ceil((time.time() + 1 - start - QUIET) / PERIOD)
        last_edge = first_edge + RUN_PERIODS * PERIOD
        # 6 s past the run's end: the last point before the latency offset's cut is the run's second bucket
        wait_until(lambda: time.time() >= last_edge + 6, 300, "the run's last edge")

        # the latency offset: a range query does not compute its points of the newest 30 s from their data,
        # it repeats the last point before them, so a bucket asked for that soon after its end would be
        # stored wrong, silently (hence settle_seconds >= 60); a raw range selector (what the raw path asks)
        # is answered up to the newest sample
        asked = time.time()
        early = series_points(vm.query_range(RECENT, last_edge - 8 * WIDTH, last_edge, WIDTH))
        raw = vm.query(f'vllm:generation_tokens_total{{model_name="{MODEL}"}}[{2 * WIDTH}s]', at=asked)
        answered = time.time()

        # a first cycle now: the run's buckets are not settled yet, so it stops short of them
        collect_once(env)
        mid = cursor_end(fresh_db_url)
        assert mid is None or mid < last_edge, (mid, last_edge)

        def caught_up() -> bool:
            if time.time() < last_edge + DOCUMENTED["settle_seconds"]:
                return False
            collect_once(env)
            return (cursor_end(fresh_db_url) or 0) >= last_edge

        wait_until(caught_up, 300, "the collector to store the run's last bucket", every=2,
                   seen=lambda: (cursor_end(fresh_db_url), last_edge))
        # the same buckets through specwatch's increase() path (for back ends without raw samples)
        collect_once({**env, "SPECWATCH_DATABASE_URL": second_db_url, "SPECWATCH_PROMETHEUS_INCREASES": "increase"})
        truth_a, truth_b = simtruth.truth(sim.url, first_edge), simtruth.truth(sim.url, last_edge)
        quiet = [simtruth.truth(sim.url, t) for edge in (first_edge, last_edge) for t in (edge - 2, edge + 1)]
        settled = series_points(vm.query_range(RECENT, last_edge - 8 * WIDTH, last_edge, WIDTH))
        theirs = {field: vm_increase_per_bucket(vm, metric, first_edge + WIDTH, last_edge)
                  for field, metric in VM_COUNTERS.items()}
        whole = {r["metric"]["traffic_class"] + "/" + r["metric"]["spec_mode"]: float(r["value"][1]) for r in vm.query(
            f'sum by (traffic_class, spec_mode) (increase(vllm:generation_tokens_total{{model_name="{MODEL}"}}'
            f'[{last_edge - first_edge}s]))', at=last_edge)}
    finally:
        vm.stop()
        sim.stop()

    rows = stored(fresh_db_url)
    assert {r["source"] for r in rows.values()} == {"prometheus"}
    in_run = {k: v for k, v in rows.items() if first_edge <= k[2] < last_edge}
    # the latency offset, seen from the early range query (its server clock was between asked and answered)
    assert max(t for r in raw for t, _ in r["values"]) > last_edge  # raw samples: up to the newest
    if answered - asked < WIDTH:  # at most one point falls between the two clocks' cuts
        copies = {t: v for t, v in early.items() if t > answered - LATENCY_OFFSET}
        bases = {v for t, v in early.items() if t <= asked - LATENCY_OFFSET
                 and t == max(u for u in early if u <= asked - LATENCY_OFFSET)}
        bases |= {v for t, v in early.items() if asked - LATENCY_OFFSET < t <= answered - LATENCY_OFFSET}
        assert len(copies) >= 4 and len(set(copies.values())) == 1 and set(copies.values()) <= bases, (early, asked)
        assert any(settled[t] != v for t, v in copies.items()), (copies, settled)
    # settled, each point is the stored buckets' sum
    for t, v in settled.items():
        if first_edge < t <= last_edge:
            assert v == sum(r["generation_tokens"] for k, r in in_run.items() if k[2] == t - WIDTH), (t, v)
    # specwatch's increase() path on VictoriaMetrics stores the same counts as the raw path, bucket by bucket
    by_increase = {k: v for k, v in stored(second_db_url).items() if first_edge <= k[2] < last_edge}
    assert {r["source"] for r in by_increase.values()} == {"prom-increase"}
    assert sorted(by_increase) == sorted(in_run)
    for k, v in in_run.items():
        for field in (*SCALARS, "accepted_per_pos", *(f"{h}_buckets" for h in HISTS)):
            assert by_increase[k][field] == v[field], (k, field, by_increase[k][field], v[field])
    for pool_id, (klass, mode) in POOLS.items():
        key = (MODEL, klass, mode)
        a, b = truth_a[key]["cumulative_since_start"], truth_b[key]["cumulative_since_start"]
        assert [q[key]["cumulative_since_start"] for q in quiet] == [a, a, b, b], \
            f"{pool_id}: the exporter was not quiet around a run edge"
        mine = [v for k, v in sorted(in_run.items()) if k[:2] == (klass, mode)]
        assert len(mine) == RUN_PERIODS * PERIOD // WIDTH, (pool_id, len(mine))
        for field in SCALARS:
            want = None if a[field] is None else b[field] - a[field]
            got = None if all(v[field] is None for v in mine) else sum(v[field] or 0.0 for v in mine)
            assert got == want, (pool_id, field, got, want)
        if a["accepted_per_pos"] is not None:
            got_pos = [sum(col) for col in zip(*(v["accepted_per_pos"] for v in mine), strict=True)]
            assert got_pos == [y - x for x, y in zip(a["accepted_per_pos"], b["accepted_per_pos"], strict=True)]
        for h in HISTS:
            got_b = [sum(col) for col in zip(*(v[f"{h}_buckets"] for v in mine), strict=True)]
            assert got_b == [y - x for x, y in zip(a[h]["buckets"], b[h]["buckets"], strict=True)], (pool_id, h)
            assert sum(v[f"{h}_count"] for v in mine) == b[h]["count"] - a[h]["count"], (pool_id, h)
        # VictoriaMetrics' increase(), bucket by bucket: the stored bucket, exactly (no extrapolation)
        for field in VM_COUNTERS:
            if a[field] is None:
                continue
            ours = {k[2]: v[field] for k, v in in_run.items() if k[:2] == (klass, mode)}
            vms = {k[2]: v for k, v in theirs[field].items() if k[:2] == (klass, mode) and k[2] in ours}
            assert vms == ours, (pool_id, field, vms, ours)
        # and over the whole run, the exporter's change
        assert whole[f"{klass}/{mode}"] == b["generation_tokens"] - a["generation_tokens"], pool_id


def test_the_deployed_scrape_config_loads_in_victoriametrics(tmp_path):
    """deploy/prometheus.yml as VictoriaMetrics' -promscrape.config (docs/architecture.md): it refuses the
    Prometheus-only `evaluation_interval` unless told to ignore unknown fields."""
    binary = require_binary("victoria-metrics")
    config = f"-promscrape.config={ROOT / 'deploy/prometheus.yml'}"

    def check(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([binary, config, *flags, "-dryRun"], check=False, cwd=tmp_path, capture_output=True,
                              text=True, timeout=deadline(120))

    strict = check()
    assert strict.returncode != 0 and "evaluation_interval" in strict.stderr, strict.stderr[-1000:]
    lenient = check("-promscrape.config.strictParse=false")
    assert lenient.returncode == 0 and "-promscrape.config is ok" in lenient.stderr, lenient.stderr[-1000:]
