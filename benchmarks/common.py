"""What the benchmarks share: a scratch database per run (created, and dropped at the end unless kept), the
common command-line options, and the p50/p95 of timed samples."""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.support.db import create_database, drop_database, with_db

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def admin(admin_url: str | None) -> str:
    """The server to make scratch databases on: --admin-url, else SPECWATCH_TEST_DATABASE_URL, else local."""
    return admin_url or os.environ.get("SPECWATCH_TEST_DATABASE_URL", DEFAULT_ADMIN_URL)


def scratch_database(admin_url: str | None, prefix: str) -> tuple[str, str, str]:
    """A new empty database for one bench run: (the admin URL, its name, its URL); the caller drops it."""
    server, name = admin(admin_url), f"{prefix}_{uuid.uuid4().hex[:8]}"
    create_database(server, name)
    return server, name, with_db(server, name)


@contextmanager
def scratch(admin_url: str | None, prefix: str, *, keep: bool = False, attach: str | None = None,
            indent: str = "") -> Iterator[str]:
    """The URL of a new empty database (or of `attach`, one an earlier --keep run left), dropped at the end
    unless `keep` or `attach`."""
    server = admin(admin_url)
    name = attach or f"{prefix}_{uuid.uuid4().hex[:8]}"
    if not attach:
        create_database(server, name)
    url = with_db(server, name)
    try:
        yield url
    finally:
        if keep or attach:
            print(f"{indent}kept database {url}")
        else:
            drop_database(server, name)


def parser(doc: str, *, prog: str | None = None, keep: bool = False, **defaults: object) -> argparse.ArgumentParser:
    """A benchmark's option parser: its docstring's first line, --admin-url, `--<name> <default>` for each of
    `defaults` (typed as the default is) and, with `keep`, --keep (keep the scratch database)."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    ap.add_argument("--admin-url")
    for name, default in defaults.items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    if keep:
        ap.add_argument("--keep", action="store_true")
    return ap


def p50_p95(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s), s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """p50 and p95 of `repeats` calls of `fn` after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return p50_p95(samples)
