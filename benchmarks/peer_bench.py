"""Peer benchmark: specwatch against Prometheus itself on the same history (`make bench-peer`).

    python -m benchmarks.peer_bench [--pools 20] [--days 30] [--repeats 5] [--quick] [--tpot] [--keep]
                                    [--workdir DIR [--reuse | --attach DATABASE]]

1. N pools x D days of vLLM history at 15 s (benchmarks.peer_gen: the simulator's scenario model,
   vectorised) as OpenMetrics text -> `promtool tsdb create-blocks-from openmetrics` -> a Prometheus
   data dir; Prometheus 2.42 started on loopback on it (retention 400d, no scraping, no compaction).
2. The same history into specwatch's Postgres through specwatch's own back-fill from that Prometheus
   (`collect.run_prometheus(kind="backfill")`), then the hourly rollups (`rollup.maintain`).
3. specwatch's API started (uvicorn, one process) on that database. Each question (benchmarks.peer_queries)
   timed on both sides over HTTP, alternating, one warm-up then the median of --repeats; answers compared. Storage: bytes per pool-day on both sides.
4. Each side's answers set against the history's own (benchmarks.peer_truth); exit status 1 and a FAIL line
   when specwatch is further from the truth than Prometheus on any question.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import requests

from backend.cli.serve import migrate
from backend.config import Settings
from backend.db import queries
from backend.db.session import make_engine, make_sessionmaker
from backend.prom.client import PromClient
from backend.services.collect import run_prometheus
from benchmarks import common, peer_gen, peer_queries, peer_storage, peer_truth
from tests.support.db import create_database, drop_database, with_db
from tests.support.procs import free_port


def start_prometheus(data: Path, port: int) -> subprocess.Popen:
    cfg = data / "prometheus.yml"
    cfg.write_text('{"global": {"scrape_interval": "15s"}, "scrape_configs": []}')
    proc = subprocess.Popen(
        [shutil.which("prometheus"), f"--config.file={cfg}", f"--storage.tsdb.path={data / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=400d",
         "--storage.tsdb.max-block-duration=2h",  # keeps the imported blocks as they are: no compaction mid-run
         "--query.timeout=10m", "--log.level=error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return _ready(proc, f"http://127.0.0.1:{port}/-/ready", "prometheus", timeout=120)


def _ready(proc: subprocess.Popen, url: str, name: str, *, timeout: float, log: Path | None = None
           ) -> subprocess.Popen:
    """Wait until url answers 200; fail as soon as the process exits (with its log's tail)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return proc
        except requests.RequestException:
            pass
        if proc.poll() is not None:
            tail = f": {log.read_text()[-2000:]}" if log is not None else ""
            raise RuntimeError(f"{name} exited with {proc.returncode}{tail}")
        time.sleep(0.3)
    raise TimeoutError(f"{name} not ready")


def start_api(url: str, port: int, log: Path) -> subprocess.Popen:
    """specwatch's API (uvicorn, one process) on the bench database, without its per-request access log
    (Prometheus keeps no query log by default either; the line costs ~0.2-0.4 ms, 5 % of Q4)."""
    env = os.environ | {"SPECWATCH_DATABASE_URL": url, "SPECWATCH_BUCKET_SECONDS": "60",
                        "SPECWATCH_API_ACCESS_LOG": "false", "SPECWATCH_ANONYMOUS_READ": "true"}
    proc = subprocess.Popen([sys.executable, "-m", "backend.cli", "api", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    return _ready(proc, f"http://127.0.0.1:{port}/api/v1/health", "specwatch api", timeout=60, log=log)


def load(work: Path, n_pools: int, days: float, *, start: int, tpot: bool, reuse: bool = False) -> int:
    """Generate and import the history (or, with reuse, keep the blocks a previous run left in `work`);
    returns the start of the history (unix seconds)."""
    marker = work / "history.json"
    want = {"pools": n_pools, "days": days, "tpot": tpot}
    if reuse and marker.exists() and (work / "tsdb").exists():
        old = json.loads(marker.read_text())
        if {k: old.get(k) for k in want} == want:
            print(f"history: reusing the blocks in {work / 'tsdb'} ({old['samples']:,} samples)")
            return old["start"]
    shutil.rmtree(work / "tsdb", ignore_errors=True)
    t0 = time.perf_counter()
    om = work / "history.om"
    samples = peer_gen.write_openmetrics(om, peer_gen.pools(n_pools), start=start, days=days, tpot=tpot)
    t_gen = time.perf_counter() - t0
    size_om = om.stat().st_size
    t0 = time.perf_counter()
    subprocess.run([shutil.which("promtool"), "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                    f"--max-block-duration={max(2, int(days * 24) + 24)}h", str(om), str(work / "tsdb")],
                   check=True, stdout=subprocess.DEVNULL)
    t_blocks = time.perf_counter() - t0
    om.unlink()
    print(f"history: {n_pools} pools x {days:g} days at 15 s, {samples:,} samples, {size_om / 2**20:,.0f} MiB "
          f"OpenMetrics, generated in {t_gen:.0f} s, blocks in {t_blocks:.0f} s")
    marker.write_text(json.dumps(want | {"samples": samples, "start": start}))
    return start


def timed(fn) -> tuple[float, object]:
    """Wall time of fn() with the bench's own garbage collector out of the way: it is run before, and held
    off during, the call, so neither side is charged for a collection of the other side's decoded answers."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        out = fn()
        return time.perf_counter() - t0, out
    finally:
        gc.enable()


def run(admin_url: str | None = None, *, pools: int = 20, days: float = 30, repeats: int = 5, tpot: bool = False,
        keep: bool = False, workdir: str | None = None, reuse: bool = False, attach: str | None = None) -> dict:
    admin = common.admin(admin_url)
    work = Path(workdir or tempfile.mkdtemp(prefix="specwatch-peer-"))
    work.mkdir(parents=True, exist_ok=True)
    end = int(time.time()) // 3600 * 3600 - 3600
    start = end - int(days * 86400)
    name = attach or f"specwatch_peer_{uuid.uuid4().hex[:8]}"
    url = with_db(admin, name)
    prom = api = None
    try:
        start = load(work, pools, days, start=start, tpot=tpot, reuse=reuse or bool(attach))
        end = start + int(days * 86400)
        port = free_port()
        prom = start_prometheus(work, port)
        prom_url = f"http://127.0.0.1:{port}"
        s = Settings(_env_file=None, database_url=url, prometheus_url=prom_url, bucket_seconds=60)
        factory = make_sessionmaker(make_engine(url))
        if attach:  # the database of an earlier --keep run: bring it to head and roll up what is dirty
            migrate(url)
            t_roll, rolled = timed(lambda: peer_storage.rollup(url))
            print(f"attached to {name}; rollup {rolled} hour rows in {t_roll:.1f} s")
        else:
            create_database(admin, name)
            migrate(url)
            client = PromClient(prom_url, timeout=600)
            t_fill, summary = timed(lambda: run_prometheus(
                factory, client, s, now=datetime.now(UTC), since=datetime.fromtimestamp(start, UTC),
                until=datetime.fromtimestamp(end, UTC), kind="backfill"))
            t_roll, rolled = timed(lambda: peer_storage.rollup(url))
            print(f"specwatch back-fill from Prometheus: {summary.rows_written:,} rows in {summary.chunks} chunks, "
                  f"{summary.requests} requests, {t_fill:.0f} s ({summary.rows_written / t_fill:,.0f} rows/s); "
                  f"rollup {rolled} hour rows in {t_roll:.1f} s")
        api_port = free_port()
        api = start_api(url, api_port, work / "api.log")
        with factory() as session:
            all_pools = queries.list_pools(session)
            models = queries.model_names(session)
        prom_http, api_http = peer_queries.KeepAlive(prom_url), peer_queries.KeepAlive(f"http://127.0.0.1:{api_port}")
        try:
            hist: list = []

            def history() -> list:  # generated once, after the timing, for the truth
                if not hist:
                    hist.extend(peer_truth.history(pools, start=start, days=days))
                return hist

            qs = peer_queries.build(prom=prom_http, api=api_http, factory=factory, settings=s, start=start, end=end,
                                    pools=all_pools, models=models, history=history)
            results = bench(qs, repeats)
            print(peer_queries.summed_buckets_check(prom_http, factory, s, all_pools, start, end))
        finally:
            prom_http.close()
            api_http.close()
        storage = peer_storage.report(url, work / "tsdb", pools=pools, days=days, settings=s)
        return {"results": results, "storage": storage}
    finally:
        for proc in (api, prom):
            if proc is not None:
                proc.terminate()
                proc.wait(30)
        if keep or attach:
            print(f"kept {work} and database {url}")
        else:
            if not reuse:
                shutil.rmtree(work, ignore_errors=True)
            drop_database(admin, name)


def bench(qs: list[peer_queries.Question], repeats: int) -> list[dict]:
    """Time every question on both sides; then set each side's answer against the history's truth and the
    other side's. A row's verdict is FAIL when specwatch is further from the truth than Prometheus."""
    times: dict[str, tuple[list[float], list[float]]] = {q.name: ([], []) for q in qs}
    answers: dict[str, tuple[object, object]] = {}
    for i in range(repeats + 1):  # round 0 is the warm-up
        for q in qs:
            tp, ap = timed(q.prom)
            ts, a_s = timed(q.specwatch)
            if i == 0:
                answers[q.name] = (ap, a_s)
            else:
                times[q.name][0].append(tp)
                times[q.name][1].append(ts)
    out = []
    print(f"\n{'query':5} {'what':46} {'Prometheus':>11} {'specwatch':>10} {'ratio':>8}  answers")
    for q in qs:
        p, s = statistics.median(times[q.name][0]), statistics.median(times[q.name][1])
        check = q.check(*answers[q.name])
        ap, a_s = answers[q.name]
        extra = f" (requests: Prometheus {ap[1]}, specwatch {a_s[1]})" if isinstance(ap, tuple) else ""
        out.append({"query": q.name, "title": q.title, "prometheus_s": p, "specwatch_s": s, "ratio": p / s,
                    "check": check})
        print(f"{q.name:5} {q.title:46} {p * 1000:9.0f}ms {s * 1000:8.1f}ms {p / s:7.1f}x  {check}{extra}")
    print(f"(median of {repeats} after a warm-up, alternating; both sides over HTTP on loopback, one keep-alive "
          "connection each, JSON decoded in Python with orjson; neither side logs each query)")
    print(f"\nagainst the history's truth (acceptance: max |error|; P99: max relative error)\n"
          f"{'query':5} {'specwatch':>26} {'Prometheus':>26} {'specwatch vs Prometheus':>36}  verdict")
    for q, row in zip(qs, out):
        truth = q.truth()
        ap, a_s = answers[q.name]
        e_sw = peer_truth.errors(q.sw_values(a_s), truth)
        e_prom = peer_truth.errors(q.prom_values(ap), truth)
        ok = peer_truth.no_worse(e_sw, e_prom)
        row |= {"specwatch_vs_truth": e_sw.as_dict(), "prometheus_vs_truth": e_prom.as_dict(),
                "truth_verdict": "OK" if ok else "FAIL"}
        mutual = row["check"].removeprefix("OK ").removeprefix("DIFF ")
        print(f"{q.name:5} {e_sw.text():>26} {e_prom.text():>26} {mutual:>36}  {'OK' if ok else 'FAIL'}")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, keep=True, pools=20, days=30.0, repeats=5)
    ap.add_argument("--quick", action="store_true", help="4 pools x 8 days, 5 repeats (a smoke run)")
    ap.add_argument("--tpot", action="store_true", help="also generate the TPOT histogram")
    ap.add_argument("--workdir", help="where the OpenMetrics file and the Prometheus data go")
    ap.add_argument("--reuse", action="store_true", help="reuse the Prometheus blocks of an earlier run in --workdir")
    ap.add_argument("--json", metavar="PATH", help="also write the results (timings, errors against the truth, "
                    "storage) as JSON to PATH")
    ap.add_argument("--attach", metavar="DATABASE", help="with --workdir: time an earlier --keep run's database "
                    "(migrated to head and rolled up) instead of back-filling a new one")
    a = ap.parse_args(argv)
    if (a.reuse or a.attach) and not a.workdir:
        ap.error("--reuse and --attach need --workdir")
    if a.quick:
        a.pools, a.days = 4, 8
    out = run(a.admin_url, pools=a.pools, days=a.days, repeats=a.repeats, tpot=a.tpot, keep=a.keep,
              workdir=a.workdir, reuse=a.reuse, attach=a.attach)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2, default=str))
    failed = [r["query"] for r in out["results"] if r["truth_verdict"] != "OK"]
    if failed:
        print(f"FAIL: specwatch is further from the history's truth than Prometheus on {', '.join(failed)}")
        sys.exit(1)
    print("PASS: specwatch's error against the history's truth is no larger than Prometheus' on every question")


if __name__ == "__main__":
    main()
