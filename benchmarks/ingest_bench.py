"""Per-request ingest throughput: records/s from a JSON body into Postgres, in batches of 1,000.

Each batch is what POST /api/v1/requests does after authentication: parse the body, validate every record,
check the labels, COPY the rows (new request ids only) and add their sums to the buckets, then commit.
Records: 3 traffic classes x 4 tenants, K = 3, 20-400 verify steps each, finish times over the last hour,
each naming the spec mode of the engine that served it (as a gateway adds it) and its prompt tokens.
Also timed: the same batches posted again (all duplicates: nothing is added). Target: >= 20,000 records/s.
Besides wall time it prints the CPU per record of this process and of its Postgres backend (read from
/proc when Postgres runs on this host): on a shared machine those stay put while the wall time does not.

    python -m benchmarks ingest
"""

from __future__ import annotations

import json
import os
import random
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text

from backend.cli.serve import migrate
from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker, session_scope
from backend.services import request_ingest
from benchmarks import common
from tests.support.db import drop_database

TARGET = 20_000
BATCH = 1_000
BATCHES = 30


def records(n: int, *, now: float, rng: random.Random, prefix: str) -> list[dict]:
    out = []
    for i in range(n):
        k = 3
        steps = rng.randint(20, 400)
        p = rng.choice((0.35, 0.55, 0.75))
        hist = [0] * (k + 1)
        for _ in range(steps):
            j = 0
            while j < k and rng.random() < p:
                j += 1
            hist[j] += 1
        accepted = sum(j * h for j, h in enumerate(hist))
        out.append({"request_id": f"{prefix}-{i}", "model": "bench-model", "spec_mode": "eagle3",
                    "labels": {"traffic_class": rng.choice(("chat", "code", "rag")),
                               "tenant": f"t{rng.randrange(4)}"},
                    "finish_time": now - rng.uniform(60, 3600), "output_tokens": steps + accepted,
                    "prompt_tokens": rng.randint(16, 200_000),
                    "speculative_decoding": {
                        "num_spec_tokens": k, "num_spec_steps": steps, "num_draft_tokens": k * steps,
                        "num_accepted_draft_tokens": accepted, "acceptance_histogram": hist,
                        "mean_acceptance_length": 1 + accepted / steps,
                        "draft_acceptance_rate": accepted / (k * steps)}})
    return out


def server_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of a local Postgres backend, from /proc; None when not readable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(admin_url: str | None = None, batches: int = BATCHES) -> dict:
    admin, name, url = common.scratch_database(admin_url, "specwatch_ibench")
    try:
        migrate(url)
        engine = make_engine(url)
        factory = make_sessionmaker(engine)
        settings = Settings(_env_file=None, database_url=url)
        now = datetime.now(UTC)
        rng = random.Random(29)
        bodies = [json.dumps(records(BATCH, now=now.timestamp(), rng=rng, prefix=f"b{b}")).encode()
                  for b in range(batches)]

        def one_pass() -> tuple[list[float], int]:
            times, stored = [], 0
            cpu[0], cpu[2] = time.process_time(), 0.0
            for body in bodies:
                t0 = time.perf_counter()
                with session_scope(factory) as s:
                    pid = s.execute(text("SELECT pg_backend_pid()")).scalar_one()
                    before = server_cpu(pid)
                    stored += request_ingest.ingest_body(s, body, settings=settings, now=now).stored
                    s.commit()
                    after = server_cpu(pid)
                times.append(time.perf_counter() - t0)
                cpu[2] = None if before is None or after is None or cpu[2] is None else cpu[2] + after - before
            cpu[1] = time.process_time() - cpu[0]
            return times, stored

        cpu: list = [0.0, 0.0, 0.0]
        first, stored = one_pass()
        first_cpu, first_server = cpu[1], cpu[2]
        again, stored_again = one_pass()
        engine.dispose()
    finally:
        drop_database(admin, name)
    n = BATCH * batches
    new_rate = n / sum(first)
    dup_rate = n / sum(again)
    p95 = sorted(first)[int(0.95 * (len(first) - 1))]
    print(f"{'pass':<28}{'records':>9}{'stored':>8}{'records/s':>11}{'batch p95 ms':>14}")
    print(f"{'new records':<28}{n:>9}{stored:>8}{new_rate:>11.0f}{p95 * 1000:>14.1f}")
    print(f"{'same batches again (dupes)':<28}{n:>9}{stored_again:>8}{dup_rate:>11.0f}"
          f"{sorted(again)[int(0.95 * (len(again) - 1))] * 1000:>14.1f}")
    print(f"CPU per new record: {first_cpu / n * 1e6:.1f} us in this process (parse, validate, COPY text), "
          + (f"{first_server / n * 1e6:.1f} us in its Postgres backend (insert, indexes, sums); "
             f"{n / (first_cpu + first_server):.0f} records per CPU-second"
             if first_server is not None else "Postgres's own CPU not readable (not on this host)")
          + f"; load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"target >= {TARGET} records/s for new records: {'met' if new_rate >= TARGET else 'NOT met'}")
    return {"records": n, "new_records_per_s": new_rate, "duplicate_records_per_s": dup_rate, "batch_p95_s": p95,
            "client_cpu_us_per_record": first_cpu / n * 1e6,
            "server_cpu_us_per_record": None if first_server is None else first_server / n * 1e6}


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, prog="python -m benchmarks ingest")
    ap.add_argument("--batches", type=int, default=BATCHES, help=f"batches of 1,000 records (default {BATCHES})")
    a = ap.parse_args(argv)
    run(a.admin_url, batches=a.batches)


if __name__ == "__main__":
    main()
