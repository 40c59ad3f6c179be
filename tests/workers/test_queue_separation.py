"""A receiver that hangs does not hold up collection: real `specwatch worker` (one Celery worker per queue
group), real beat, Postgres, Redis, the simulator scraped directly, and a Slack-compatible receiver that
takes the alert message and never answers while the test looks.

While the deliver worker waits on that receiver, the collect worker keeps scraping: every stored scrape
interval stays short enough to be split at a bucket boundary (the product's own rule,
scrape.split_lookahead), every pool has a bucket for every minute of the span, and each bucket holds the
simulator's own count for it (within what the scrapes around its two boundaries can resolve). Run as one
process serving every queue (the old default, still available as `--queues collect,compute,deliver,
reports`), the same check finds the span's buckets missing: the check can fail.

Then the supervisor: a collect worker killed (SIGKILL) is started again and collection goes on, and
SIGTERM stops every worker by Celery's warm shutdown (the kill after the stop timeout:
tests/workers/test_supervise.py)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import UTC, datetime
from itertools import pairwise

import psutil
import pytest
from sqlalchemy import text

from backend.cli.demo import scrape_targets
from backend.config import Settings
from backend.db.session import session_scope
from backend.notify.delivery import SecretBox
from backend.services import outbox
from backend.services.scrape import split_lookahead
from backend.sim.server import start_in_thread
from tests.support import sim as simtruth
from tests.support.deadline import deadline
from tests.support.procs import Proc, pid_alive
from tests.support.slack import SlackReceiver
from tests.support.stack import (
    ROOT,
    cursor_end,
    env_for,
    fact_rows,
    factory_for,
    flush_redis,
    start_beat,
    wait_until,
)

pytestmark = pytest.mark.e2e
W = 10  # bucket width (the product's "minute")
SPAN = 3  # buckets checked, all of them while the delivery hangs
GROUPS = ("collect", "compute", "deliver", "reports")


def settings(db_url: str, redis_url: str, sim_url: str, tmp_path) -> dict:
    return {"database_url": db_url, "redis_url": redis_url, "source": "scrape", "bucket_seconds": W,
            "scrape_interval_seconds": 2, "scrape_timeout_seconds": 2, "settle_seconds": 15,
            "scrape_targets": json.dumps(scrape_targets(sim_url)), "data_dir": str(tmp_path),
            "alert_rules_file": "/nonexistent/rules.yaml", "alert_eval_interval_seconds": 5,
            "alert_deliver_interval_seconds": 1, "alert_deliver_max_run_seconds": 3,
            # the sender waits as long as the receiver holds it: the worst a receiver can do
            "alert_http_timeout_seconds": 3600, "digest_enabled": False}


def prepare_channel(db_url: str, receiver: SlackReceiver) -> None:
    factory = factory_for(db_url)
    with session_scope(factory) as s:
        outbox.create_channel(s, name="slack-main", kind="slack", url=receiver.webhook_url, token=None, options={},
                              matchers={}, box=SecretBox(Settings(_env_file=None).secret_key), now=datetime.now(UTC))
    factory.kw["bind"].dispose()


def enqueue_message(db_url: str) -> None:
    from backend.db import alert_repo as repo

    factory = factory_for(db_url)
    now = datetime.now(UTC)
    with session_scope(factory) as s:
        ch = repo.channel_by_name(s, "slack-main")
        repo.enqueue(s, idempotency_key="hang-1", channel_id=ch.id, incident_id=None, kind="firing",
                     payload={"title": "held by the receiver", "model": "m", "at": now.isoformat(), "items": []},
                     status="pending", attempts=0, next_attempt_at=now, created_at=now, in_doubt=False)
    factory.kw["bind"].dispose()


def outbox_statuses(db_url: str) -> list[str]:
    factory = factory_for(db_url)
    try:
        with factory() as s:
            return list(s.execute(text("select status from notify_outbox order by id")).scalars())
    finally:
        factory.kw["bind"].dispose()


def scrape_times(db_url: str) -> dict[str, list[float]]:
    """target URL -> its stored scrape instants, oldest first."""
    factory = factory_for(db_url)
    try:
        with factory() as s:
            rows = s.execute(text("select target, extract(epoch from scraped_at)::float8 from raw_scrapes "
                                  "order by 2")).all()
    finally:
        factory.kw["bind"].dispose()
    out: dict[str, list[float]] = {}
    for target, at in rows:
        out.setdefault(target, []).append(at)
    return out


def around(times: list[float], boundary: float) -> tuple[float, float] | None:
    """The scrapes either side of a bucket boundary."""
    before = [t for t in times if t <= boundary]
    after = [t for t in times if t > boundary]
    return (before[-1], after[0]) if before and after else None


def span_problems(db_url: str, sim_url: str, first: int, end: int, s: Settings) -> tuple[list[str], int]:
    """What is wrong with the stored minutes in [first, end): a scrape interval too long to be split at a
    boundary (its counts go whole to a later minute: lumped), a pool's minute missing, a minute whose count
    is not the simulator's; empty when every minute is its own. And how many counts matched."""
    problems, matched = [], 0
    lookahead = split_lookahead(s)
    rows = fact_rows(db_url, "drafts, generation_tokens")
    times = scrape_times(db_url)
    truth_end = simtruth.truth(sim_url, end)
    truth_at: dict[float, dict] = {}

    def counts(at: float) -> dict:
        if at not in truth_at:
            truth_at[at] = simtruth.truth(sim_url, at)
        return truth_at[at]

    # each target is one pool: its labels name the pool's class and mode (one pool per pair in `steady`)
    key_of = {t["url"]: next(k for k in truth_end if k[1:] == (t["labels"]["traffic_class"], t["labels"]["spec_mode"]))
              for t in scrape_targets(sim_url)}
    for url, key in key_of.items():
        for a, b in pairwise(times.get(url, [])):
            if b > first and a < end and b - a > lookahead:  # an interval reaching into the span
                problems.append(f"{key[1:]}: no scrape from {a - first:+.1f} s to {b - first:+.1f} s "
                                f"(longer than {lookahead:g} s: counted whole in a later minute)")
        for b in range(first, end, W):
            row = rows.get((*key, b))
            if row is None:
                problems.append(f"{key[1:]}: no bucket at {b - first:+d} s")
                continue
            edges = [around(times.get(url, []), b), around(times.get(url, []), b + W)]
            if None in edges:
                problems.append(f"{key[1:]}: no scrape around the bucket at {b - first:+d} s")
                continue
            for field, value in (("drafts", row[0]), ("generation_tokens", row[1])):
                true = simtruth.true_increase(sim_url, b, b + W, field)[key]
                if true is None:
                    continue
                # a boundary between two scrapes is placed in proportion to time: off by at most what
                # the pool counted between them (a tick's worth of slack either side)
                slack = sum(counts(e1 + 0.1)[key]["cumulative_since_start"][field]
                            - counts(e0 - 0.1)[key]["cumulative_since_start"][field] for e0, e1 in edges)
                if value is None or abs(value - true) > slack:
                    problems.append(f"{key[1:]}: bucket at {b - first:+d} s has {field} {value}, the simulator "
                                    f"counted {true} (resolvable to {slack})")
                else:
                    matched += 1
    return problems, matched


