"""The client helper finds metrics.speculative_decoding in plain, SDK-object and streamed responses."""

from __future__ import annotations

import json

from backend.client.per_request import StreamRecorder, record_from_response, record_from_stream, spec_decoding

SPEC = {"mean_acceptance_length": 1.2325581395348837, "draft_acceptance_rate": 0.07751937984496124,
        "acceptance_histogram": [39, 1, 0, 3], "acceptance_histogram_by_draft_length": {"3": [39, 1, 0, 3]},
        "num_spec_steps": 43, "num_accepted_draft_tokens": 10, "num_draft_tokens": 129, "num_spec_tokens": 3}
RESPONSE = {"id": "chatcmpl-1", "model": "m1", "choices": [{"index": 0, "message": {"content": "hi"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 53, "total_tokens": 58},
            "metrics": {"speculative_decoding": SPEC}}


class SdkObject:
    """Shaped like an openai SDK model: declared fields via model_dump, unknown ones in model_extra."""

    def __init__(self, data: dict):
        self._declared = {k: v for k, v in data.items() if k != "metrics"}
        self.model_extra = {k: v for k, v in data.items() if k == "metrics"}

    def model_dump(self) -> dict:
        return dict(self._declared)


def test_plain_and_sdk_responses() -> None:
    rec = record_from_response(RESPONSE, labels={"traffic_class": "chat"}, finish_time=1_700_000_000)
    assert rec == {"request_id": "chatcmpl-1", "model": "m1", "labels": {"traffic_class": "chat"},
                   "finish_time": "2023-11-14T22:13:20+00:00", "output_tokens": 53, "speculative_decoding": SPEC,
                   "prompt_tokens": 5}  # usage.prompt_tokens: the context length
    assert spec_decoding(SdkObject(RESPONSE)) == SPEC
    assert record_from_response({**RESPONSE, "metrics": {"speculative_decoding": None}}) is None
    assert record_from_response({k: v for k, v in RESPONSE.items() if k != "metrics"}) is None


def _chunks() -> list[dict]:
    base = {"id": "chatcmpl-2", "model": "m1", "object": "chat.completion.chunk"}
    return [{**base, "choices": [{"delta": {"content": "h"}}]}, {**base, "choices": [{"delta": {"content": "i"}}]},
            {**base, "choices": [], "usage": {"completion_tokens": 53}, "metrics": {"speculative_decoding": SPEC}}]


def test_streamed_response_final_usage_chunk() -> None:
    sse = [f"data: {json.dumps(c)}\n" for c in _chunks()] + [": keep-alive\n", "data: [DONE]\n"]
    rec = record_from_stream(sse, labels={"traffic_class": "code"})
    assert (rec["request_id"], rec["output_tokens"], rec["speculative_decoding"]) == ("chatcmpl-2", 53, SPEC)
    recorder = StreamRecorder(c.encode() for c in sse)
    passed = list(recorder)
    assert len(passed) == len(sse)  # the caller still gets every chunk
    assert recorder.record(labels={})["speculative_decoding"] == SPEC
    assert record_from_stream([SdkObject(c) for c in _chunks()])["output_tokens"] == 53
    assert record_from_stream(_chunks()[:2]) is None  # no usage chunk (include_usage not set)
