"""Pieces of a running specwatch for end-to-end tests: the simulator in a thread, settings for the
processes, Celery worker and beat as real child processes, and helpers to read back what was stored."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis
from sqlalchemy import text

from backend.config import Settings
from backend.db.session import make_engine, make_sessionmaker
from tests.support.deadline import deadline
from tests.support.procs import Proc

ROOT = Path(__file__).resolve().parents[2]
SPECWATCH = [sys.executable, "-m", "backend.cli"]


def env_for(settings: dict[str, object]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECWATCH_")}
    for key, value in settings.items():
        env[f"SPECWATCH_{key.upper()}"] = value if isinstance(value, str) else str(value)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def settings_for(values: dict[str, object]) -> Settings:
    return Settings(**values)


def factory_for(url: str):
    return make_sessionmaker(make_engine(url))


def flush_redis(url: str) -> None:
    redis.Redis.from_url(url).flushdb()


def start_worker(env: dict[str, str], log_dir: Path, name: str = "worker") -> Proc:
    args = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--loglevel=INFO",
            "--concurrency=1", "--pool=solo", "--without-gossip", "--without-mingle", "-n", f"{name}@%h"]
    return Proc(name, args, log_dir / f"{name}.log", env=env, cwd=ROOT).start()


def start_beat(env: dict[str, str], log_dir: Path) -> Proc:
    args = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "beat", "--loglevel=INFO",
            "-s", str(log_dir / "celerybeat-schedule")]
    return Proc("beat", args, log_dir / "beat.log", env=env, cwd=ROOT).start()


def wait_until(check: Callable[[], object], timeout: float, what: str, procs: tuple[Proc, ...] = (),
               seen: Callable[[], object] | None = None, every: float = 0.5) -> object:
    """Poll check() until it is truthy and return its value: the wait ends on the event. `timeout` only
    catches a hang (scaled by SPECWATCH_TEST_DEADLINE_SCALE); on one, the error names what was awaited and
    what was seen (seen(), else the last value of check()) and the processes' log tails."""
    timeout = deadline(timeout)
    end = time.monotonic() + timeout
    value: object = None
    while time.monotonic() < end:
        for p in procs:
            if not p.alive():
                raise RuntimeError(f"{p.name} died (exit {p.returncode}) while waiting for {what}:\n{p.tail()}")
        value = check()
        if value:
            return value
        time.sleep(every)
    tails = "\n".join(f"--- {p.name}\n{p.tail()}" for p in procs)
    raw = seen() if seen is not None else value
    observed = repr(raw)
    raise TimeoutError(f"waited {timeout:g}s for {what}; saw {observed[:500]}\n{tails}")


def fact_rows(url: str, columns: str = "drafts, draft_tokens, accepted_tokens, accepted_per_pos, itl_buckets, "
              "itl_sum, itl_count, tpot_buckets, generation_tokens, finished_requests, running_mean, restarts",
              ) -> dict:
    """{(model, class, mode, bucket_start_epoch): (values...)} of everything stored."""
    eng = make_engine(url)
    try:
        with eng.connect() as conn:
            rows = conn.execute(text(
                f"select p.model_name, p.traffic_class, p.spec_mode, extract(epoch from b.bucket_start)::bigint, "
                f"{columns} from pool_buckets b join pools p on p.id = b.pool_id")).all()
    finally:
        eng.dispose()
    return {tuple(r[:4]): tuple(r[4:]) for r in rows}


def cursor_end(url: str, name: str = "prometheus") -> float | None:
    eng = make_engine(url)
    try:
        with eng.connect() as conn:
            v = conn.execute(text("select extract(epoch from last_bucket_end) from collector_cursors "
                                  "where name = :n"), {"n": name}).scalar()
    finally:
        eng.dispose()
    return float(v) if v is not None else None


def close(a: float | None, b: float | None, rel: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)
