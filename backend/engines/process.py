"""Child processes in a process group of their own: start with the output appended to a log file, wait for an
HTTP endpoint to answer, read the log's last lines, stop the whole group (SIGTERM, then SIGKILL).

Shared by the engine servers (llama_server, vllm_cpu), `specwatch demo` and `specwatch supervise`, and the
tests' child processes. A group of its own because an engine or a worker starts children of its own (vLLM's
engine core and workers, Celery's pool): signalling the group reaches them all. Standard library only."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path


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


def post_json(url: str, body: dict, timeout: float = 120.0) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def _answers(kill, ident: int) -> bool:
    """Whether signal 0 reaches the process (os.kill) or group (os.killpg); one of another user's counts."""
    try:
        kill(ident, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    return _answers(os.killpg, pgid)


def pid_alive(pid: int) -> bool:
    """Whether the process is there and not a zombie (a zombie still answers signal 0)."""
    if not _answers(os.kill, pid):
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class GroupProcess:
    """A child in its own session (process group), stdout and stderr appended to `log_path`. Subclasses
    (dataclasses or plain classes) provide `popen` (None until started) and `log_path`."""

    popen: subprocess.Popen | None
    log_path: Path
    tail_lines = 40

    def launch(self, args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
               note: str | None = None) -> None:
        """Start `args`; `note`, when given, is written to the log first as a dated `=====` line."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            if note:
                log.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} {note}\n".encode())
                log.flush()
            self.popen = subprocess.Popen([str(a) for a in args], stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int | None = None) -> str:
        lines = lines or self.tail_lines
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def signal_group(self, sig: int) -> None:
        if self.popen is not None:
            try:
                os.killpg(self.popen.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def wait_healthy(self, url: str, timeout: float, *, name: str, interval: float = 0.2) -> None:
        """Poll `url` until it answers 200 (a server answers 503 while it loads); fail at once if the process
        exits, or after `timeout` (a hang)."""
        what = url.split("/", 3)[-1]
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.alive():
                raise RuntimeError(f"{name} exited with {self.popen and self.popen.returncode} before /{what} "
                                   f"answered\n{self.tail()}")
            if http_status(url) == 200:
                return
            time.sleep(interval)
        raise TimeoutError(f"{name} /{what} did not answer within {timeout:g}s\n{self.tail()}")

    def stop_group(self, timeout: float = 30.0, kill_wait: float = 10.0) -> None:
        """SIGTERM to the process group, SIGKILL after `timeout` if any of it is still there; then forget it."""
        if self.popen is None:
            return
        pgid = self.popen.pid
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, kill_wait)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            end = time.monotonic() + wait
            while time.monotonic() < end and group_alive(pgid):
                self.popen.poll()
                time.sleep(0.1)
            if not group_alive(pgid):
                break
        self.popen.poll()
        self.popen = None


class LocalServer(GroupProcess):
    """A server on 127.0.0.1:`port` with its work directory `workdir` (its log: server.log there)."""

    port: int
    workdir: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"
