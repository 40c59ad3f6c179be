"""gzip for the dashboard's responses and cache headers for its static files (a cold overview load was
3.6 MB of uncompressed JavaScript).

Dash's component bundles (/_dash-component-suites/, fingerprinted: Dash already marks them cacheable for a
year) and our /assets/ files (Dash adds ?m=<mtime>, so a changed file has a new URL) never change under
their URL, so their gzip is computed once and kept (a bounded cache): a busy machine does not recompress
3.6 MB per cold load. Callback and layout responses are compressed per response.
"""

from __future__ import annotations

import gzip
from collections import OrderedDict
from threading import Lock

from flask import Flask, Response, request

MIMETYPES = {"text/html", "text/css", "text/javascript", "application/javascript", "application/json",
             "image/svg+xml", "text/plain"}
MIN_SIZE = 1024       # below this gzip saves nothing worth the header
LEVEL = 6
CACHE_ENTRIES = 128   # immutable files kept compressed (the bundles are ~40 files)
ASSET_MAX_AGE = 31536000


def _immutable() -> bool:
    path = request.path
    return path.startswith("/_dash-component-suites/") or (path.startswith("/assets/") and "m" in request.args)


def _accepts_gzip() -> bool:
    return any(part.split(";")[0].strip() in ("gzip", "*")
               for part in request.headers.get("Accept-Encoding", "").split(","))


class Compressor:
    def __init__(self, level: int = LEVEL, min_size: int = MIN_SIZE, entries: int = CACHE_ENTRIES):
        self.level, self.min_size, self.entries = level, min_size, entries
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._lock = Lock()

    def _gzip(self, data: bytes, key: str | None) -> bytes:
        if key is None:
            return gzip.compress(data, self.level, mtime=0)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        out = gzip.compress(data, self.level, mtime=0)
        with self._lock:
            self._cache[key] = out
            while len(self._cache) > self.entries:
                self._cache.popitem(last=False)
        return out

    def __call__(self, response: Response) -> Response:
        immutable = _immutable()
        if immutable and response.status_code == 200 and request.path.startswith("/assets/"):
            response.cache_control.public = True
            response.cache_control.max_age = ASSET_MAX_AGE
        response.vary.add("Accept-Encoding")
        if (response.status_code != 200 or "Content-Encoding" in response.headers or not _accepts_gzip()
                or response.mimetype not in MIMETYPES):
            return response
        if response.is_streamed and not response.direct_passthrough:
            return response  # a generator (none in Dash): leave it alone
        response.direct_passthrough = False  # send_from_directory: read the file once, here
        data = response.get_data()
        if len(data) < self.min_size:
            return response
        key = f"{request.full_path}" if immutable else None
        response.set_data(self._gzip(data, key))
        response.headers["Content-Encoding"] = "gzip"
        etag, weak = response.get_etag()
        if etag:
            response.set_etag(f"{etag}-gzip", weak=weak)
        return response


def install(server: Flask) -> Compressor:
    compressor = Compressor()
    server.after_request(compressor)
    return compressor
