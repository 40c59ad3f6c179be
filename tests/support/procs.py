"""Child processes for tests: start in their own process group with the log captured to a file, wait for
HTTP 200, stop with SIGTERM then SIGKILL, and find free ports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from tests.support.deadline import deadline as scaled


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The HTTP status of a GET, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return None


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
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0); treat it as dead
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Proc:
    """A child process in its own session (process group), stdout+stderr appended to log_path."""

    def __init__(self, name: str, args: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None,
                 cwd: Path | None = None):
        self.name = name
        self.args = [str(a) for a in args]
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.popen: subprocess.Popen | None = None

    def start(self) -> Proc:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          env=self.env, cwd=self.cwd, start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} not started"
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def signal_group(self, sig: int) -> None:
        if self.popen is None:
            return
        try:
            os.killpg(self.popen.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

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
