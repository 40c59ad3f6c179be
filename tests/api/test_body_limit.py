"""No endpoint buffers an unbounded body: a real uvicorn API refuses a body past SPECWATCH_API_MAX_BODY_BYTES
with 413 before reading it (declared by Content-Length, or chunked and counted as it arrives), while
POST /api/v1/requests keeps its own larger limit and small bodies are served as before."""

from __future__ import annotations

from pathlib import Path

import httpx

from backend.api.limits import BodyLimit
from tests.api.test_admission import _serve
from tests.support.deadline import deadline

CALC = "/api/v1/calc/speedup"
LIMIT = 4096


def _chunks(total: int, size: int = 1024):
    sent = 0
    while sent < total:
        yield b" " * min(size, total - sent)
        sent += size


def test_bodies_over_the_limit_are_refused_with_413(fresh_db_url: str, tmp_path: Path) -> None:
    proc, base = _serve(fresh_db_url, tmp_path, api_max_body_bytes=LIMIT)
    try:
        with httpx.Client(base_url=base, timeout=deadline(60)) as client:
            ok = client.post(CALC, json={"alpha": 0.6, "k": 3, "overhead": 0.1})
            assert ok.status_code == 200 and ok.json()["values"]["speedup"] > 1
            declared = client.post(CALC, content=b" " * (LIMIT + 1), headers={"content-type": "application/json"})
            assert declared.status_code == 413
            assert declared.json() == {"detail": f"request body of {LIMIT + 1} bytes; at most {LIMIT}"}
            assert declared.headers["x-content-type-options"] == "nosniff"  # still inside the security headers
            chunked = client.post(CALC, content=_chunks(10 * LIMIT), headers={"content-type": "application/json"})
            assert chunked.status_code == 413 and chunked.json() == {"detail": f"request body over {LIMIT} bytes"}
            # per-request ingest has its own limit (SPECWATCH_REQUESTS_MAX_BODY_BYTES): past the default it is
            # not refused for size (here: 401, no ingest token)
            big = client.post("/api/v1/requests", content=b"[]" + b" " * (2 * LIMIT),
                              headers={"content-type": "application/json"})
            assert big.status_code == 401
            # the API still serves after the refusals
            assert client.post(CALC, json={"alpha": 0.6, "k": 3, "overhead": 0.1}).status_code == 200
    finally:
        proc.stop()


def test_the_longest_matching_prefix_decides_the_limit() -> None:
    limit = BodyLimit(None, default=10, limits={"/api/v1/requests": 100, "/api/v1/requests/big": 1000})
    assert limit.limit_for("/api/v1/calc/speedup") == 10
    assert limit.limit_for("/api/v1/requests") == 100
    assert limit.limit_for("/api/v1/requests/big") == 1000


def test_the_413_is_documented_on_every_operation_with_a_body(fresh_db_url: str) -> None:
    from backend.api.app import create_app
    from backend.config import Settings

    spec = create_app(Settings(_env_file=None, database_url=fresh_db_url)).openapi()
    with_body = [(p, m) for p, ops in spec["paths"].items() for m in ops if m in ("post", "put", "patch")]
    assert len(with_body) >= 10
    assert [(p, m) for p, m in with_body if "413" not in spec["paths"][p][m]["responses"]] == []
