"""Collection at scale: requests per cycle, cycle wall time and rows/s written, beside a raw COPY.

    python -m benchmarks.collect_bench [--pools 10,100,1000] [--width 10]

For each fleet size: the simulator serves N pools, a real Prometheus scrapes it every 5 s, and after three
complete buckets one collection cycle runs against a throwaway database (migrated by alembic). Printed per
fleet: Prometheus requests in the cycle (flat in N by design), cycle wall time, the share spent querying,
rows/s of the write path (validate + upsert), and rows/s of a raw COPY of the very same rows into the same
(emptied) table in the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime

import psycopg

from backend.cli.serve import migrate
from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.prom.assemble import assemble
from backend.prom.client import PromClient, PromError
from backend.prom.queries import PoolLabels, cycle_queries
from backend.services.collect import latest_complete_end, run_prometheus
from backend.services.ingest import write_records
from backend.sim.server import start_in_thread


def fleet(n: int) -> dict:
    pools = []
    for i in range(n):
        spec = i % 2 == 0
        p = {"id": f"p{i}", "traffic_class": f"class-{i // 2}", "spec_mode": "eagle3" if spec else "off",
             "concurrency": 8}
        if spec:
            p.update(k=3, acceptance={"mode": "rate", "r": 0.6})
        pools.append(p)
    return {"name": f"fleet-{n}", "tick": 1.0, "defaults": {"model": "bench-model"}, "pools": pools}


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _prometheus(target: str, port: int, data: str):
    import subprocess

    cfg = os.path.join(data, "prometheus.yml")
    with open(cfg, "w") as fh:
        fh.write('{"global": {"scrape_interval": "5s"}, "scrape_configs": [{"job_name": "vllm", "honor_labels": '
                 f'true, "scrape_timeout": "5s", "static_configs": [{{"targets": ["{target}"]}}]}}]}}')
    return subprocess.Popen([shutil.which("prometheus"), f"--config.file={cfg}", f"--storage.tsdb.path={data}/tsdb",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=error"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait(client: PromClient, n: int, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            now = int(time.time())
            res = client.query_range("count(vllm:generation_tokens_total)", now, now, 1)
            if res and res[0].points and res[0].points[-1][1] >= n:
                return
        except PromError:  # not up yet: keep waiting until the deadline
            time.sleep(1)
            continue
        time.sleep(1)
    raise TimeoutError(f"Prometheus never saw {n} pools")


def copy_rows(url: str) -> tuple[int, float]:
    """Read back what the cycle wrote, empty the table, binary-COPY the same rows in: (rows, seconds)."""
    with psycopg.connect(_libpq(url)) as conn:
        meta = conn.execute("select column_name, udt_name from information_schema.columns where "
                            "table_name = 'pool_buckets' order by ordinal_position").fetchall()
        cols = [c for c, _ in meta]
        types = [t[1:] + "[]" if t.startswith("_") else t for _, t in meta]
        rows = conn.execute(f"select {', '.join(cols)} from pool_buckets").fetchall()
        conn.execute("truncate pool_buckets")
        conn.commit()
        t0 = time.perf_counter()
        with conn.cursor().copy(f"COPY pool_buckets ({', '.join(cols)}) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(types)
            for row in rows:
                cp.write_row(row)
        conn.commit()
        return len(rows), time.perf_counter() - t0


def bench_one(n: int, width: int, admin: str) -> dict:
    name = f"specwatch_cbench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(_libpq(admin), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = admin.rpartition("/")[0] + "/" + name
    data = tempfile.mkdtemp(prefix="specwatch-cbench-")
    sim = start_in_thread(fleet(n), seed=1)
    port = 19090 + n % 1000
    prom = _prometheus(sim.url.split("://", 1)[1], port, data)
    try:
        migrate(url)
        client = PromClient(f"http://127.0.0.1:{port}")
        _wait(client, n, 120)
        time.sleep(3 * width + 6)
        s = Settings(_env_file=None, database_url=url, prometheus_url=client.url, bucket_seconds=width,
                     settle_seconds=6, initial_lookback_seconds=3 * width)
        factory = make_sessionmaker(make_engine(url))
        now = datetime.now(UTC)
        # the cycle as the task runs it
        summary = run_prometheus(factory, client, s, now=now)
        # the same cycle's phases, timed apart: queries + assembly, then the write path alone
        last = latest_complete_end(now.timestamp(), width, s.settle_seconds)
        first = last - 3 * width + width
        t0 = time.perf_counter()
        answers = [(q, client.query_range(q.promql, first, last, width)) for q in cycle_queries(PoolLabels(), width)]
        records = assemble(answers, width=width, class_label="traffic_class", mode_label="spec_mode",
                           default_class="default", default_mode="on")
        t_query = time.perf_counter() - t0
        t0 = time.perf_counter()
        with session_scope(factory) as session:
            res = write_records(session, list(records.values()), width=width, source="prometheus", now=now)
        t_write = time.perf_counter() - t0
        copied, t_copy = copy_rows(url)
        return {"pools": n, "requests": summary.requests, "cycle_s": summary.duration, "rows": res.rows,
                "query_s": t_query, "write_s": t_write, "write_rows_s": res.rows / t_write,
                "copy_rows_s": copied / t_copy}
    finally:
        prom.terminate()
        prom.wait(20)
        sim.stop()
        shutil.rmtree(data, ignore_errors=True)
        with psycopg.connect(_libpq(admin), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run(pools: tuple[int, ...] = (10, 100, 1000), width: int = 10, admin_url: str | None = None) -> list[dict]:
    admin = admin_url or os.environ.get("SPECWATCH_TEST_DATABASE_URL",
                                        "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    out = []
    print(f"{'pools':>6} {'requests':>8} {'cycle s':>8} {'query s':>8} {'rows':>6} {'write rows/s':>13} "
          f"{'COPY rows/s':>12} {'write/COPY':>10}")
    for n in pools:
        r = bench_one(n, width, admin)
        out.append(r)
        print(f"{r['pools']:>6} {r['requests']:>8} {r['cycle_s']:>8.2f} {r['query_s']:>8.2f} {r['rows']:>6} "
              f"{r['write_rows_s']:>13.0f} {r['copy_rows_s']:>12.0f} {r['write_rows_s'] / r['copy_rows_s']:>10.0%}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", default="10,100,1000")
    ap.add_argument("--width", type=int, default=10)
    ap.add_argument("--admin-url")
    a = ap.parse_args()
    run(tuple(int(x) for x in a.pools.split(",")), a.width, a.admin_url)


if __name__ == "__main__":
    main()
