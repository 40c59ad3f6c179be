"""The model page's α by context length when the API refuses per-request data (a token that may not read
it): a sentence saying why, never a blank section."""

from __future__ import annotations

from backend.schemas.pools import PoolsRead
from dashboard import state
from dashboard.api_client import ApiError
from dashboard.pages import model as page
from tests.dashboard import fakes
from tests.dashboard.test_pages import _text


class RefusingClient(fakes.FakeClient):
    """The fake API, its model `m` with a per-request records pool, refusing /requests/acceptance (403)."""

    def pools(self):
        body = fakes.pools().model_dump(mode="json")
        body["pools"].append({**body["pools"][0], "id": 9, "origin": "requests"})
        return PoolsRead.model_validate(body)

    def _request(self, method, path, **kw):
        self.calls.append((method, path))
        raise ApiError(403, "this endpoint needs the viewer role", code="forbidden")


def test_a_refused_read_is_said_in_a_sentence():
    client = RefusingClient()
    out = page.render_context(client, state.View(model="m", window="1h"), "light")
    text = _text(out)
    assert text.startswith("α by context length unavailable: ") and len(text) > 40
    assert ("GET", "/requests/acceptance") in client.calls
