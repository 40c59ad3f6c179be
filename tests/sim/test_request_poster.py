"""The simulator's poster sends every finished request once it gets through, keeping them while the
receiver fails."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from backend.sim.post import RequestPoster
from backend.sim.server import Simulator
from tests.sim.test_per_request import TWO_CLASSES


class Receiver:
    def __init__(self) -> None:
        self.fail = True
        self.ids: list[str] = []
        self.auth: set[str] = set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.auth.add(self.headers["Authorization"])
                if outer.fail:
                    self.send_response(500)
                    self.end_headers()
                    return
                outer.ids += [json.loads(line)["request_id"] for line in body.splitlines() if line]
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"stored": 1}')

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v1/requests"


def test_poster_retries_and_sends_each_record() -> None:
    clock = [1_000_000.0]
    sim = Simulator(TWO_CLASSES, seed=1, clock=lambda: clock[0], start=1_000_000.0)
    rx = Receiver()
    try:
        poster = RequestPoster(sim, rx.url, "sw_test", batch=50, timeout=5)
        clock[0] += 40
        assert poster.round() == 0 and poster.failures == 1 and len(poster.pending) > 0
        rx.fail = False
        clock[0] += 40
        posted = poster.round()
        assert posted == poster.posted == len(rx.ids) > 50 and not poster.pending
        assert len(set(rx.ids)) == len(rx.ids) and rx.auth == {"Bearer sw_test"}
    finally:
        rx.server.shutdown()
