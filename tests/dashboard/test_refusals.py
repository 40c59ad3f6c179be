"""API refusals reach a page as a sentence with a way forward, never as the API's words for API callers; a
refused page's charts say why instead of "loading…"; a model with several spec modes opens the busiest one,
and the URL keeps the mode a user picked."""

from __future__ import annotations

import httpx
import pytest
from dash import no_update

from dashboard import components as c
from dashboard import state
from dashboard.api_client import ApiClient, ApiError, ApiUnavailable
from dashboard.pages import acceptance, model
from tests.dashboard import fakes
from tests.dashboard.fakes import FakeClient
from tests.dashboard.test_pages import _text


def _refused(status: int, body: dict) -> ApiError:
    client = ApiClient("http://api", transport=httpx.MockTransport(lambda r: httpx.Response(status, json=body)))
    with pytest.raises(ApiError) as err:
        client.summary("m", state.View())
    return err.value


@pytest.mark.parametrize(("status", "body", "sentence"), [
    (422, {"detail": "model 'm' runs several spec modes (eagle3, ngram): pass spec_mode as one of them",
           "code": "spec_mode_required", "known": ["eagle3", "ngram"]},
     "This model runs 2 spec modes (eagle3, ngram): pick one above to see its numbers."),
    (404, {"detail": "unknown spec_mode 'medusa'", "code": "unknown_spec_mode", "known": ["eagle3"]},
     "The model does not run that spec mode; it runs eagle3: pick one above."),
    (404, {"detail": "unknown traffic_class 'x'", "code": "unknown_traffic_class", "known": ["chat", "mixed"]},
     "The model has no traffic class of that name; its classes are chat, mixed: pick one above."),
    (404, {"detail": "unknown model 'x'", "code": "unknown_model", "known_models": ["a", "b"]},
     "specwatch has no model of that name; it knows a, b: pick one above."),
    (404, {"detail": "the model has no speculative-decoding pool", "code": "no_spec_pool", "known": ["off"]},
     "This model has only baseline pools (no speculative decoding to show): pick another model above."),
    (422, {"detail": "window: expected a duration", "code": "invalid_window"},
     "This window cannot be shown (window: expected a duration): pick another window above."),
    (401, {"detail": "missing bearer token"}, "This needs you to log in (or a viewer token for the dashboard)."),
    (404, {"detail": "Not Found"}, ("The API has no answer at this address: the backend may be older than the "
                                    "dashboard.")),
])
def test_each_refusal_is_a_sentence_with_a_way_forward(status, body, sentence):
    exc = _refused(status, body)
    assert exc.code == body.get("code") and exc.status == status
    assert c.refusal(exc) == sentence
    assert "pass spec_mode" not in sentence and "Not Found" not in sentence


def test_the_guard_shows_the_sentence_and_blanks_the_charts_it_is_told_to():
    def refuse():
        raise _refused(422, {"detail": "x", "code": "spec_mode_required", "known": ["eagle3", "ngram"]})

    out = c.guarded(refuse, n_outputs=5, blank=lambda why: {3: why.upper()})
    assert "This model runs 2 spec modes (eagle3, ngram)" in _text(out[0]) and out[1] is True
    assert out[2] is no_update and out[3].startswith("THIS MODEL RUNS") and out[4] is no_update

    def down():
        raise ApiUnavailable("ConnectError")

    out = c.guarded(down, n_outputs=4, blank=lambda why: {2: why, 3: why})
    assert out[2:] == (no_update, no_update)  # unreachable: the last numbers stay under the banner

    def bug():
        raise KeyError("x")

    out = c.guarded(bug, n_outputs=3, blank=lambda why: {2: why})
    assert "could not be drawn" in _text(out[0]) and "Traceback" not in _text(out[0])
    assert out[2] == "This chart could not be drawn: the dashboard log has the details."


def _two_modes() -> fakes.SummaryRead:
    return fakes.summary([
        fakes.class_row("chat"), fakes.class_row("mixed"),
        fakes.class_row("chat", spec_mode="ngram", volume={"drafts": 9000, "min_drafts": 1000, "sufficient": True}),
        fakes.class_row("rag", spec_mode="ngram", volume={"drafts": 1000, "min_drafts": 1000, "sufficient": True}),
        fakes.class_row("mixed", spec_mode="ngram",
                        volume={"drafts": 10000, "min_drafts": 1000, "sufficient": True})])


def test_the_busiest_mode_comes_first_and_a_mode_filters_the_summary():
    s = _two_modes()
    assert c.spec_modes(s) == ["ngram", "eagle3"]
    assert c.pick_mode(s, None) == "ngram" and c.pick_mode(s, "eagle3") == "eagle3"
    assert c.pick_mode(s, "off") == "ngram"  # the baseline is never a mode to show
    assert [k.traffic_class for k in c.for_mode(s, "ngram").classes] == ["chat", "rag", "mixed"]
    assert "showing ngram; pick eagle3" in _text(c.mode_note(["ngram", "eagle3"], "ngram"))
    # a mode that stopped reporting comes after one still reporting, however many drafts it had
    stale = {"last_seen": fakes.NOW.isoformat(), "age_seconds": 7200, "stale": True}
    gone = fakes.summary([{**k.model_dump(mode="json"), "freshness": stale} if k.spec_mode == "ngram"
                          else k.model_dump(mode="json") for k in s.classes])
    assert c.spec_modes(gone) == ["eagle3", "ngram"]
    assert c.mode_note(["eagle3"], "eagle3") is None


