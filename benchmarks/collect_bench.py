"""Collection at scale: requests per cycle, cycle wall time and rows/s written, beside a raw COPY.

    python -m benchmarks.collect_bench [--pools 10,1000,10000] [--width 10] [--buckets 3] [--increases raw,increase]
                                       [--workers N] [--repeats 3]

For each fleet size a real Prometheus holds the fleet simulator's own exposition (`backend.sim`, exactly
what its `/metrics` serves) for the window one cycle reads, and one collection cycle,
`backend.services.collect.run_prometheus` as the collect task runs it, reads it into a throwaway database
migrated by alembic.

How the samples get into Prometheus: the fleet is cut into simulator targets of at most 500 pools
(`instance="sim-<i>"`, `job="vllm"`, each target scraped every 5 s at its own phase, as a sharded scrape
would label and space them). Each target's simulator runs on a pinned clock; its exposition is rendered at
every scrape time of the window (3 buckets + one width before) and the samples, with those timestamps,
go through `promtool tsdb create-blocks-from openmetrics` into the data directory before Prometheus
starts. Live scraping cannot do 10,000 pools on 2 cores: the simulator needs 2-3 s of CPU per 1,000 pools
per 10 s of traffic, plus ~1.4 s per 1,000 pools to render one scrape (16 MB), several times real time at
10,000 pools; rendered offline the same work takes minutes, on all cores. The collector's side is the
real one: same PromQL over the same HTTP API to the same Prometheus, which serves persisted blocks rather
than its head block and carries no scrape load of its own while the cycle runs.

Each way to count (`--increases`: raw samples, the default, and/or increase()) runs its cycle on the same
Prometheus, into the emptied tables. `--buckets` sets how many buckets the cycle reads (its initial
lookback): 3 is a live cycle; hundreds is a back-fill.

Printed per fleet and way to count: Prometheus requests in the cycle (flat in N by design), the bytes it
read (on the wire, gzip as Prometheus sends it, and decoded JSON), cycle wall time, the time the
cycle's queries + assembly take re-run apart, rows written, rows/s of the write path (validate + pools +
COPY into staging + merge) into the emptied table, rows/s of a raw binary COPY of the very same rows into
the same (emptied) table (both the best of at least --repeats alternated runs, more for small fleets until
MIN_SECONDS have passed: the machine may be shared), their ratio, and Prometheus' peak RSS.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from backend.cli.serve import migrate
from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.prom.assemble import assemble
from backend.prom.client import PromClient, PromError
from backend.prom.queries import PoolLabels, cycle_queries
from backend.services.collect import _raw_chunk, run_prometheus
from backend.services.collect_chunks import latest_complete_end, plan_chunks
from backend.services.ingest import write_records
from backend.sim.server import Simulator
from benchmarks import common
from tests.support.db import drop_database, libpq
from tests.support.procs import free_port

POOLS = (10, 1000, 10000)
SCRAPE = 5  # seconds between two scrapes of one target
SETTLE = 6  # the cycle's settle_seconds
BUCKETS = 3  # buckets in the cycle (its initial lookback)
TARGET_POOLS = 500  # pools per simulator target
MIN_SECONDS = 3.0  # write path / COPY alternated for at least this long per fleet ...
MAX_RUNS = 50  # ... but at most this many times


def fleet(n: int, lo: int = 0, hi: int | None = None) -> dict:
    """Pools lo..hi-1 of an n-pool fleet (all of them by default): every other pool eagle3 with K=3."""
    pools = []
    for i in range(lo, n if hi is None else hi):
        spec = i % 2 == 0
        p = {"id": f"p{i}", "traffic_class": f"class-{i // 2}", "spec_mode": "eagle3" if spec else "off",
             "concurrency": 8}
        if spec:
            p.update(k=3, acceptance={"mode": "rate", "r": 0.6})
        pools.append(p)
    return {"name": f"fleet-{n}", "tick": 1.0, "defaults": {"model": "bench-model"}, "pools": pools}


# ------------------------------------------------------------------------------------------ history


def _om_family(name: str, kind: str) -> str:
    """OpenMetrics names a counter family without its `_total` (text format 0.0.4 names it with)."""
    return name[: -len("_total")] if kind == "counter" and name.endswith("_total") else name


def _render_target(job: tuple) -> tuple[list[tuple[str, str]], int]:
    """One simulator target: its exposition at every scrape time, as OpenMetrics lines per family (one
    part file per family, each series' samples in time order). Returns [(family, type)], samples."""
    target, n, lo, hi, sim_start, times, parts = job
    now = [sim_start]  # the simulator's pinned clock
    sim = Simulator(fleet(n, lo, hi), seed=1 + target, clock=lambda: now[0], start=sim_start,
                    history_seconds=1e6)  # a far horizon: no state checkpoints are copied on the way
    extra = f'{{instance="sim-{target}",job="vllm",'
    values: dict[str, list[str]] = {}
    family_of: dict[str, str] = {}
    families: list[tuple[str, str]] = []
    for t in times:
        now[0] = t
        family = None
        for line in sim.metrics().decode().splitlines():
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ")
                family = _om_family(name, kind)
                if (family, kind) not in families:
                    families.append((family, kind))
                continue
            if not line or line[0] == "#":
                continue
            key, _, value = line.rpartition(" ")
            vals = values.get(key)
            if vals is None:
                vals = values[key] = []
                family_of[key] = family
            vals.append(value)
    stamps = [f"{t:.3f}" for t in times]
    handles = {f: open(Path(parts) / f"{f.replace(':', '_')}.{target:05d}", "w") for f, _ in families}  # noqa: SIM115
    samples = 0
    try:
        for key, vals in values.items():
            name = key.replace("{", extra, 1)
            handles[family_of[key]].write("".join([f"{name} {v} {t}\n" for v, t in zip(vals, stamps)]))
            samples += len(vals)
    finally:
        for fh in handles.values():
            fh.close()
    return families, samples


def write_history(path: Path, n: int, *, sim_start: float, first: float, last: float, workers: int) -> dict:
    """The n-pool fleet's scrapes in [first, last] as one OpenMetrics file (families contiguous)."""
    parts = path.parent / "parts"
    parts.mkdir()
    jobs = []
    for target, lo in enumerate(range(0, n, TARGET_POOLS)):
        offset = round((target * 1.37) % SCRAPE, 3)  # each target's own scrape phase
        times = [first + offset + j * SCRAPE for j in range(int((last - first - offset) // SCRAPE) + 1)]
        jobs.append((target, n, lo, min(n, lo + TARGET_POOLS), sim_start, times, str(parts)))
    families: list[tuple[str, str]] = []
    samples = 0
    with ProcessPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as ex:
        for fams, count in ex.map(_render_target, jobs):
            samples += count
            families += [f for f in fams if f not in families]
    with open(path, "wb") as out:
        for family, kind in families:
            out.write(f"# TYPE {family} {kind}\n".encode())
            for target in range(len(jobs)):
                part = parts / f"{family.replace(':', '_')}.{target:05d}"
                if part.exists():
                    with open(part, "rb") as fh:
                        shutil.copyfileobj(fh, out, 16 * 2**20)
        out.write(b"# EOF\n")
    shutil.rmtree(parts)
    return {"targets": len(jobs), "samples": samples, "bytes": path.stat().st_size}


# ------------------------------------------------------------------------------------------ Prometheus


def _prometheus(port: int, data: Path) -> subprocess.Popen:
    cfg = data / "prometheus.yml"
    cfg.write_text(json.dumps({"global": {"scrape_interval": f"{SCRAPE}s"}}))  # nothing to scrape: blocks only
    return subprocess.Popen([shutil.which("prometheus"), f"--config.file={cfg}", f"--storage.tsdb.path={data}/tsdb",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=error"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait(client: PromClient, n: int, at: int, timeout: float) -> None:
    """Until Prometheus answers and sees all n pools at `at`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            res = client.query_range("count(vllm:generation_tokens_total)", at, at, 1)
            if res and res[0].points and res[0].points[-1][1] >= n:
                return
        except PromError:  # not up yet: keep waiting until the deadline
            pass
        time.sleep(0.5)
    raise TimeoutError(f"Prometheus never saw {n} pools")


def _peak_rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


# ------------------------------------------------------------------------------------------ Postgres


def _columns(conn: psycopg.Connection) -> tuple[list[str], list[str]]:
    meta = conn.execute("select column_name, udt_name from information_schema.columns where "
                        "table_name = 'pool_buckets' order by ordinal_position").fetchall()
    return [c for c, _ in meta], [t[1:] + "[]" if t.startswith("_") else t for _, t in meta]


def read_rows(url: str) -> list[tuple]:
    """What was written to pool_buckets, every column."""
    with psycopg.connect(libpq(url)) as conn:
        cols, _ = _columns(conn)
        return conn.execute(f"select {', '.join(cols)} from pool_buckets").fetchall()


def copy_rows(url: str, rows: list[tuple]) -> float:
    """Empty the table, binary-COPY `rows` in (one transaction): seconds, without the truncate."""
    with psycopg.connect(libpq(url)) as conn:
        cols, types = _columns(conn)
        conn.execute("truncate pool_buckets")
        conn.commit()
        t0 = time.perf_counter()
        with conn.cursor().copy(f"COPY pool_buckets ({', '.join(cols)}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(types)
            for row in rows:
                cp.write_row(row)
        conn.commit()
        return time.perf_counter() - t0


def _truncate(url: str) -> None:
    with psycopg.connect(libpq(url)) as conn:
        conn.execute("truncate pool_buckets")


def _empty(url: str) -> None:
    """Everything a cycle writes, gone (the next way to count starts from an empty database)."""
    with psycopg.connect(libpq(url)) as conn:
        conn.execute("truncate pool_buckets, pools, collector_cursors, collection_runs, rejections, replicas, "
                     "replica_buckets, histogram_layouts cascade")


# ------------------------------------------------------------------------------------------ one fleet


def bench_one(n: int, width: int, admin: str, workers: int, repeats: int = 3, buckets: int = BUCKETS,
              modes: tuple[str, ...] = ("raw",)) -> list[dict]:
    admin, name, url = common.scratch_database(admin, "specwatch_cbench")
    data = Path(tempfile.mkdtemp(prefix="specwatch-cbench-"))
    prom = None
    try:
        migrate(url)
        # the cycle runs at a pinned `now`: its buckets end at first_end .. last_end
        now_s = time.time()
        last_end = latest_complete_end(now_s, width, SETTLE)
        first_end = last_end - (buckets - 1) * width
        history_first = first_end - width - SCRAPE
        t0 = time.perf_counter()
        om = data / "history.om"
        hist = write_history(om, n, sim_start=history_first - SCRAPE, first=history_first, last=last_end,
                             workers=workers)
        t_gen = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run([shutil.which("promtool"), "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                        str(om), str(data / "tsdb")], check=True, stdout=subprocess.DEVNULL)
        t_blocks = time.perf_counter() - t0
        om.unlink()
        print(f"  history: {n} pools on {hist['targets']} simulator target(s), {hist['samples']:,} samples "
              f"({hist['bytes'] / 2**20:,.0f} MiB OpenMetrics) rendered in {t_gen:.0f} s, blocks in {t_blocks:.0f} s",
              flush=True)
        port = free_port()
        prom = _prometheus(port, data)
        client = PromClient(f"http://127.0.0.1:{port}")
        _wait(client, n, last_end, 180)

        engine = make_engine(url)
        factory = make_sessionmaker(engine)
        now = datetime.fromtimestamp(now_s, UTC)
        out = []
        for mode in modes:
            _empty(url)
            s = Settings(_env_file=None, database_url=url, prometheus_url=client.url, bucket_seconds=width,
                         settle_seconds=SETTLE, initial_lookback_seconds=buckets * width,
                         prometheus_scrape_interval_seconds=SCRAPE, prometheus_increases=mode)
            out.append(_bench_mode(s, client, factory, url, n, now, first_end, last_end, buckets, repeats)
                       | {"pools": n, "targets": hist["targets"], "mode": mode, "prom_mib": _peak_rss_mib(prom.pid)})
        engine.dispose()
        return out
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(30)
        shutil.rmtree(data, ignore_errors=True)
        drop_database(admin, name)


def _bench_mode(s: Settings, client: PromClient, factory, url: str, n: int, now: datetime, first_end: int,
                last_end: int, buckets: int, repeats: int) -> dict:
    width = s.bucket_seconds
    # the cycle as the task runs it
    summary = run_prometheus(factory, client, s, now=now)
    if summary.buckets != buckets or len(summary.pools) != n:
        raise RuntimeError(f"the cycle did not collect {buckets} buckets of {n} pools: {summary.as_dict()}")
    if summary.rejected:
        print(f"  note: {summary.rejected} bucket(s) rejected or flagged by validation", flush=True)
    # the same cycle's phases, timed apart: queries + assembly, then the write path alone (emptied table)
    labels = PoolLabels(s.class_label, s.mode_label, s.extra_matchers)
    decoded = client.bytes_decoded
    t0 = time.perf_counter()
    if s.prometheus_increases == "raw":
        records = {}
        for c_first, c_last in plan_chunks(first_end, last_end, width, math.ceil(summary.buckets / summary.chunks)):
            records.update(_raw_chunk(client, s, labels, c_first, c_last)[0])
    else:
        answers = [(q, client.query_range(q.promql, first_end, last_end, width))
                   for q in cycle_queries(labels, width)]
        records = assemble(answers, width=width, class_label=s.class_label, mode_label=s.mode_label,
                           default_class=s.default_class, default_mode=s.default_mode)
    t_query = time.perf_counter() - t0
    decoded = client.bytes_decoded - decoded
    # write path and raw COPY of the same rows, each into the emptied table, alternated at least
    # `repeats` times and for at least MIN_SECONDS (a 30-row write takes milliseconds: three runs of it
    # on shared cores measure the neighbours, not the code), at most MAX_RUNS
    t_write, t_copy, rows = [], [], None
    began = time.perf_counter()
    while len(t_write) < repeats or (time.perf_counter() - began < MIN_SECONDS and len(t_write) < MAX_RUNS):
        _truncate(url)
        t0 = time.perf_counter()
        with session_scope(factory) as session:
            res = write_records(session, list(records.values()), width=width, source="prometheus", now=now)
        t_write.append(time.perf_counter() - t0)
        rows = rows or read_rows(url)
        t_copy.append(copy_rows(url, rows))
    if not len(rows) == res.rows == summary.rows_written:
        raise RuntimeError(f"rows differ: cycle {summary.rows_written}, write {res.rows}, read back {len(rows)}")
    return {"requests": summary.requests, "chunks": summary.chunks, "wire_mib": summary.bytes_read / 2**20,
            "json_mib": decoded / 2**20, "cycle_s": summary.duration, "query_s": t_query,
            "rows": summary.rows_written, "write_rows_s": res.rows / min(t_write),
            "copy_rows_s": len(rows) / min(t_copy)}


def run(pools: tuple[int, ...] = POOLS, width: int = 10, admin_url: str | None = None,
        workers: int | None = None, repeats: int = 3, buckets: int = BUCKETS,
        modes: tuple[str, ...] = ("raw", "increase")) -> list[dict]:
    admin = common.admin(admin_url)
    workers = workers or os.cpu_count() or 2
    out = []
    head = (f"{'pools':>6} {'targets':>7} {'counts':>8} {'requests':>8} {'chunks':>6} {'wire MiB':>8} "
            f"{'JSON MiB':>8} {'cycle s':>8} {'query s':>8} {'rows':>6} "
            f"{'write rows/s':>12} {'COPY rows/s':>11} {'write/COPY':>10} {'Prom MiB':>8}")
    for n in pools:
        for r in bench_one(n, width, admin, workers, repeats, buckets, modes):
            out.append(r)
            r["line"] = (f"{r['pools']:>6} {r['targets']:>7} {r['mode']:>8} {r['requests']:>8} {r['chunks']:>6} "
                         f"{r['wire_mib']:>8.2f} {r['json_mib']:>8.2f} {r['cycle_s']:>8.2f} {r['query_s']:>8.2f} "
                         f"{r['rows']:>6} {r['write_rows_s']:>12.0f} {r['copy_rows_s']:>11.0f} "
                         f"{r['write_rows_s'] / r['copy_rows_s']:>10.0%} {r['prom_mib']:>8.0f}")
            print(head + "\n" + r["line"], flush=True)
    print(f"\ncollection: one cycle of {buckets} buckets of {width} s per fleet; write path and COPY "
          f"best of {repeats} or more alternated runs ({MIN_SECONDS:.0f} s per fleet, at most {MAX_RUNS}):")
    print(head)
    for r in out:
        print(r["line"])
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", default=",".join(map(str, POOLS)))
    ap.add_argument("--width", type=int, default=10)
    ap.add_argument("--workers", type=int, help="processes rendering the history (default: all cores)")
    ap.add_argument("--repeats", type=int, default=3, help="write path / COPY runs per fleet, at least (the best "
                    "counts; small fleets run more, for MIN_SECONDS)")
    ap.add_argument("--buckets", type=int, default=BUCKETS, help="buckets the cycle reads (hundreds: a back-fill)")
    ap.add_argument("--increases", default="raw,increase", help="ways to count, each on the same Prometheus")
    ap.add_argument("--admin-url")
    a = ap.parse_args(argv)
    run(tuple(int(x) for x in a.pools.split(",")), a.width, a.admin_url, a.workers, a.repeats, a.buckets,
        tuple(a.increases.split(",")))


if __name__ == "__main__":
    main()
