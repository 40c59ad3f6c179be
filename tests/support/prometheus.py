"""A real Prometheus for tests: writes prometheus.yml with static targets (and their pool labels, as
relabeling would attach them), runs the binary on a free port, and waits for samples.

Targets are dicts:
    {"target": "http://127.0.0.1:9400/pools/chat-eagle3/metrics", "labels": {"traffic_class": "chat",
     "spec_mode": "eagle3"}}          # a per-pool endpoint; the URL path becomes metrics_path
    {"target": "127.0.0.1:9400", "metrics_path": "/metrics"}   # the sim's all-pools endpoint, whose
                                                                 # series already carry the labels
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Self

from tests.support.deadline import deadline as scaled
from tests.support.peers import Peer


def _split_target(t: dict[str, Any]) -> tuple[str, str, str]:
    """(scheme, host:port, metrics_path) of a target dict."""
    raw = t.get("target") or t.get("url") or t["hostport"]
    if "://" in raw:
        u = urllib.parse.urlsplit(raw)
        return u.scheme, u.netloc, t.get("metrics_path") or u.path or "/metrics"
    return t.get("scheme", "http"), raw, t.get("metrics_path", "/metrics")


def scrape_config(targets: list[dict[str, Any]], scrape_interval: str = "1s",
                  honor_labels: bool = True) -> dict[str, Any]:
    """One job; metrics_path and scheme are set per target through the __metrics_path__/__scheme__ labels.
    honor_labels keeps a scraped traffic_class/spec_mode instead of renaming it exported_*."""
    groups = []
    for t in targets:
        scheme, hostport, path = _split_target(t)
        labels = {"__metrics_path__": path, "__scheme__": scheme}
        labels.update({k: str(v) for k, v in (t.get("labels") or {}).items()})
        groups.append({"targets": [hostport], "labels": labels})
    return {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
        "scrape_configs": [{"job_name": "vllm", "honor_labels": honor_labels, "scrape_timeout": scrape_interval,
                            "static_configs": groups}],
    }


class PrometheusServer(Peer):
    name = "prometheus"

    def __init__(self, targets: list[dict[str, Any]], scrape_interval: str = "1s", port: int = 0,
                 data_dir: Path | None = None, extra_args: list[str] | None = None,
                 lookback_delta: str | None = None, binary: str | None = None, honor_labels: bool = True,
                 config: dict[str, Any] | None = None):
        """config: a whole prometheus.yml (as a dict) to use instead of the one built from targets."""
        binary = binary or shutil.which("prometheus")
        if not binary:
            raise RuntimeError("no `prometheus` binary on PATH (Debian: apt-get install prometheus)")
        super().__init__(binary, data_dir, port)
        self.targets = targets
        self.scrape_interval = scrape_interval
        self.extra_args = list(extra_args or [])
        self.lookback_delta = lookback_delta
        self.honor_labels = honor_labels
        self.config = config

    @property
    def config_path(self) -> Path:
        return self.data_dir / "prometheus.yml"

    def write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.config or scrape_config(self.targets, self.scrape_interval, self.honor_labels)
        self.config_path.write_text(json.dumps(cfg, indent=2))  # JSON is YAML; every string stays quoted ("off")
        return self.config_path

    def args(self) -> list[str]:
        args = [self.binary, f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.data_dir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-admin-api",
                "--web.enable-lifecycle", "--log.level=warn"]
        if self.lookback_delta:
            args.append(f"--query.lookback-delta={self.lookback_delta}")
        return args + self.extra_args

    def start(self, timeout: float = 120) -> Self:
        self.write_config()
        return super().start(timeout)

    def restart(self, timeout: float = 120) -> None:
        """Stop and start again on the same port and data dir (the TSDB is kept)."""
        self.stop()
        self.start(timeout)

    def reload(self) -> None:
        """Rewrite the config (e.g. after changing self.targets) and ask the server to reload it."""
        self.write_config()
        req = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        urllib.request.urlopen(req, timeout=scaled(60)).close()

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": promql}
        if at is not None:
            params["time"] = str(at)
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=scaled(60)) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"query failed: {body}")
        return body["data"]["result"]

    def wait_for_samples(self, promql: str, timeout: float = 300, min_series: int = 1,
                         at: float | None = None) -> list[dict[str, Any]]:
        """Poll an instant query (at `at`, default now) until it returns at least min_series series; return
        them. `timeout` only catches a hang (scaled by SPECWATCH_TEST_DEADLINE_SCALE)."""
        timeout = scaled(timeout)
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            if self.proc is not None and not self.proc.alive():
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}\n{self.proc.tail()}")
            try:
                result = self.query(promql, at=at)
            except OSError:
                result = []
            if len(result) >= min_series:
                return result
            time.sleep(0.25)
        raise TimeoutError(f"waited {timeout:g}s for {promql!r} to return {min_series} series; saw {len(result)}; "
                           f"targets: {self.target_health()}\n{self.proc.tail() if self.proc else ''}")

    def target_health(self) -> list[tuple[str, str, str]]:
        """(scrape URL, health, last error) of every target, as Prometheus reports them."""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=scaled(60)) as r:
                active = json.load(r)["data"]["activeTargets"]
        except (OSError, ValueError, KeyError):
            return []
        return [(t.get("scrapeUrl", ""), t.get("health", ""), t.get("lastError", "")) for t in active]

    def __exit__(self, *exc) -> None:
        self.stop()  # the data folder stays: a test may read or reuse it