class TwoModes(FakeClient):
    def summary(self, model, view=None, *, start=None, end=None):
        self._check("summary", model, start)
        return _two_modes()

    def acceptance(self, model, view, *, traffic_class="mixed", spec_mode=None, **_):
        assert spec_mode is not None  # a model with two modes is always asked for one
        self.calls.append(("mode", spec_mode))
        return fakes.series(traffic_class, [0.5, 0.6])


def test_the_per_domain_page_asks_for_one_mode_and_offers_the_others():
    client = TwoModes()
    status, _, models, chosen, _table, chart, _tau, modes, mode = acceptance.render(client, state.View(), "light")
    assert (models, chosen) == (["m", "z-old"], "m")
    assert (modes, mode) == (["ngram", "eagle3"], "ngram")
    assert {call[1] for call in client.calls if call[0] == "mode"} == {"ngram"}
    assert sorted(t.name.split(" ")[0] for t in chart.data if not t.name.startswith("break-even")) == \
        ["chat", "mixed", "rag"]
    assert "This model runs 2 spec modes: showing ngram" in _text(status)
    out = acceptance.render(client, state.View(mode="eagle3"), "light")
    assert out[-1] == "eagle3" and "rag" not in _text(out[4])


def test_the_model_page_bars_are_one_mode_and_a_class_opens_the_mode_serving_it():
    out = model.render(TwoModes(), state.View(model="m", cls="rag"), "light")
    assert out[-1] == "ngram" and out[5] == "rag" and out[4] == ["chat", "rag", "mixed"]
    assert all(list(t.x) == ["chat", "rag", "mixed"] for t in out[11].data)  # speedup bars: one column each
    out = model.render(TwoModes(), state.View(model="m", mode="eagle3", cls="rag"), "light")
    assert out[-1] == "eagle3" and all(list(t.x) == ["chat", "mixed"] for t in out[11].data)
    assert out[5] == "mixed"  # a class the picked mode does not serve: its pooled mix


def test_bars_of_several_modes_are_labelled_by_mode():
    from dashboard import figures

    fig = figures.speedup_bars(_two_modes())
    assert list(fig.data[0].x) == ["chat · eagle3", "mixed · eagle3", "chat · ngram", "rag · ngram", "mixed · ngram"]


@pytest.mark.parametrize(("search", "model_changed", "mode_changed", "picked", "expected"), [
    # first draw of a model named in the URL: its default mode is not written (no second page draw)
    ("?window=1h&model=m", True, True, ("m", "ngram"), no_update),
    # first draw without a model: the model it chose is written, its default mode is not
    ("?window=1h", True, True, ("m", "ngram"), "?window=1h&model=m"),
    # a new model drops the old model's mode (the page then picks the new model's busiest)
    ("?window=1h&model=m&mode=eagle3", True, False, ("z", "eagle3"), "?window=1h&model=z"),
    # a mode picked on its own is kept, the default too once another was picked
    ("?window=1h&model=m", False, True, ("m", "eagle3"), "?window=1h&model=m&mode=eagle3"),
    ("?window=1h&model=m&mode=eagle3", False, True, ("m", "ngram"), "?window=1h&model=m&mode=ngram"),
    # nothing new: no navigation
    ("?window=1h&model=m&mode=eagle3", True, True, ("m", "eagle3"), no_update),
])
def test_the_url_keeps_the_picked_mode(search, model_changed, mode_changed, picked, expected):
    assert c.search_with_mode(search, *picked, model_changed=model_changed, mode_changed=mode_changed,
                              options=["ngram", "eagle3"]) == expected
    assert state.parse_search("?model=m&mode=ngram").mode == "ngram"


class RefusesWindows(FakeClient):
    def summary(self, model, view=None, *, start=None, end=None):
        raise ApiError(422, "window='99999d': longer than 100 years", code="invalid_window")


@pytest.mark.parametrize("page", [acceptance, model])
def test_a_refused_window_keeps_the_model_picker_filled_and_says_why_in_the_charts(page, monkeypatch):
    monkeypatch.setattr(page, "get_client", RefusesWindows)  # the page's callback, on the fake API
    out = page.update({"window": "99999d", "model": "m"}, 0, 0, "light")
    assert "This window cannot be shown" in _text(out[0])
    assert out[2] == ["m", "z-old"] and out[3] == "m"
    figs = [o for o in out if hasattr(o, "layout")]
    assert figs and all("cannot be shown" in f.layout.annotations[0].text for f in figs if f.layout.annotations[0].text)
