"""Load: 64 concurrent clients for 30 s on /fleet and /summary against a real API process.

    python -m benchmarks load
    python -m benchmarks.load_bench [--clients 64] [--seconds 30] [--pools 20] [--days 1] [--workers 1]
                                    [--no-cache] [--admin-url URL]

Creates a throwaway database (alembic), fills it with `--days` of 1-minute buckets for `--pools` pools
ending now (benchmarks.api_bench.fill), rolls them up and stores the fleet snapshots (as the beat tasks do),
starts `specwatch api` on a free loopback port (uvicorn, as deployed; access log off; `--workers` API
processes; `--no-cache` turns the response cache off), then runs the clients: each sends its next request
as soon as the last is answered, alternating `GET /api/v1/fleet?window=1h` and
`GET /api/v1/summary?model=model-0&window=6h`, over its own keep-alive connection (a hand-parsed HTTP/1.1
client: it costs a fraction of the API's CPU per request, so the figures are the API's).
Prints per endpoint requests/s, p50 and p99 latency and errors (anything but a 200: a busy 503, a 500, a
transport error or a client timeout of 60 s) against the targets, 0 errors and p99 <= 1 s at 64 clients
(MET / MISSED), and the API's CPU time per request (its processes' user + system time over the run / the
requests answered), which does not depend on what else the machine runs. `run()` is the entry point for
`make bench`."""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime

import httpx

from backend.cli.serve import migrate
from benchmarks import common, peer_storage
from benchmarks.api_bench import fill
from tests.support.db import drop_database

TARGET_P99_SECONDS = 1.0
CALLS = {"fleet window=1h": "/api/v1/fleet?window=1h", "summary window=6h": "/api/v1/summary?model=model-0&window=6h"}


def _snapshots(url: str) -> None:
    from backend.config import Settings
    from backend.db.session import make_engine, make_sessionmaker, session_scope
    from backend.services import fleet

    engine = make_engine(url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            fleet.refresh_snapshots(session, now=datetime.now(UTC), settings=Settings(_env_file=None,
                                                                                       database_url=url), force=True)
    finally:
        engine.dispose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(base: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the API exited ({proc.returncode})")
        try:
            if httpx.get(f"{base}/api/v1/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the API did not answer /health within 60 s")


class _Conn:
    """One keep-alive HTTP/1.1 connection, parsed by hand: the load generator must cost far less per request
    than the server it measures (httpx spends several times the API's own CPU per request)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        try:
            self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
            head = await self.reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            fields = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
            if "content-length" in fields:
                await self.reader.readexactly(int(fields["content-length"]))
            elif fields.get("transfer-encoding", "").lower() == "chunked":
                while size := int((await self.reader.readuntil(b"\r\n")).strip(), 16):
                    await self.reader.readexactly(size + 2)
                await self.reader.readuntil(b"\r\n")
            if fields.get("connection", "").lower() == "close":
                self.close()
            return status
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def _load(base: str, clients: int, seconds: float, timeout: float = 60.0) -> dict[str, dict]:
    stats = {label: {"latencies": [], "errors": 0, "statuses": {}} for label in CALLS}
    labels = list(CALLS)
    host, port = base.removeprefix("http://").split(":")
    stop = time.monotonic() + seconds

    async def client(i: int) -> None:
        conn = _Conn(host, int(port))
        n = i
        while time.monotonic() < stop:
            label = labels[n % len(labels)]
            n += 1
            t0 = time.perf_counter()
            try:
                status = await asyncio.wait_for(conn.get(CALLS[label]), timeout)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError,
                    TimeoutError) as exc:
                status = type(exc).__name__
            s = stats[label]
            s["latencies"].append(time.perf_counter() - t0)
            s["statuses"][status] = s["statuses"].get(status, 0) + 1
            if status != 200:
                s["errors"] += 1
        conn.close()

    await asyncio.gather(*(client(i) for i in range(clients)))
    return stats


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU of a process and its children (uvicorn's workers), from /proc; None elsewhere."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total, found = 0.0, False
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == pid or int(fields[1]) == pid:  # fields[1]: the parent's pid
            total += (int(fields[11]) + int(fields[12])) / tick
            found = True
    return total if found else None


def _quantile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))]


def run(admin_url: str | None = None, *, clients: int = 64, seconds: float = 30.0, pools: int = 20,
        days: int = 1, workers: int = 1, cache: bool = True) -> dict[str, dict]:
    admin, name, url = common.scratch_database(admin_url, "specwatch_load")
    proc = None
    try:
        migrate(url)
        fill(url, pools=pools, days=days, now=datetime.now(UTC).replace(second=0, microsecond=0))
        peer_storage.rollup(url)
        _snapshots(url)  # what the beat task keeps fresh: /fleet?window=1h is served from its snapshot
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPECWATCH_")}
        env |= {"SPECWATCH_DATABASE_URL": url, "SPECWATCH_API_ACCESS_LOG": "false",
                "SPECWATCH_ANONYMOUS_READ": "true",  # the figure is the reads' cost, not a token lookup
                "SPECWATCH_API_WORKERS": str(workers)} | ({} if cache else {"SPECWATCH_API_CACHE_ENTRIES": "0"})
        proc = subprocess.Popen([sys.executable, "-m", "backend.cli", "api", "--host", "127.0.0.1", "--port",
                                 str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        _wait_ready(base, proc)
        for path in CALLS.values():  # warm-up: connections, prepared statements, pool list
            httpx.get(base + path, timeout=60)
        print(f"{clients} clients for {seconds:g} s, {pools} pools x {days} d of 1-minute buckets, {workers} API "
              f"process(es), response cache {'on' if cache else 'off'}; targets: 0 errors, "
              f"p99 <= {TARGET_P99_SECONDS:g} s")
        cpu0 = _cpu_seconds(proc.pid)
        stats = asyncio.run(_load(base, clients, seconds))
        cpu1 = _cpu_seconds(proc.pid)
        for label, s in stats.items():
            lat = sorted(s["latencies"])
            p50, p99 = (statistics.median(lat), _quantile(lat, 0.99)) if lat else (float("nan"),) * 2
            met = s["errors"] == 0 and p99 <= TARGET_P99_SECONDS
            s.update(rps=len(lat) / seconds, p50=p50, p99=p99, met=met)
            other = {k: v for k, v in s["statuses"].items() if k != 200}
            print(f"{label:20s} {s['rps']:7.1f} req/s   p50 {p50 * 1000:7.0f} ms   p99 {p99 * 1000:7.0f} ms   "
                  f"errors {s['errors']:5d} {other if other else ''}  {'MET' if met else 'MISSED'}")
        answered = sum(len(s["latencies"]) for s in stats.values())
        if cpu0 is not None and cpu1 is not None and answered:
            per = (cpu1 - cpu0) / answered
            print(f"API CPU {per * 1000:.2f} ms per request (user + system over the run): ~{1 / per:.0f} req/s "
                  f"per core")
        return stats
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        drop_database(admin, name)


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, clients=64, seconds=30.0, pools=20, days=1)
    ap.add_argument("--workers", type=int, default=1, help="API processes (SPECWATCH_API_WORKERS)")
    ap.add_argument("--no-cache", action="store_true", help="response cache off (SPECWATCH_API_CACHE_ENTRIES=0)")
    a = ap.parse_args(argv)
    run(a.admin_url, clients=a.clients, seconds=a.seconds, pools=a.pools, days=a.days, workers=a.workers,
        cache=not a.no_cache)


if __name__ == "__main__":
    main()
