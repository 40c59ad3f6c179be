"""Child processes for tests: start in their own process group with the log captured to a file, wait for
HTTP 200 (deadlines scaled for slow machines), stop with SIGTERM then SIGKILL. The process handling itself
is backend/engines/process.py."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from backend.engines.process import GroupProcess, free_port, http_status
from tests.support.deadline import deadline as scaled

__all__ = ["Proc", "free_port", "kill_hard", "pid_alive", "wait_for_http"]


def wait_for_http(url: str, timeout: float = 120.0, status: int = 200, proc: Proc | None = None) -> None:
    """Poll url until it answers `status`; fail early if proc exits meanwhile. `timeout` only catches a
    hang (scaled by SPECWATCH_TEST_DEADLINE_SCALE)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = http_status(url)
        if last == status:
            return
        if proc is not None and not proc.alive():
            raise RuntimeError(f"{proc.name} exited with {proc.returncode} before {url} answered\n{proc.tail()}")
        time.sleep(0.2)
    tail = f"\n{proc.tail()}" if proc is not None else ""
    raise TimeoutError(f"waited {timeout:g}s for {url} to answer HTTP {status}; last answer: "
                       f"{last if last is not None else 'no connection'}{tail}")


def kill_hard(pid: int) -> None:
    """SIGKILL a process (no clean shutdown), ignoring one that is already gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def pid_alive(pid: int) -> bool:
    """Whether the process is there and not a zombie (which still answers signal 0): Linux's /proc says both."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Proc(GroupProcess):
    """A child process in its own session (process group), stdout+stderr appended to log_path."""

    tail_lines = 30

    def __init__(self, name: str, args: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None,
                 cwd: Path | None = None):
        self.name = name
        self.args = [str(a) for a in args]
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.popen: subprocess.Popen | None = None

    def start(self) -> Proc:
        self.launch(self.args, env=self.env, cwd=self.cwd)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} not started"
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the process group, wait, then SIGKILL whatever is left."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.signal_group(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self.signal_group(signal.SIGKILL)  # leftovers in the group, if any
        try:
            self.popen.wait(5)
        except subprocess.TimeoutExpired:
            pass
        return self.popen.returncode

    def kill(self) -> None:
        """SIGKILL the whole group: a crash, not a shutdown."""
        self.signal_group(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait(5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
