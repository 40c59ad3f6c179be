"""URL view state and the HTTP client (httpx.MockTransport): parsing, typed errors, timeouts."""

from __future__ import annotations

import httpx
import pytest

from dashboard import state
from dashboard.api_client import ApiClient, ApiError, ApiUnavailable
from tests.dashboard import fakes


def test_window_round_trips_through_the_url():
    view = state.parse_search("?window=24h&model=llama&cls=chat&junk=1")
    assert (view.window, view.model, view.cls) == ("24h", "llama", "chat")
    assert state.parse_search(state.to_search(view)) == view


def test_custom_window_wins_and_is_normalised_to_utc():
    view = state.parse_search("?window=1h&start=2026-11-30T10:00&end=2026-11-30T12:00:00%2B01:00")
    assert view.window == state.CUSTOM
    assert (view.start, view.end) == ("2026-11-30T10:00:00Z", "2026-11-30T11:00:00Z")
    assert view.api_window() == {"start": "2026-11-30T10:00:00Z", "end": "2026-11-30T11:00:00Z"}


@pytest.mark.parametrize("search", ["?window=bogus", "?start=2026-11-30T12:00&end=2026-11-30T10:00", ""])
def test_bad_or_missing_window_falls_back_to_the_default(search):
    assert state.parse_search(search).window == state.DEFAULT_WINDOW


def _client(handler) -> ApiClient:
    return ApiClient("http://api.test", transport=httpx.MockTransport(handler))


def test_fleet_is_parsed_into_the_wire_schema_with_the_window_as_a_query_parameter():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.update(request.url.params)
        return httpx.Response(200, json=fakes.fleet([fakes.fleet_row()]).model_dump(mode="json"))

    fleet = _client(handler).fleet(state.View(window="7d"))
    assert seen == {"window": "7d"}
    assert fleet.rows[0].acceptance_rate == 0.7 and fleet.rows[0].p99_tpot_delta is None


def test_acceptance_uses_range_for_the_window():
    seen = {}

    def handler(request):
        seen.update(request.url.params)
        return httpx.Response(200, json=fakes.series("chat", [0.5]).model_dump(mode="json"))

    _client(handler).acceptance("m", state.View(window="6h"), traffic_class="chat")
    assert seen == {"model": "m", "traffic_class": "chat", "range": "6h"}


@pytest.mark.parametrize("response", [httpx.Response(503, json={"detail": "database unavailable"}),
                                      httpx.Response(200, text="<html>proxy error</html>"),
                                      httpx.Response(200, json={"rows": "nope"})])
def test_server_errors_and_garbage_are_unavailable(response):
    with pytest.raises(ApiUnavailable):
        _client(lambda r: response).fleet(state.View())


def test_connection_refused_and_timeouts_are_unavailable():
    def refuse(request):
        raise httpx.ConnectError("refused", request=request)

    def slow(request):
        raise httpx.ReadTimeout("slow", request=request)

    for handler in (refuse, slow):
        with pytest.raises(ApiUnavailable):
            _client(handler).pools()


def test_a_4xx_is_an_api_error_with_the_known_models():
    resp = httpx.Response(404, json={"detail": "unknown model 'x'", "known_models": ["a", "b"]})
    with pytest.raises(ApiError) as err:
        _client(lambda r: resp).summary("x", state.View())
    assert err.value.status == 404 and err.value.known == ["a", "b"] and "unknown model" in err.value.detail


def test_annotations_are_optional():
    assert _client(lambda r: httpx.Response(404, json={"detail": "Not Found"})).annotations("m", state.View()) == []
    body = {"annotations": [{"t": "2026-11-30T10:41:00Z", "kind": "restart", "text": "chat: 1 restart(s)"}]}
    notes = _client(lambda r: httpx.Response(200, json=body)).annotations("m", state.View())
    assert notes[0].kind == "restart" and notes[0].t.hour == 10