def start_workers(env: dict[str, str], log_dir, mode: str) -> Proc:
    args = [sys.executable, "-m", "backend.cli", "worker", "--stop-timeout", str(deadline(120))]
    if mode == "one process":
        args += ["--queues", ",".join(GROUPS)]
    return Proc("worker", args, log_dir / "worker.log", env=env, cwd=ROOT).start()


def group_children(proc: Proc) -> dict[str, int]:
    """group -> pid of the supervisor's Celery worker for it."""
    out = {}
    for child in psutil.Process(proc.pid).children():
        try:
            cmd = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        if "-n" in cmd:
            out[cmd[cmd.index("-n") + 1].split("@")[0]] = child.pid
    return out


@pytest.mark.parametrize("mode", ["groups", "one process"])
def test_a_hanging_receiver_does_not_delay_a_scrape(fresh_db_url, redis_url, tmp_path, mode):
    flush_redis(redis_url)
    with SlackReceiver() as slack, start_in_thread("steady", seed=11) as sim:
        values = settings(fresh_db_url, redis_url, sim.url, tmp_path)
        s = Settings(_env_file=None, **values)
        prepare_channel(fresh_db_url, slack)
        slack.hang_next(n=100, seconds=deadline(1800))  # released at the end of the test
        env = env_for(values)
        worker, beat = start_workers(env, tmp_path, mode), start_beat(env, tmp_path)
        procs = (worker, beat)
        try:
            wait_until(lambda: cursor_end(fresh_db_url, "scrape"), 300, "the first finalised buckets", procs)
            enqueue_message(fresh_db_url)
            wait_until(lambda: slack.requests, 300, "the delivery to reach the receiver", procs,
                       seen=lambda: outbox_statuses(fresh_db_url))
            held_from = slack.requests[0].at
            first = int(held_from // W + 1) * W
            end = first + SPAN * W
            if mode == "groups":
                # the span is finalised while the receiver still holds the delivery
                wait_until(lambda: (cursor_end(fresh_db_url, "scrape") or 0) >= end, 300,
                           "the held span to be finalised", procs, seen=lambda: cursor_end(fresh_db_url, "scrape"))
                assert outbox_statuses(fresh_db_url) == ["sending"] and len(slack.requests) == 1
            else:
                # one process: nothing is scraped while it waits; let the span pass, then let it go
                time.sleep(max(0.0, end + s.settle_seconds - time.time()))
                assert outbox_statuses(fresh_db_url) == ["sending"] and len(slack.requests) == 1
                slack.release()
                wait_until(lambda: (cursor_end(fresh_db_url, "scrape") or 0) >= end, 300,
                           "the span to be finalised after the release", procs,
                           seen=lambda: cursor_end(fresh_db_url, "scrape"))
            problems, matched = span_problems(fresh_db_url, sim.url, first, end, s)
            if mode == "one process":
                assert any("no bucket" in p for p in problems), problems
                assert any("no scrape from" in p for p in problems), problems
                return
            assert problems == []
            assert matched == SPAN * (4 + 2)  # generated tokens of 4 pools, drafts of the 2 speculative ones

            # the supervisor: a collect worker that dies is started again, and collection goes on
            before = group_children(worker)
            assert sorted(before) == sorted(GROUPS)
            os.killpg(before["collect"], signal.SIGKILL)  # a crash: the worker and its pool process
            wait_until(lambda: group_children(worker).get("collect") not in (None, before["collect"]), 300,
                       "the collect worker to be started again", procs, seen=lambda: group_children(worker))
            after = group_children(worker)
            assert {g: p for g, p in after.items() if g != "collect"} == \
                {g: p for g, p in before.items() if g != "collect"}
            again = time.time() + 2 * W
            wait_until(lambda: (cursor_end(fresh_db_url, "scrape") or 0) >= again, 300,
                       "collection by the restarted worker", procs, seen=lambda: cursor_end(fresh_db_url, "scrape"))
            assert outbox_statuses(fresh_db_url) == ["sending"]  # still held all along
            # SIGTERM, once the receiver has answered: every worker stops by Celery's warm shutdown
            slack.release()
            wait_until(lambda: outbox_statuses(fresh_db_url) == ["delivered"], 300, "the held message to be sent",
                       procs, seen=lambda: outbox_statuses(fresh_db_url))
            pids = [child.pid for child in psutil.Process(worker.pid).children(recursive=True)]
            worker.popen.send_signal(signal.SIGTERM)  # as a service manager stops it
            assert worker.popen.wait(deadline(180)) == 0, worker.tail()
            assert "did not stop within" not in worker.log_path.read_text(errors="replace")
            wait_until(lambda: not [p for p in pids if pid_alive(p)], 60, "every worker process to exit",
                       seen=lambda: [p for p in pids if pid_alive(p)])
        finally:
            slack.release()
            beat.stop()
            worker.stop()
