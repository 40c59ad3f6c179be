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
from dataclasses import dataclass, field
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


def json_request(url: str, body: dict) -> urllib.request.Request:
    """A POST of `body` as JSON."""
    return urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                  headers={"Content-Type": "application/json"})


def post_json(url: str, body: dict, timeout: float = 120.0) -> dict:
    with urllib.request.urlopen(json_request(url, body), timeout=timeout) as resp:
        return json.loads(resp.read())


def group_alive(pgid: int) -> bool:
    """Whether signal 0 reaches the process group (one of another user's counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


class EngineUnavailable(RuntimeError):
    """An engine cannot be built or installed on this machine; the message says what is missing."""


def refuse(reason: str | None) -> None:
    """Raise EngineUnavailable(reason) when there is a reason the engine cannot be made here."""
    if reason:
        raise EngineUnavailable(reason)


def cache_dir(variable: str, name: str) -> Path:
    """Where a built engine lives: $`variable`, else ~/.cache/specwatch/`name` (outside the repository, reused)."""
    env = os.environ.get(variable)
    if env:
        return Path(env).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "specwatch" / name


@dataclass
class LocalServer(GroupProcess):
    """A server on 127.0.0.1:`port` (a free one when 0) with its work directory `workdir` (its model in
    model/, its log in server.log), started with `extra_args` after its own. Subclasses add their settings
    and a start() that waits until it answers."""

    workdir: Path
    port: int = 0
    extra_args: list[str] = field(default_factory=list)
    popen: subprocess.Popen | None = None
    name = "server"  # in messages
    start_timeout = 600.0  # seconds until /health must answer (only a hang takes that long)
    poll = 0.2  # seconds between /health probes

    def start(self, timeout: float | None = None) -> LocalServer:
        """Start the server (prepare() builds its model first if needed) and wait until /health answers 200."""
        self.prepare()
        self.launch(self.args(), env=self.env(), cwd=self.workdir, note=f"start {' '.join(self.args())}")
        self.wait_healthy(f"{self.url}/health", timeout or self.start_timeout, name=self.name, interval=self.poll)
        return self

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir)
        self.port = self.port or free_port()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM to the server's process group (an engine's workers too), SIGKILL after `timeout` if any of
        it is still there."""
        self.stop_group(timeout)

    def restart(self, timeout: float | None = None) -> None:
        self.stop()
        self.start(timeout)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as resp:
            return resp.read().decode()

    def serve(self, banner: str) -> int:
        """Start, print `banner`, run until Ctrl-C (0) or until the server exits (1); stop it either way."""
        try:
            self.start()
            print(banner, flush=True)
            while self.alive():
                time.sleep(1)
            return 1
        except KeyboardInterrupt:
            return 0
        finally:
            self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    @property
    def model_dir(self) -> Path:
        return self.workdir / "model"
