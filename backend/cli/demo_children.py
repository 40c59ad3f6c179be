"""The demo's child processes: each in its own process group with its log in <data dir>/logs/<name>.log;
waiting for one to answer while watching that none has died; stopping them all within one timeout."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import typer

from backend.engines.process import GroupProcess, http_status

STOP_TIMEOUT = 10.0


class ChildDied(Exception):
    def __init__(self, child: Child):
        super().__init__(child.name)
        self.child = child


class Child(GroupProcess):
    tail_lines = 20

    def __init__(self, name: str, args: list[str], log_dir: Path, env: dict[str, str], oneshot: bool = False):
        self.name, self.args, self.env, self.oneshot = name, args, env, oneshot
        self.log_path = log_dir / f"{name}.log"
        self.popen: subprocess.Popen | None = None

    def start(self) -> Child:
        self.launch(self.args, env=self.env, note=f"specwatch demo starts {self.name}")
        return self


def stop_children(children: list[Child], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM every group, wait up to timeout, then SIGKILL what is left (leaders and their children)."""
    for c in reversed(children):
        if c.alive():
            c.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for c in children:
        if c.popen is not None:
            try:
                c.popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                typer.echo(f"  {c.name} did not stop within {timeout:.0f}s: killing it", err=True)
    for c in children:
        c.signal_group(signal.SIGKILL)
        if c.popen is not None:
            try:
                c.popen.wait(5)
            except subprocess.TimeoutExpired:
                pass


def check_children(children: list[Child]) -> None:
    """A service that exits is fatal; a one-shot job (the history seed) may finish, but not fail."""
    for c in children:
        if not c.alive() and not (c.oneshot and c.popen is not None and c.popen.returncode == 0):
            raise ChildDied(c)


def wait_http(url: str, children: list[Child], timeout: float, on_wait=None) -> None:
    deadline = time.monotonic() + timeout
    while http_status(url, timeout=3) != 200:
        check_children(children)
        if on_wait is not None:
            on_wait()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer 200 within {timeout:.0f}s")
        time.sleep(0.3)
