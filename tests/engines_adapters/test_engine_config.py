"""The engine settings: a scrape target's declared engine (JSON and compact forms, refused when unknown) and
the Prometheus source's engines."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from backend.config import Settings


def test_a_target_declares_its_engine_in_either_form():
    s = Settings(scrape_targets="http://a/metrics|model_name=m;engine=llamacpp,http://b/metrics|traffic_class=chat")
    assert [(t.url, t.labels, t.engine) for t in s.scrape_targets] == [
        ("http://a/metrics", {"model_name": "m"}, "llamacpp"), ("http://b/metrics", {"traffic_class": "chat"}, None)]
    s = Settings(scrape_targets='[{"url": "http://c/metrics", "labels": {}, "engine": "sglang"}]')
    assert s.scrape_targets[0].engine == "sglang"
    with pytest.raises(ValidationError, match="engine must be one of vllm, llamacpp, sglang, not 'tgi'"):
        Settings(scrape_targets="http://a/metrics|engine=tgi")


def test_prometheus_engines_are_checked_and_kept_in_order():
    assert Settings().engines == ("vllm",)
    assert Settings(prometheus_engines=" sglang , vllm,sglang").engines == ("sglang", "vllm")
    with pytest.raises(ValidationError, match="one or more of vllm, llamacpp, sglang"):
        Settings(prometheus_engines="vllm,tgi")
    with pytest.raises(ValidationError, match="one or more of"):
        Settings(prometheus_engines=" , ")
