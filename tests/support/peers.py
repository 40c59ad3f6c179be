"""Real peers for tests, from their Debian packages: an Alertmanager (`prometheus-alertmanager`) and a
single-node VictoriaMetrics (`victoria-metrics`), each run as a child process in its own process group on
a free port with a temporary storage folder, waited on until it answers its readiness URL.

`Peer` is also the shape of tests/support/prometheus.py's server; process handling is tests/support/procs.py's."""

from __future__ import annotations

import json
import shutil
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Self

from tests.support.deadline import deadline as scaled
from tests.support.procs import Proc, free_port, wait_for_http


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=scaled(60)) as r:
        return json.load(r)


class Peer:
    """A server binary run as a child process on a free port (or `port`), with its data and log in
    `data_dir` (a temporary folder if none), started when it answers `ready_path`."""
    name = "peer"
    ready_path = "/-/ready"

    def __init__(self, binary: str, data_dir: Path | None = None, port: int = 0):
        self.binary = binary
        self.port = port or free_port()
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix=f"specwatch-{self.name}-"))
        self.proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / f"{self.name}.log"

    def args(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 120) -> Self:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = Proc(self.name, self.args(), self.log_path).start()
        wait_for_http(self.url + self.ready_path, timeout=timeout, proc=self.proc)
        return self

    def stop(self, timeout: float = 20) -> None:
        if self.proc is not None:
            self.proc.stop(timeout)
            self.proc = None

    def tail(self) -> str:
        return self.proc.tail() if self.proc else ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)


class AlertmanagerServer(Peer):
    """`prometheus-alertmanager` with the given config (a dict, written as JSON, which is YAML), clustering
    off (`--cluster.listen-address=`), its state in a temporary folder."""

    name = "alertmanager"

    def __init__(self, config: dict[str, Any], binary: str, data_dir: Path | None = None):
        super().__init__(binary, data_dir)
        self.config = config

    def args(self) -> list[str]:
        path = self.data_dir / "alertmanager.yml"
        path.write_text(json.dumps(self.config, indent=2))
        return [self.binary, f"--config.file={path}", f"--storage.path={self.data_dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address=", "--log.level=warn"]

    def alerts(self, **filters: str) -> list[dict[str, Any]]:
        """GET /api/v2/alerts (active, silenced, inhibited, unprocessed: resolved alerts are not listed)."""
        query = f"?{urllib.parse.urlencode(filters)}" if filters else ""
        return _get_json(f"{self.url}/api/v2/alerts{query}")

    def groups(self) -> list[dict[str, Any]]:
        """GET /api/v2/alerts/groups: the alerts as the route groups them."""
        return _get_json(f"{self.url}/api/v2/alerts/groups")


class VictoriaMetricsServer(Peer):
    """Single-node `victoria-metrics` scraping with a Prometheus-style config (`-promscrape.config`), its
    storage in a temporary folder. Its query limits stay at their defaults (the ones docs/architecture.md
    names: 30 s latency offset, 30,000 points per series) unless extra_args say otherwise."""

    name = "victoria-metrics"
    ready_path = "/health"

    def __init__(self, scrape_config: dict[str, Any], binary: str, data_dir: Path | None = None,
                 extra_args: list[str] | None = None):
        super().__init__(binary, data_dir)
        self.scrape_config = scrape_config
        self.extra_args = list(extra_args or [])

    def args(self) -> list[str]:
        path = self.data_dir / "scrape.yml"
        cfg = json.loads(json.dumps(self.scrape_config))
        cfg.get("global", {}).pop("evaluation_interval", None)  # a Prometheus rule setting VM refuses
        path.write_text(json.dumps(cfg, indent=2))
        return [self.binary, f"-storageDataPath={self.data_dir / 'data'}", f"-httpListenAddr=127.0.0.1:{self.port}",
                f"-promscrape.config={path}", "-retentionPeriod=1d", "-loggerLevel=WARN", *self.extra_args]

    def query(self, promql: str, at: float | None = None, **params: str) -> list[dict[str, Any]]:
        q = {"query": promql, **params}
        if at is not None:
            q["time"] = repr(at)
        body = _get_json(f"{self.url}/api/v1/query?{urllib.parse.urlencode(q)}")
        if body.get("status") != "success":
            raise RuntimeError(f"query failed: {body}")
        return body["data"]["result"]

    def query_range(self, promql: str, start: float, end: float, step: int) -> list[dict[str, Any]]:
        q = {"query": promql, "start": repr(start), "end": repr(end), "step": f"{step}s"}
        body = _get_json(f"{self.url}/api/v1/query_range?{urllib.parse.urlencode(q)}")
        if body.get("status") != "success":
            raise RuntimeError(f"query failed: {body}")
        return body["data"]["result"]

    def targets(self) -> list[tuple[str, str, str]]:
        try:
            active = _get_json(f"{self.url}/api/v1/targets")["data"]["activeTargets"]
        except (OSError, ValueError, KeyError):
            return []
        return [(t.get("scrapeUrl", ""), t.get("health", ""), t.get("lastError", "")) for t in active]


class WebhookSink:
    """A local HTTP receiver for Alertmanager's webhook notifications: records every POSTed JSON body
    (standard library `http.server`, threaded) and answers 200."""

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        sink = self
        self.received: list[dict[str, Any]] = []
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with sink._lock:
                    sink.received.append(json.loads(body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def notifications(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.received)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
