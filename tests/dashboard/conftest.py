"""Dashboard tests. Dash pages register themselves on import, which needs the app to exist first, so it is
built once here, at collection (nothing listens on its API URL: unit tests pass fake clients)."""

from __future__ import annotations

from dashboard.app import create_app

APP = create_app("http://127.0.0.1:9")
