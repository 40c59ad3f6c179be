"""The client helper's running_requests: carried into the record when given, refused when not a count."""

from __future__ import annotations

import pytest

from backend.client.gateway import record_from_gateway
from backend.client.per_request import StreamRecorder, record_from_response
from tests.client.test_per_request_client import RESPONSE


def test_running_requests_is_carried() -> None:
    rec = record_from_response(RESPONSE, finish_time=1_700_000_000, running_requests=48)
    assert rec["running_requests"] == 48 and rec["prompt_tokens"] == 5
    assert "running_requests" not in record_from_response(RESPONSE, finish_time=1_700_000_000)
    assert record_from_gateway(RESPONSE, finish_time=1_700_000_000, running_requests=7)["running_requests"] == 7
    recorder = StreamRecorder([RESPONSE])
    list(recorder)
    assert recorder.record(running_requests=1)["running_requests"] == 1


@pytest.mark.parametrize("bad", [0, -3, 2.0, "5", True, 1_000_001])
def test_bad_running_requests_raise(bad) -> None:
    with pytest.raises(ValueError, match="running_requests must be a whole number 1 .. 1,000,000"):
        record_from_response(RESPONSE, finish_time=1_700_000_000, running_requests=bad)
