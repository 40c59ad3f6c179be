"""Dashboard tests. Dash pages register themselves on import, which needs the app to exist first, so it is
built once here, at collection (nothing listens on its API URL: unit tests pass fake clients)."""

from __future__ import annotations

import pytest

from dashboard.app import create_app
from tests.dashboard.browser import browser_context
from tests.support.deadline import deadline_ms

APP = create_app("http://127.0.0.1:9")


@pytest.fixture(scope="module")
def browser(chromium_bin):
    """One headless Chromium context per test module (a module may override it, e.g. to log in first)."""
    with browser_context(chromium_bin) as ctx:
        yield ctx


@pytest.fixture(scope="module", params=[(1440, 900), (390, 844)], ids=["desktop", "phone"])
def desktop_and_phone(request, chromium_bin):
    """A context at 1440 px, then one at a phone's 390 px (its `width`): a module that checks both sizes
    makes it its `browser`."""
    width, height = request.param
    with browser_context(chromium_bin, width=width, height=height) as ctx:
        ctx.width = width
        yield ctx


@pytest.fixture
def page(browser):
    """A new page of the module's context; a script error in it fails the test (a test may also read the
    errors so far as `page.js_errors`)."""
    pg = browser.new_page()
    pg.set_default_timeout(deadline_ms(120))  # every wait ends on its event; this only catches a hang
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.js_errors = errors
    yield pg
    pg.close()
    assert not errors, errors
