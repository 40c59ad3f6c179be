"""`specwatch worker` without --queues: one Celery worker process per queue group, supervised.

Each group (workers.schedule.GROUPS: collect, compute, deliver, reports) gets its own `celery worker`
process, so a receiver that hangs holds only the deliver process and a long snapshot only compute's; the
collect process scrapes on time whatever the others do. Every child runs in a process group of its own
(a Ctrl-C in the terminal reaches the supervisor, which then stops the children in order), writes to the
supervisor's stdout/stderr, and gets SIGTERM if the supervisor itself dies (Linux: PR_SET_PDEATHSIG).

A child that exits is started again after a back-off that doubles from RESTART_MIN to RESTART_MAX seconds
and starts over once a child has run STABLE_AFTER seconds; a child that exits MAX_QUICK_EXITS times in a
row without running that long (a setting it refuses, a broker it cannot reach) makes the supervisor stop
the others and exit 1, so the service manager (systemd, Kubernetes) sees the failure.

SIGTERM / SIGINT: SIGTERM to every child's main process (Celery's warm shutdown: a running task
finishes), SIGKILL to each child's whole group after `stop_timeout` (tasks are acked late, so a killed
task is delivered again); exit 0.

Hand-written, not a process manager package: honcho stops everything when one process exits (no restart),
circus runs a daemon over ZeroMQ, `celery multi` detaches its workers; this is one loop over Popen."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from backend.engines.process import GroupProcess

RESTART_MIN = 1.0
RESTART_MAX = 60.0
STABLE_AFTER = 60.0
MAX_QUICK_EXITS = 5
POLL = 0.2


def worker_args(group: str, queues: Sequence[str], concurrency: int) -> list[str]:
    """The `celery worker` command line of one group: its queues, its own node name (group@host)."""
    return [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--loglevel=INFO",
            f"--concurrency={concurrency}", "-Q", ",".join(queues), "-n", f"{group}@%h"]


try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # Linux
except (OSError, AttributeError):  # elsewhere the supervisor's own SIGTERM handling still stops them
    _PRCTL = None
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: its own session (process group), and SIGTERM when the supervisor dies."""
    os.setsid()
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Child(GroupProcess):
    name: str
    args: list[str]
    popen: subprocess.Popen | None = None
    started: float = 0.0
    quick_exits: int = 0
    restart_at: float | None = None
    restarts: int = 0
    history: list[int] = field(default_factory=list)  # pids, oldest first

    def start(self, env: dict[str, str] | None) -> None:
        self.popen = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, env=env,
                                      preexec_fn=_die_with_parent)  # noqa: PLW1509 (no threads here)
        self.started = time.monotonic()
        self.restart_at = None
        self.history.append(self.popen.pid)



class _Stop(Exception):
    pass


def _raise_stop(signum, frame):
    raise _Stop()


def supervise(children: list[Child], *, stop_timeout: float = 30.0, env: dict[str, str] | None = None,
              echo: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
              restart_min: float = RESTART_MIN, restart_max: float = RESTART_MAX, stable_after: float = STABLE_AFTER,
              max_quick_exits: int = MAX_QUICK_EXITS) -> int:
    """Run the children until SIGTERM/SIGINT (exit 0) or until one keeps exiting (exit 1)."""
    old = {s: signal.signal(s, _raise_stop) for s in (signal.SIGTERM, signal.SIGINT)}
    code = 0
    try:
        for c in children:
            c.start(env)
            echo(f"specwatch worker: started {c.name} (pid {c.popen.pid}): {' '.join(c.args[1:])}")
        while True:
            now = time.monotonic()
            for c in children:
                if c.restart_at is not None:
                    if now >= c.restart_at:
                        c.start(env)
                        c.restarts += 1
                        echo(f"specwatch worker: restarted {c.name} (pid {c.popen.pid})")
                    continue
                rc = c.popen.poll()
                if rc is None:
                    continue
                ran = now - c.started
                c.quick_exits = 0 if ran >= stable_after else c.quick_exits + 1
                if c.quick_exits >= max_quick_exits:
                    echo(f"specwatch worker: {c.name} exited with {rc} {c.quick_exits} times in a row, each "
                         f"within {stable_after:.0f} s of its start: stopping")
                    code = 1
                    raise _Stop()
                wait = min(restart_max, restart_min * 2 ** max(0, c.quick_exits - 1))
                c.restart_at = now + wait
                echo(f"specwatch worker: {c.name} (pid {c.popen.pid}) exited with {rc} after {ran:.0f} s; "
                     f"restarting in {wait:g} s")
            time.sleep(POLL)
    except _Stop:
        pass
    finally:
        for s in old:
            signal.signal(s, signal.SIG_IGN)  # the stop is bounded; a second Ctrl-C does not cut it short
        stop(children, stop_timeout, echo)
        for s, h in old.items():
            signal.signal(s, h)
    return code


def stop(children: list[Child], timeout: float, echo: Callable[[str], None]) -> None:
    """SIGTERM every child (the Celery main process only: it stops taking tasks and waits for its pool to
    finish the running ones; a SIGTERM to the pool processes themselves would cut those short), wait up to
    `timeout`, then SIGKILL every child's whole group."""
    for c in children:
        if c.alive():
            c.popen.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for c in children:
        if c.popen is None:
            continue
        try:
            c.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            echo(f"specwatch worker: {c.name} did not stop within {timeout:g} s: killing it")
    for c in children:
        c.signal_group(signal.SIGKILL)  # leftovers in its group (pool processes), if any
        if c.popen is not None:
            try:
                c.popen.wait(5)
            except subprocess.TimeoutExpired:
                pass
