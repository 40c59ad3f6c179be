"""Local /metrics servers for collection tests, well-behaved or hostile (loopback only).

    with ExpositionServer() as srv:
        srv.route("/good", counters("m-good"))            # drafts grow by 100 a scrape
        srv.route("/slow", trickle(every=2.0))             # headers, then one byte every 2 s
        srv.route("/huge", huge(65 * 2**20))               # a 65 MB body
        srv.url + "/good"

A route is a function (request number, starting at 0) -> Body: exposition text, or a streaming behaviour.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self


@dataclass
class Stream:
    """A body sent in pieces: `chunks` yields bytes, `length` is the Content-Length announced (None: chunked)."""

    chunks: Callable[[threading.Event], Iterator[bytes]]
    length: int | None = None


Route = Callable[[int], "str | Stream"]


def exposition(model: str, n: int, *, created: float | None = None, klass: str | None = None,
               mode: str | None = None, drafts: float | None = None, generation: float | None = None) -> str:
    """A consistent spec-decode exposition for one pool after `n` steps: 100 drafts, 300 draft tokens, 180
    accepted (80/60/40 per position) and 500 generated tokens a step (`drafts` and `generation` override the
    drafts and generated-tokens counters' values, e.g. to make them dip)."""
    labels = f'model_name="{model}"'
    if klass:
        labels += f',traffic_class="{klass}"'
    if mode:
        labels += f',spec_mode="{mode}"'
    d = 100.0 * n if drafts is None else drafts
    lines = [
        "# TYPE vllm:spec_decode_num_drafts counter", f"vllm:spec_decode_num_drafts_total{{{labels}}} {d}",
        "# TYPE vllm:spec_decode_num_draft_tokens counter",
        f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {300.0 * n}",
        "# TYPE vllm:spec_decode_num_accepted_tokens counter",
        f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {180.0 * n}",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
        *(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {v * n}'
          for i, v in enumerate((80.0, 60.0, 40.0))),
        "# TYPE vllm:generation_tokens counter",
        f"vllm:generation_tokens_total{{{labels}}} {500.0 * n if generation is None else generation}",
    ]
    if created is not None:
        lines += ["# TYPE vllm:spec_decode_num_drafts_created gauge",
                  f"vllm:spec_decode_num_drafts_created{{{labels}}} {created}",
                  "# TYPE vllm:generation_tokens_created gauge",
                  f"vllm:generation_tokens_created{{{labels}}} {created}"]
    return "\n".join(lines) + "\n"


def many(models: list[str]) -> Route:
    """One target exposing a pool per model (untyped samples: one exposition cannot repeat a family)."""
    return lambda n: "".join(line + "\n" for m in models for line in exposition(m, n).splitlines()
                             if not line.startswith("#"))


def counters(model: str, **kw) -> Route:
    return lambda n: exposition(model, n, **kw)


def trickle(every: float, size: int = 30) -> Route:
    """Headers at once, then a comment line of `size` bytes, one byte every `every` seconds (until the
    client goes or the server stops)."""

    def chunks(stop: threading.Event) -> Iterator[bytes]:
        yield b"#"
        for _ in range(size - 2):
            if stop.wait(every):
                return
            yield b" "
        yield b"\n"

    return lambda n: Stream(chunks)


def huge(size: int, *, announce: bool = False) -> Route:
    """A `size`-byte body of comment lines, sent as fast as the client reads; its length announced or not."""
    line = b"# " + b"x" * 1021 + b"\n"

    def chunks(stop: threading.Event) -> Iterator[bytes]:
        left = size
        while left > 0 and not stop.is_set():
            piece = (line * 64)[:left]
            left -= len(piece)
            yield piece

    return lambda n: Stream(chunks, size if announce else None)


class ExpositionServer:
    def __init__(self, host: str = "127.0.0.1"):
        self._routes: dict[str, Route] = {}
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.aborted: list[str] = []  # paths whose client went away mid-body
        self._server = ThreadingHTTPServer((host, 0), self._handler_class())
        self._server.daemon_threads = True

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def route(self, path: str, fn: Route) -> str:
        self._routes[path] = fn
        return self.url + path

    def requests(self, path: str) -> int:
        with self._lock:
            return self._counts.get(path, 0)

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self):
        srv = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                fn = srv._routes.get(self.path)
                if fn is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with srv._lock:
                    n = srv._counts.get(self.path, 0)
                    srv._counts[self.path] = n + 1
                body = fn(n)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                if isinstance(body, str):
                    data = body.encode()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                chunked = body.length is None
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(body.length))
                self.end_headers()
                try:
                    for piece in body.chunks(srv._stop):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                        self.wfile.flush()
                    if chunked:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the client cut us off
                    with srv._lock:
                        srv.aborted.append(self.path)
                    self.close_connection = True

        return Handler


def wait_for(check: Callable[[], object], timeout: float = 60.0) -> object:
    """Poll until check() is truthy (one generous deadline against hangs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.05)
    raise TimeoutError(f"condition not met within {timeout}s")
