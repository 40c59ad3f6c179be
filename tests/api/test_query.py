"""backend.api.query: the series endpoints' parameters, read by hand with FastAPI's rules and documented
from the same declaration."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from backend.api import query
from backend.api.query import Param
from backend.api.routes.acceptance import BULK, SERIES
from backend.services.errors import InvalidParameter

PARAMS = (Param("by", "", default="pool", choices=("pool", "model")), Param("model", "", repeated=True),
          Param("step", ""), Param("tc", "", default="mixed"))


def _request(qs: str) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/", "query_string": qs.encode(), "headers": []})


@pytest.mark.parametrize("qs,want", [
    ("", {"by": "pool", "model": None, "step": None, "tc": "mixed"}),
    ("by=model&model=a&model=b&step=5m&tc=chat&other=x",
     {"by": "model", "model": ["a", "b"], "step": "5m", "tc": "chat"}),
    ("step=1m&step=2m", {"by": "pool", "model": None, "step": "2m", "tc": "mixed"}),  # the last one wins
    ("step=&model=", {"by": "pool", "model": [""], "step": "", "tc": "mixed"}),
])
def test_values_defaults_lists_and_repeats(qs, want):
    assert query.read(_request(qs), PARAMS) == want


def test_a_value_outside_the_choices_and_a_missing_required_one_are_clear_errors():
    with pytest.raises(InvalidParameter, match=r"by must be one of pool, model \(got 'class'\)"):
        query.read(_request("by=class"), PARAMS)
    with pytest.raises(InvalidParameter, match="'model' is required"):
        query.read(_request("range=1h"), SERIES)
    assert query.read(_request("model=m"), SERIES)["model"] == "m"


def test_openapi_documents_each_parameter_once_with_its_rules(client):
    spec = client.get("/openapi.json").json()["paths"]
    for path, params in (("/api/v1/acceptance/bulk", BULK), ("/api/v1/acceptance", SERIES)):
        documented = {p["name"]: p for p in spec[path]["get"]["parameters"]}
        assert list(documented) == [p.name for p in params]
        assert all(p["in"] == "query" and p["description"] for p in documented.values())
    bulk = {p["name"]: p for p in spec["/api/v1/acceptance/bulk"]["get"]["parameters"]}
    assert bulk["by"]["schema"]["anyOf"][0]["enum"] == ["pool", "model"] and bulk["by"]["schema"]["default"] == "pool"
    assert bulk["model"]["schema"]["anyOf"][0]["type"] == "array" and not bulk["model"]["required"]
    one = {p["name"]: p for p in spec["/api/v1/acceptance"]["get"]["parameters"]}
    assert one["model"]["required"] and one["traffic_class"]["schema"]["default"] == "mixed"
