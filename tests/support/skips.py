"""Find external binaries, or skip loudly. A skip names what is missing and how `make test` installs it,
and is also emitted as a warning so it shows in the warnings summary, not only in `-ra` output."""

from __future__ import annotations

import shutil
import warnings

import pytest

INSTALL_HINTS = {
    "prometheus": "Debian package `prometheus` (make test installs it when run as root with apt-get)",
    "promtool": "Debian package `prometheus` (ships promtool)",
    "chromium": "Debian package `chromium` (Playwright uses /usr/bin/chromium; never `playwright install`)",
    "docker-compose": "Debian package `docker-compose`",
    "helm": "`make test` fetches it (scripts/fetch_helm.py: python -m scripts.fetch_helm), or put helm on PATH",
    "prometheus-alertmanager": "Debian package `prometheus-alertmanager` (make test installs it when run as root)",
    "victoria-metrics": "Debian package `victoria-metrics` (make test installs it when run as root)",
}


class MissingDependencyWarning(UserWarning):
    pass


def skip_missing(what: str, hint: str | None = None) -> None:
    reason = f"MISSING DEPENDENCY: {what} not found; install: {hint or INSTALL_HINTS.get(what, what)}"
    warnings.warn(reason, MissingDependencyWarning, stacklevel=2)
    pytest.skip(reason)


def require_binary(name: str, *alternatives: str) -> str:
    """The path of the first of name/alternatives on PATH, else skip the test loudly."""
    for candidate in (name, *alternatives):
        path = shutil.which(candidate)
        if path:
            return path
    skip_missing(name)
    raise AssertionError("unreachable")


def chromium_path() -> str:
    return require_binary("chromium", "chromium-browser", "google-chrome")
