"""tests.support.prometheus drives a real Prometheus: per-pool targets get their labels, an all-pools
endpoint keeps the labels its series carry, and a restart keeps the TSDB."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytestmark = pytest.mark.prometheus

ALL_POOLS = (b'# TYPE demo_tokens_total counter\n'
             b'demo_tokens_total{traffic_class="chat",spec_mode="off"} 5\n'
             b'demo_tokens_total{traffic_class="chat",spec_mode="eagle3"} 7\n')
ONE_POOL = b'# TYPE pool_tokens_total counter\npool_tokens_total 3\n'


@pytest.fixture
def exporter():
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = {"/metrics": ALL_POOLS, "/pools/code-eagle3/metrics": ONE_POOL}.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_targets_labels_and_restart(prometheus_factory, exporter):
    prom = prometheus_factory([
        {"target": exporter, "metrics_path": "/metrics"},
        {"target": f"http://{exporter}/pools/code-eagle3/metrics",
         "labels": {"traffic_class": "code", "spec_mode": "eagle3"}},
    ], lookback_delta="1m")
    assert prom.config_path.exists()
    both = prom.wait_for_samples("demo_tokens_total", min_series=2)
    assert {s["metric"]["spec_mode"] for s in both} == {"off", "eagle3"}
    assert all("exported_spec_mode" not in s["metric"] for s in both)
    pool = prom.wait_for_samples("pool_tokens_total")
    assert pool[0]["metric"]["traffic_class"] == "code" and pool[0]["metric"]["spec_mode"] == "eagle3"

    url = prom.url
    prom.restart()
    assert prom.url == url
    # samples written before the restart are still queryable
    assert prom.wait_for_samples("count_over_time(pool_tokens_total[10m]) > 0")
